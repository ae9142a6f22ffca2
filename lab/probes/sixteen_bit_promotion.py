"""Does a 16-bit softmax kernel need its .to(tl.float32)? Lesson 08 quotes the answer.

Runs lesson 08's kernel with and without the conversion on float16 and bfloat16 rows and says
whether the outputs are bit-identical (tl.max promotes 16-bit floats to FP32 before it
reduces), then tries tl.exp on a float16 block (Triton accepts only FP32 and FP64 there).
``python lab/probes/sixteen_bit_promotion.py`` compiles the kernels on a CUDA GPU; without one it
runs them in Triton's interpreter, float16 only (the interpreter mishandles bfloat16). Its
outputs of 2026-12-01: lab/results/sixteen_bit_promotion.txt (an H200, Triton 3.6) and
sixteen_bit_promotion_interpreter.txt (Triton 3.9's interpreter).
"""

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from learning.grader import mode as kernel_mode  # noqa: E402

MODE = kernel_mode.select()  # before triton: the interpreter is chosen when kernels are defined

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from learning.exercises.softmax import solution as good  # noqa: E402


@triton.jit
def no_conversion(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                  BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    maximum = tl.max(x, axis=0)
    numerator = tl.exp(x - maximum)
    denominator = tl.sum(numerator, axis=0)
    tl.store(output_ptr + row * output_row_stride + offsets, numerator / denominator, mask=mask)

@triton.jit
def exp16(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.exp(tl.load(x_ptr + o)))

where = "Triton's interpreter" if MODE.interpret else torch.cuda.get_device_name()
print("torch", torch.__version__, "triton", triton.__version__, where, datetime.date.today())
for dtype in (torch.float16,) if MODE.interpret else (torch.float16, torch.bfloat16):
    for cols in (300, 1000, 4097):
        x = (3 * torch.randn(64, cols, device=MODE.device)).to(dtype)
        a = good.softmax_triton(x)
        b = torch.empty_like(x)
        no_conversion[(64,)](b, x, b.stride(0), x.stride(0), cols,
                             BLOCK=triton.next_power_of_2(cols))
        print(dtype, cols, "bit-identical without .to(tl.float32):", torch.equal(a, b))
try:
    exp16[(1,)](torch.zeros(16, device=MODE.device, dtype=torch.float16), BLOCK=16)
    print("tl.exp on float16: compiled")
except Exception as e:
    print("tl.exp on float16:", type(e).__name__, str(e).splitlines()[-1][:200] if str(e) else "")
