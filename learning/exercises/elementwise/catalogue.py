"""Other elementwise versions: the indexing mistakes lessons 01 and 06 warn about, and correct
versions in other styles."""

from learning.grader.catalogue import Version

PYTHON = (
    Version("no mask", "python", "no-mask", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                out[offset] = max(x[offset] + y[offset], 0.0)
    '''),
    Version("mask with <=", "python", "no-mask", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset <= len(x):
                    out[offset] = max(x[offset] + y[offset], 0.0)
    '''),
    Version("too few programs", "python", "grid-too-small", '''
        def add_relu_python(x, y, BLOCK):
            out = [math.nan] * len(x)
            for pid in range(len(x) // BLOCK):
                add_relu_program(pid, x, y, out, BLOCK)
            return out
    '''),
    Version("offsets start one lane late", "python", "first-element-unwritten", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane + 1
                if offset < len(x):
                    out[offset] = max(x[offset] + y[offset], 0.0)
    '''),
    Version("mask drops the last element", "python", "off-by-one-mask", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset < len(x) - 1:
                    out[offset] = max(x[offset] + y[offset], 0.0)
    '''),
    Version("add without the ReLU", "python", "no-relu", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset < len(x):
                    out[offset] = x[offset] + y[offset]
    '''),
    Version("ReLU on each input", "python", "relu-before-add", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset < len(x):
                    out[offset] = max(x[offset], 0.0) + max(y[offset], 0.0)
    '''),
    Version("writes into x", "python", "mutated-input", '''
        def add_relu_python(x, y, BLOCK):
            for pid in range((len(x) + BLOCK - 1) // BLOCK):
                add_relu_program(pid, x, y, x, BLOCK)
            return list(x)
    '''),
    Version("forgets to return", "python", "returned-none", '''
        def add_relu_python(x, y, BLOCK):
            out = [math.nan] * len(x)
            for pid in range((len(x) + BLOCK - 1) // BLOCK):
                add_relu_program(pid, x, y, out, BLOCK)
    '''),
    Version("offsets ignore the program id", "python", "same-block", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                if lane < len(x):
                    out[lane] = max(x[lane] + y[lane], 0.0)
    '''),
    Version("the length misspelt", "python", "error:name-not-defined", '''
        def add_relu_python(x, y, BLOCK):
            out = [math.nan] * len(x)
            for pid in range((n + BLOCK - 1) // BLOCK):
                add_relu_program(pid, x, y, out, BLOCK)
            return out
    '''),
    Version("the lanes of a program never advance", "python", "timed-out", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            lane = 0
            while lane < BLOCK:
                offset = pid * BLOCK + lane
                if offset < len(x):
                    out[offset] = max(x[offset] + y[offset], 0.0)
    '''),
    Version("each sum doubled", "python", "unknown", '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset < len(x):
                    out[offset] = max(2.0 * (x[offset] + y[offset]), 0.0)
    '''),
)

_KERNEL = '''
        @triton.jit
        def add_relu_kernel(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offsets = {offsets}
            mask = {mask}
            x = tl.load(x_ptr + offsets{load_mask})
            y = tl.load(y_ptr + offsets{load_mask})
            tl.store(out_ptr + offsets, {value}{store_mask})
'''


def _kernel(offsets="pid * BLOCK + tl.arange(0, BLOCK)", mask="offsets < n",
            load_mask=", mask=mask", store_mask=", mask=mask",
            value="tl.maximum(x + y, 0.0)") -> str:
    return _KERNEL.format(offsets=offsets, mask=mask, load_mask=load_mask,
                          store_mask=store_mask, value=value)


TRITON = (
    Version("no mask", "triton", "out-of-bounds", _kernel(load_mask="", store_mask="")),
    Version("masked loads, unmasked store", "triton", "out-of-bounds", _kernel(store_mask="")),
    Version("mask with <=", "triton", "out-of-bounds", _kernel(mask="offsets <= n")),
    Version("offsets start one lane late", "triton", "first-element-unwritten",
            _kernel(offsets="pid * BLOCK + tl.arange(0, BLOCK) + 1")),
    Version("mask drops the last element", "triton", "off-by-one-mask",
            _kernel(mask="offsets < n - 1")),
    Version("offsets ignore the program id", "triton", "same-block",
            _kernel(offsets="tl.arange(0, BLOCK)")),
    Version("too few programs", "triton", "grid-too-small", '''
        def add_relu_triton(x, y):
            out = torch.empty_like(x)
            n = x.numel()
            add_relu_kernel[(n // 1024,)](out, x, y, n, BLOCK=1024)
            return out
    '''),
    Version("add without the ReLU", "triton", "no-relu", _kernel(value="x + y")),
    Version("ReLU on each input", "triton", "relu-before-add",
            _kernel(value="tl.maximum(x, 0.0) + tl.maximum(y, 0.0)")),
    Version("returns float32 for float16", "triton", "wrong-dtype", '''
        def add_relu_triton(x, y):
            out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            n = x.numel()
            add_relu_kernel[(triton.cdiv(n, 1024),)](out, x, y, n, BLOCK=1024)
            return out
    '''),
    Version("returns float16 for float32", "triton", "wrong-dtype", '''
        def add_relu_triton(x, y):
            out = torch.empty(x.shape, dtype=torch.float16, device=x.device)
            n = x.numel()
            add_relu_kernel[(triton.cdiv(n, 1024),)](out, x, y, n, BLOCK=1024)
            return out
    '''),
    Version("writes into x", "triton", "mutated-input", '''
        def add_relu_triton(x, y):
            n = x.numel()
            add_relu_kernel[(triton.cdiv(n, 1024),)](x, x, y, n, BLOCK=1024)
            return x.clone()
    '''),
    Version("BLOCK = n", "triton", "error:arange-power-of-two", '''
        def add_relu_triton(x, y):
            out = torch.empty_like(x)
            n = x.numel()
            add_relu_kernel[(1,)](out, x, y, n, BLOCK=n)
            return out
    '''),
    Version("the launch leaves out n", "triton", "error:missing-argument", '''
        def add_relu_triton(x, y):
            out = torch.empty_like(x)
            add_relu_kernel[(triton.cdiv(x.numel(), 1024),)](out, x, y, BLOCK=1024)
            return out
    '''),
    Version("x minus y", "triton", "unknown", _kernel(value="tl.maximum(x - y, 0.0)")),
    # adds onto what torch.empty left (the check's NaN): where the sum is 0, the fill shows
    # through unchanged, which is no sign that nothing was stored there
    Version("atomic add into an output from torch.empty", "triton", "follows-the-fill",
            _kernel().replace("tl.store(", "tl.atomic_add(")),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("no helper, one loop per program", "python", None, '''
        def add_relu_python(x, y, BLOCK):
            n = len(x)
            out = [math.nan] * n
            for pid in range(-(-n // BLOCK)):
                for offset in range(pid * BLOCK, min(pid * BLOCK + BLOCK, n)):
                    out[offset] = max(x[offset] + y[offset], 0.0)
            return out
    '''),
    Version("math.ceil for the grid, where() for the value", "python", None, '''
        def add_relu_program(pid, x, y, out, BLOCK):
            for lane in range(BLOCK):
                offset = pid * BLOCK + lane
                if offset >= len(x):
                    break
                total = x[offset] + y[offset]
                out[offset] = total if total > 0 else 0.0

        def add_relu_python(x, y, BLOCK):
            out = [math.nan] * len(x)
            for pid in range(math.ceil(len(x) / BLOCK)):
                add_relu_program(pid, x, y, out, BLOCK)
            return out
    '''),
    Version("tl.where and a small block", "triton", None, '''
        @triton.jit
        def add_relu_kernel(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            total = tl.load(x_ptr + offsets, mask=mask, other=0.0) + tl.load(
                y_ptr + offsets, mask=mask, other=0.0)
            tl.store(out_ptr + offsets, tl.where(total > 0, total, 0.0), mask=mask)

        def add_relu_triton(x, y):
            out = torch.empty_like(x)
            n = x.numel()
            add_relu_kernel[(triton.cdiv(n, 256),)](out, x, y, n, BLOCK=256)
            return out
    '''),
    Version("a grid function and a block from the size", "triton", None, '''
        def add_relu_triton(x, y):
            out = torch.empty_like(x)
            n = x.numel()
            block = min(4096, triton.next_power_of_2(max(n, 1)))
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
            add_relu_kernel[grid](out, x, y, n, BLOCK=block)
            return out
    '''),
)
