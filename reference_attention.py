"""The course's reference attention, which lessons 13 and 14 read: FlashAttention's forward
pass and its backward pass.

Why this kernel exists
======================

Attention computes softmax(q k^T / sqrt(d)) v for every head: for a sequence of L tokens, L x L
scores per head. Written as three kernels (scores, softmax, p @ v), the scores go to memory and
come back twice, and for long sequences they are many times the size of q, k and v (lesson
13 computes how many); the kernels are then memory-bound however fast the GPU multiplies.
This kernel keeps them on chip: one program takes BLOCK_M query rows of one head, walks the
keys in blocks of BLOCK_N with workshop A1's running maximum and sum, rescales a float32
accumulator of p @ v whenever the maximum grows, and writes only the output. Lesson 13
derives it in plain Python and has the learner write the simple version in ``attention.py``;
this file adds what makes it fast:

1. ``_attention_step`` and ``_attention``: the kernel. Scores are taken in base 2: the scale is
   multiplied by log2(e) once, and in the unmasked blocks each score costs one multiply-add and
   one ``exp2``. The loop is split in two: the key blocks every query row of the program sees
   whole run with no mask at all, and only the blocks that hold the causal diagonal or the end
   of the keys build a mask. Offsets of a head start from 64-bit integers, so batches of any
   size fit.
2. ``_attention_tma``: the same kernel with its tiles moved by tensor descriptors that the
   launcher makes once on the host, over the (batch, heads, seq, d) tensors themselves: on
   Hopper and later each tile is one TMA copy, bounded in every dimension, with no address
   arithmetic in the threads. On an H200 at seq 4096, d = 128 it ran faster than the same
   tiles through descriptors that each program made for itself, and at d = 64 as fast as
   ``_attention`` (``lab/probes/attention_variants.py``, results in
   ``lab/results/attention_variants.json``).
   ``attention`` runs it where the GPU, the Triton version and the tensors' alignment allow.
3. ``CONFIGS``: the tile shapes the autotuner times for each new (seq_q, seq_k, d, causal,
   dtype), each with the reason it is in the table.
4. ``attention(q, k, v, causal)``: checks its arguments (with the numbers and the fix in every
   message), allocates the output, and launches: through the autotuner on a GPU, with one fixed
   configuration in Triton's interpreter (which cannot time anything).
   ``attention_forward`` also returns each query row's log-sum-exp, in base 2, for:
5. The backward pass (lesson 14): ``_attention_backward_preprocess`` (D = rowsum(dO * O)),
   ``_attention_backward_dkdv`` (a program per block of keys walks the queries) and
   ``_attention_backward_dq`` (a program per block of queries walks the keys), both recomputing
   P from the scores and the log-sum-exp; their tables ``DKDV_CONFIGS`` and ``DQ_CONFIGS``; the
   launcher ``attention_backward``.
6. ``AttentionFunction``: the forward and the backward wired for autograd through two
   torch.library operators, so that ``torch.compile(fullgraph=True)`` traces them;
   ``attention`` takes this path by itself when an input requires grad.

Inputs are float32, float16 or bfloat16 tensors of one dtype, shaped (batch, heads, seq, d) with
any strides but a last one of 1 (a (batch, seq, heads, d) tensor transposed is fine); d is a
power of two from 16 to 128. Causal attention needs seq_q == seq_k. The sums are float32. On
NVIDIA GPUs ``tl.dot`` multiplies float32 inputs as TF32 (10 bits of mantissa; Triton's
docstring warns they may be truncated, not rounded), as torch does only when asked
(``allow_tf32``, off by default). In the interpreter float64 runs too, summed in float64, so
that ``torch.autograd.gradcheck`` can check the backward pass. Importing this module defines
the kernels and the operators and does nothing else.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["CONFIGS", "DKDV_CONFIGS", "DQ_CONFIGS", "HEAD_DIMS", "INTERPRETER_BACKWARD_CONFIG",
           "INTERPRETER_CONFIG", "AttentionFunction", "BackwardConfig", "TileConfig", "attention",
           "attention_backward", "attention_forward"]

HEAD_DIMS = (16, 32, 64, 128)  # tl.arange needs a power of two; tl.dot at least 16
LOG2_E = 1.4426950408889634  # exp(x) = exp2(x * log2(e))
TMA_HEAD_DIMS = (64, 128)  # the head dims at which _attention_tma runs on a GPU (_descriptors_fit)
#: Largest element offset the kernel computes inside one head in 32-bit integers.
MAX_OFFSET = 2**31 - 1


@dataclass(frozen=True)
class TileConfig:
    """One row of the tuning table: query rows and keys per step, and the launch."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def config(self) -> triton.Config:
        return triton.Config({"BLOCK_M": self.block_m, "BLOCK_N": self.block_n},
                             num_warps=self.num_warps, num_stages=self.num_stages)

    def shared_bytes(self, head_dim: int, element_bytes: int) -> int:
        """Shared memory the software pipeline holds: q once, num_stages tiles of k and of v."""
        return (self.block_m + 2 * self.num_stages * self.block_n) * head_dim * element_bytes

    @property
    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}, {self.num_warps} warps, "
                f"{self.num_stages} stages")


# The autotuning table: every row that fits in shared memory is timed the first time the
# autotuner meets a new (seq_q, seq_k, d, causal, dtype), and the fastest is kept. BLOCK_M is a
# multiple of BLOCK_N in every row, so that the causal diagonal starts on a key block.
CONFIGS = (
    # 128 query rows in 8 warps (two warpgroups of Hopper's tensor cores, 64 rows each), 128
    # keys a step: the most work per loaded tile of k and v, for long sequences.
    TileConfig(128, 128, 8, 2),
    TileConfig(128, 128, 8, 3),
    # 64 keys a step: half the registers for the scores, deeper pipelines fit.
    TileConfig(128, 64, 8, 3),
    TileConfig(128, 64, 4, 3),
    TileConfig(128, 64, 4, 4),
    # Thinner key steps for d = 128, where a k tile and a v tile are largest.
    TileConfig(128, 32, 4, 4),
    # 64 query rows: twice the programs, for short sequences or few heads.
    TileConfig(64, 64, 4, 3),
    TileConfig(64, 32, 4, 4),
)

#: The configuration the interpreter runs (it times nothing, so there is nothing to tune).
INTERPRETER_CONFIG = TileConfig(16, 16, 4, 1)


@triton.jit
def _attention_step(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """One block of keys: scores, the running (max, sum), the rescaled accumulator. k and v
    are the block's (BLOCK_N, HEAD_DIM) tiles as stored."""
    s = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N) scores, not yet scaled
    if MASKED:  # the block holds the end of the keys or the causal diagonal
        cols = start + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        visible = cols[None, :] < seq_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s * qk_scale, -float("inf"))  # in base 2
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # A1's guard: a row whose maximum is still -inf measures from 0, not from -inf.
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(s - ref[:, None])
    else:  # every key exists and every row sees it, so every row's maximum is finite
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)  # the scale is positive
        ref = m_new
        p = tl.math.exp2(s * qk_scale - ref[:, None])  # one multiply-add and one exp2 a score
    alpha = tl.math.exp2(m_i - ref)  # 1 where the maximum did not grow
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])  # acc * alpha + p @ v, in float32
    return acc, l_i, m_new


@triton.jit
def _attention(
    out_ptr, q_ptr, k_ptr, v_ptr,  # (batch, heads, seq, HEAD_DIM) each; out is q's shape
    lse_ptr,  # (batch * heads, seq_q), written only with STORE_LSE: each row's log-sum-exp
    stride_ob, stride_oh, stride_om,  # elements between batches, heads and rows of out
    stride_qb, stride_qh, stride_qm,  # the same for q
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    n_heads, seq_q, seq_k,  # heads per batch; query rows and keys per head
    qk_scale,  # log2(e) / sqrt(HEAD_DIM): scores come out in base 2
    HEAD_DIM: tl.constexpr,  # d, a power of two from 16 to 128
    CAUSAL: tl.constexpr,  # query i sees keys j <= i (seq_q == seq_k)
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; BLOCK_M is a multiple of it
    STORE_LSE: tl.constexpr,  # keep each row's log-sum-exp for the backward pass
):
    """One program computes BLOCK_M rows of the output of one (batch, head).

    Preconditions: the last dimension of every tensor has stride 1; offsets inside one head
    below 2**31; CAUSAL only with seq_q == seq_k; BLOCK_M % BLOCK_N == 0.
    """
    # float64 inputs (the interpreter's gradcheck) keep float64 sums; the rest sum in float32
    ACC: tl.constexpr = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks visit the most keys: start them first, so that the
        pid_m = tl.num_programs(0) - 1 - pid_m  # short ones fill the gaps at the end
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    out_ptr += batch * stride_ob + head * stride_oh

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], mask=rows[:, None] < seq_q,
                other=0.0)  # (BLOCK_M, HEAD_DIM), on chip for the whole loop
    k_ptrs = k_ptr + cols[:, None] * stride_kn + dims[None, :]  # (BLOCK_N, HEAD_DIM)
    v_ptrs = v_ptr + cols[:, None] * stride_vn + dims[None, :]

    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=ACC)
    l_i = tl.zeros((BLOCK_M,), dtype=ACC)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=ACC)

    # Stage 1: key blocks that every row of this program sees whole. Causal: the blocks left of
    # the program's diagonal; otherwise every whole block of keys. No mask on loads or scores.
    if CAUSAL:
        whole_end = pid_m * BLOCK_M
    else:
        whole_end = seq_k - seq_k % BLOCK_N
    for start in range(0, whole_end, BLOCK_N):
        k = tl.load(k_ptrs + start * stride_kn)
        v = tl.load(v_ptrs + start * stride_vn)
        acc, l_i, m_i = _attention_step(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                        BLOCK_N, False, CAUSAL)
    # Stage 2: the blocks that need a mask: the diagonal (causal), or the last, cut block.
    if CAUSAL:
        end = tl.minimum((pid_m + 1) * BLOCK_M, seq_k)
    else:
        end = seq_k
    for start in range(whole_end, end, BLOCK_N):
        inside = (start + cols)[:, None] < seq_k
        k = tl.load(k_ptrs + start * stride_kn, mask=inside, other=0.0)
        v = tl.load(v_ptrs + start * stride_vn, mask=inside, other=0.0)
        acc, l_i, m_i = _attention_step(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                        BLOCK_N, True, CAUSAL)

    out = acc / l_i[:, None]  # one division, at the end
    tl.store(out_ptr + rows[:, None] * stride_om + dims[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)
    if STORE_LSE:  # log2 of the row's sum of 2^(scaled score): m_i is in base 2 already
        tl.store(lse_ptr + pid_bh.to(tl.int64) * seq_q + rows, m_i + tl.math.log2(l_i),
                 mask=rows < seq_q)


@triton.jit
def _attention_tma(
    out_tiles, q_tiles, k_tiles, v_tiles,  # descriptors of (batch, heads, seq, HEAD_DIM) tensors
    lse_ptr,  # as in _attention: a plain pointer, one float per row
    n_heads, seq_q, seq_k, qk_scale,  # as in _attention
    DTYPE: tl.constexpr,  # the tensors' dtype, by name: the autotuner's key (see _TUNED)
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, STORE_LSE: tl.constexpr,
):
    """``_attention`` with every tile moved by a tensor descriptor. The launcher makes one per
    tensor on the host, with the tensor's own shape and strides and a block of (1, 1, rows,
    HEAD_DIM): a load names (batch, head, first row, 0), and on Hopper and later it is one TMA
    copy, which the compiler pipelines with no address arithmetic in the threads. Each
    dimension is bounded on its own, so rows past the end of a head read as zeros and are not
    stored: only the scores need a mask.

    Preconditions as ``_attention``, and every tensor's start and strides but the last a
    multiple of 16 bytes (``_descriptors_fit``).
    """
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = pid_bh // n_heads
    head = pid_bh % n_heads
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_tiles.load([batch, head, first_row, 0]).reshape(BLOCK_M, HEAD_DIM)
    ACC: tl.constexpr = tl.float64 if q_tiles.dtype == tl.float64 else tl.float32
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=ACC)
    l_i = tl.zeros((BLOCK_M,), dtype=ACC)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=ACC)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in range(0, whole_end, BLOCK_N):
        k = k_tiles.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = v_tiles.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _attention_step(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                        BLOCK_N, False, CAUSAL)
    for start in range(whole_end, end, BLOCK_N):
        k = k_tiles.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = v_tiles.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _attention_step(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                        BLOCK_N, True, CAUSAL)
    out = (acc / l_i[:, None]).to(out_tiles.dtype)
    out_tiles.store([batch, head, first_row, 0], out.reshape(1, 1, BLOCK_M, HEAD_DIM))
    if STORE_LSE:
        tl.store(lse_ptr + pid_bh.to(tl.int64) * seq_q + rows, m_i + tl.math.log2(l_i),
                 mask=rows < seq_q)


def _fits_in_shared_memory(configs, named_args, **kwargs):
    """Drop the rows whose pipeline would not fit the GPU's shared memory for this d and dtype."""
    q = named_args["q_ptr"] if "q_ptr" in named_args else named_args["q_tiles"].base
    limit = getattr(torch.cuda.get_device_properties(q.device), "shared_memory_per_block_optin",
                    0)
    head_dim = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM", q.shape[-1]))
    if not limit:
        return configs
    kept = [c for c in configs if TileConfig(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"],
                                             c.num_warps, c.num_stages)
            .shared_bytes(head_dim, q.element_size()) <= limit]
    return kept or configs[-1:]


def _set_tile_shapes(args: dict) -> None:
    """Before each launch of ``_attention_tma``: give the descriptors the blocks of the row of
    ``CONFIGS`` being launched (a descriptor's block is part of it, not of the kernel)."""
    q_rows, k_rows, d = args["BLOCK_M"], args["BLOCK_N"], args["HEAD_DIM"]
    for name, rows in (("out_tiles", q_rows), ("q_tiles", q_rows), ("k_tiles", k_rows),
                       ("v_tiles", k_rows)):
        args[name].block_shape = [1, 1, rows, d]


def _timed(kernel_call, quantiles):
    """Time one of the autotuner's trials with the benchmarker of the GPU it runs on, found at
    the first trial: Triton 3.3's autotuner looks for the GPU as it is made, so a module that
    builds one at import, as this does, could not be imported on a machine without a GPU."""
    from triton.runtime import driver

    return driver.active.get_benchmarker()(kernel_call, quantiles=quantiles)


def _tuned(kernel, descriptors: bool):
    # A descriptor carries no dtype the autotuner could read into its key, so _attention_tma
    # names its tensors' dtype in DTYPE; _attention's key has it from its pointers.
    key = ["seq_q", "seq_k", "HEAD_DIM", "CAUSAL"] + (["DTYPE"] if descriptors else [])
    configs = [row.config() for row in CONFIGS]
    for config in configs if descriptors else ():
        config.pre_hook = _set_tile_shapes
    return triton.autotune(configs=configs, key=key, do_bench=_timed,
                           prune_configs_by={"early_config_prune": _fits_in_shared_memory})(kernel)


# The two kernels, by whether tiles move through tensor descriptors, and their autotuned forms.
_KERNELS = {False: _attention, True: _attention_tma}
_TUNED = {descriptors: _tuned(kernel, descriptors) for descriptors, kernel in _KERNELS.items()}

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# Decided once, at import: torch.compile traces attention() and cannot evaluate isinstance on a
# Triton kernel, but reads a module's constant.
_INTERPRETED = not isinstance(_attention, triton.runtime.jit.JITFunction)


def _interpreted() -> bool:
    """True when the kernel was defined under TRITON_INTERPRET=1 and so runs on the CPU."""
    return _INTERPRETED


def _on_device(t: torch.Tensor):
    """Make ``t``'s GPU the current one for the launch (Triton launches on the current one)."""
    if t.device.index in (None, torch.cuda.current_device()):
        return contextlib.nullcontext()
    return torch.cuda.device(t.device)


def _descriptor_class():
    """Triton's host-side tensor descriptor, or None where this Triton has none."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


def _descriptors_fit(*tensors: torch.Tensor) -> bool:
    """Whether ``_attention_tma`` runs for these tensors: a Triton with host-side tensor
    descriptors, a GPU with TMA (compute capability 9.0 or later), every tensor's start and
    strides but the last on a multiple of 16 bytes, as a descriptor needs; and d = 64 or 128,
    the head dims at which it was measured (faster than ``_attention`` at 128, as fast at 64:
    lesson 13's table of variants). Elsewhere ``_attention`` runs."""
    if _interpreted() or _descriptor_class() is None:
        return False
    if tensors[0].shape[-1] not in TMA_HEAD_DIMS:
        return False
    if torch.cuda.get_device_capability(tensors[0].device)[0] < 9:
        return False
    return all(t.data_ptr() % 16 == 0 and all(stride * t.element_size() % 16 == 0
                                              for stride in t.stride()[:3]) for t in tensors)


def _descriptors(tensors, config: TileConfig | None):
    """A descriptor for each of out, q, k and v: the tensor's own shape and strides, with the
    blocks of ``config`` (or, for the autotuner, blocks that ``_set_tile_shapes`` replaces)."""
    make = _descriptor_class()
    q_rows, k_rows = (config.block_m, config.block_n) if config else (16, 16)
    return tuple(make(t, list(t.shape), list(t.stride()), [1, 1, rows, t.shape[-1]])
                 for t, rows in zip(tensors, (q_rows, q_rows, k_rows, k_rows)))


def _check_tensor(fn: str, name: str, t: object) -> None:
    """What every tensor argument must be: 4-D, a dtype the kernels take, on the device they
    run on, a last dimension of stride 1 and one head within 32-bit offsets."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim != 4:
        raise ValueError(f"{fn}: {name} must be 4-D (batch, heads, seq, d), got shape "
                         f"{tuple(t.shape)}: add the missing axes with {name}[None]")
    if t.dtype == torch.float64 and not _interpreted():
        raise TypeError(f"{fn}: {name} is float64, which the kernels take only in Triton's "
                        f"interpreter (where gradcheck runs): convert with {name}.float()")
    if t.dtype not in _DTYPES and t.dtype != torch.float64:
        raise TypeError(f"{fn}: {name} has dtype {t.dtype}; the kernel takes float32, "
                        f"float16 or bfloat16: convert with {name}.half()")
    wanted = "cpu" if _interpreted() else "cuda"
    if t.device.type != wanted:
        where = ("Triton's interpreter (TRITON_INTERPRET=1 was set when reference_attention "
                 "was imported), which reads CPU memory" if wanted == "cpu" else "the CUDA GPU")
        raise ValueError(f"{fn}: {name} is on {t.device}, but the kernel runs in {where}: "
                         f"pass {name}.{wanted}()")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{fn}: {name}'s last dimension has stride {t.stride(-1)}, not 1: "
                         f"pass {name}.contiguous()")
    offset = sum((size - 1) * abs(stride) for size, stride in zip(t.shape[2:], t.stride()[2:]))
    if offset > MAX_OFFSET:
        raise ValueError(f"{fn}: one head of {name} spans {offset + 1} elements, more than the "
                         f"kernel's 32-bit offsets reach ({MAX_OFFSET + 1})")


def _check(q: object, k: object, v: object, causal: bool, fn: str = "attention") -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(fn, name, t)
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{fn}: q is {q.dtype}, k is {k.dtype} and v is {v.dtype}: "
                        f"convert them to one, e.g. k.to({q.dtype})")
    if not q.device == k.device == v.device:
        raise ValueError(f"{fn}: q is on {q.device}, k on {k.device} and v on {v.device}: "
                         "put all three on one")
    if q.shape[:2] != k.shape[:2] or k.shape != v.shape:
        raise ValueError(f"{fn}: q is {tuple(q.shape)}, k is {tuple(k.shape)} and v is "
                         f"{tuple(v.shape)}: batch and heads must agree, and k and v must have "
                         "one shape")
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"{fn}: q's head dim is {d} and k's {k.shape[-1]}: they must agree")
    if d not in HEAD_DIMS:
        raise ValueError(f"{fn}: head dim {d} is not one of {HEAD_DIMS} (tl.arange needs "
                         "a power of two, tl.dot at least 16): pad q, k and v with zeros to the "
                         "next one (zeros change no score) and slice the output")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"{fn}: causal attention needs seq_q == seq_k, got {q.shape[2]} "
                         f"queries and {k.shape[2]} keys: which keys query i sees is then a "
                         "choice (aligned at the start or at the end); slice q or k to agree")


def _lse_dtype(dtype: torch.dtype) -> torch.dtype:
    """The log-sum-exp's dtype: float32, or float64 for float64 inputs (gradcheck)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _launch_forward(q, k, v, causal: bool, config: TileConfig | None,
                    descriptors: bool | None, lse: torch.Tensor | None) -> torch.Tensor:
    """The forward's launch, for checked arguments; writes ``lse`` too when it is given."""
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    out = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    if seq_k == 0:
        if lse is not None:
            lse.fill_(-math.inf)  # log of an empty sum
        return out.zero_()  # no key to attend to: zeros, as torch's SDPA returns
    if descriptors is None:
        descriptors = _descriptors_fit(out, q, k, v)
    if config is None and _interpreted():
        config = INTERPRETER_CONFIG
    store_lse = lse is not None
    lse_arg = lse if store_lse else out  # never written without STORE_LSE
    if descriptors:
        args = (*_descriptors((out, q, k, v), config), lse_arg, heads, seq_q, seq_k,
                LOG2_E / math.sqrt(d))
        meta = {"DTYPE": str(q.dtype)}
    else:
        args = (out, q, k, v, lse_arg, *out.stride()[:3], *q.stride()[:3], *k.stride()[:3],
                *v.stride()[:3], heads, seq_q, seq_k, LOG2_E / math.sqrt(d))
        meta = {}
    if config is None:
        def grid(tile):
            return (triton.cdiv(seq_q, tile["BLOCK_M"]), batch * heads)

        with _on_device(q):
            _TUNED[descriptors][grid](*args, HEAD_DIM=d, CAUSAL=causal, STORE_LSE=store_lse,
                                      **meta)
        return out
    grid = (triton.cdiv(seq_q, config.block_m), batch * heads)
    options = {} if _interpreted() else {"num_warps": config.num_warps,
                                         "num_stages": config.num_stages}
    with _on_device(q) if not _interpreted() else contextlib.nullcontext():
        _KERNELS[descriptors][grid](*args, HEAD_DIM=d, CAUSAL=causal, BLOCK_M=config.block_m,
                                    BLOCK_N=config.block_n, STORE_LSE=store_lse, **meta,
                                    **options)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, *,
              config: TileConfig | None = None,
              descriptors: bool | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for (batch, heads, seq, d) tensors; the output has q's shape
    and dtype and is contiguous.

    On a GPU the tile shape comes from the autotuner (``CONFIGS``) unless ``config`` names one;
    in the interpreter ``config`` defaults to ``INTERPRETER_CONFIG``. ``descriptors`` picks
    the kernel: ``_attention_tma`` where ``_descriptors_fit`` allows it, unless False;
    ``_attention`` otherwise (True is for tests of the descriptor kernel in the interpreter).

    Differentiable: where autograd must record the call (an input requires grad) or
    torch.compile traces it, the call goes through ``AttentionFunction``, whose backward pass
    is ``attention_backward``; the tiles are then the autotuner's, so ``config`` and
    ``descriptors`` must be left out.
    """
    _check(q, k, v, causal)
    if _must_be_seen(q, k, v):
        if config is not None or descriptors is not None:
            raise ValueError("attention: config and descriptors choose a launch of the forward "
                             "alone; with inputs that require grad (or under torch.compile) "
                             "the forward and backward pick their own tiles: leave them out, "
                             "or call it on q.detach(), k.detach(), v.detach()")
        return AttentionFunction.apply(q, k, v, causal)
    return _launch_forward(q, k, v, causal, config, descriptors, None)


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      *, config: TileConfig | None = None,
                      descriptors: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``attention`` that also keeps what the backward pass needs: (out, lse).

    ``lse`` is (batch, heads, seq_q), contiguous, float32 (float64 for float64 inputs): each
    query row's log-sum-exp of its scores **in base 2**, lse[i] = log2(sum_j 2^(s_ij)) with
    s_ij = (q_i . k_j) * log2(e) / sqrt(d), the kernel's own scores. It is the natural
    log-sum-exp times log2(e) (multiply by ln(2) to get lesson 14's), so that the backward
    pass recomputes P[i, j] = 2^(s_ij - lse[i]) with one multiply-add and one exp2.
    """
    _check(q, k, v, causal, "attention_forward")
    lse = torch.empty(q.shape[:3], dtype=_lse_dtype(q.dtype), device=q.device)
    return _launch_forward(q, k, v, causal, config, descriptors, lse), lse


def chosen_config(q: torch.Tensor, k: torch.Tensor, causal: bool) -> TileConfig | None:
    """The row of ``CONFIGS`` the autotuner picked for these shapes, once it has run."""
    return _chosen(_TUNED[_descriptors_fit(q, k)], CONFIGS,
                   (q.shape[2], k.shape[2], q.shape[-1], causal), q.dtype)


def _chosen(tuned, table, wanted: tuple, dtype: torch.dtype) -> TileConfig | None:
    """The row of ``table`` an autotuner keeps for the key that starts with ``wanted``."""
    cached = getattr(tuned, "cache", {})
    for key, config in cached.items():
        if tuple(key[:len(wanted)]) == wanted and str(dtype) in str(key):
            for row in table:
                if config.kwargs == row.config().kwargs and config.num_warps == row.num_warps \
                        and config.num_stages == row.num_stages:
                    return row
    return None


# ---------------------------------------------------------------------------------------------
# The backward pass (lesson 14)
# ---------------------------------------------------------------------------------------------
#
# With S = scale * Q K^T, P = softmax(S) row by row and O = P V, the gradients of a loss whose
# gradient with respect to O is dO are (lesson 11's softmax backward, row by row):
#
#     dV = P^T dO          dP = dO V^T          dS = P * (dP - D),  D = rowsum(dO * O)
#     dQ = scale * dS K    dK = scale * dS^T Q
#
# (D[i] = sum_j P[i, j] dP[i, j] = dO[i] . O[i]: lesson 11's dot product of y and dy, computed
# from O instead of P.) FlashAttention's backward never stores P either: it recomputes each
# tile of scores from q and k and turns it into P with the forward's log-sum-exp,
# P = 2^(s - lse), with no running maximum: lse already holds the row's whole sum. Three
# kernels:
#
# 1. ``_attention_backward_preprocess``: D for every query row, once (BLOCK rows a program).
# 2. ``_attention_backward_dkdv``: one program per block of BLOCK_N keys of one head keeps k, v
#    and float32 accumulators of dK and dV on chip and walks the blocks of BLOCK_M queries. It
#    works on transposed tiles (keys down, queries across): s^T = k q^T, so that P^T dO and
#    dS^T Q are plain products of what it holds. Causal programs start at their diagonal
#    (queries before the block's first key see none of its keys); only the blocks holding the
#    diagonal get the causal mask, and only the last, cut block of queries masks its loads.
# 3. ``_attention_backward_dq``: one program per block of BLOCK_M queries keeps q, dO, lse, D
#    and a float32 accumulator of dQ and walks the blocks of BLOCK_N keys; causal programs stop
#    at their diagonal, and the longest (last) query blocks start first, as in the forward.
#
# Each gradient is written once, by the one program that owns its rows: no atomics, the same
# result on every run. The price is that both kernels recompute the scores and dP, five tile
# products per (query block, key block) pair against the forward's two (hence 2.5 times the
# forward's floating-point operations). Every exponential is one exp2: the scale times log2(e)
# (qk_scale) turns raw scores into the forward's base-2 ones, and the 1 / sqrt(d) of
# dQ and dK is applied once, to the finished accumulators.

#: Query rows per program of the preprocess kernel (it reads dO and O once: memory-bound).
PREPROCESS_ROWS = 64


@triton.jit
def _attention_backward_preprocess(
    delta_ptr,  # (batch * heads, seq_q), contiguous, float32: D, one number per query row
    out_ptr, dout_ptr,  # (batch, heads, seq_q, HEAD_DIM): the forward's output and its gradient
    stride_ob, stride_oh, stride_om,  # elements between batches, heads and rows of out
    stride_dob, stride_doh, stride_dom,  # the same for dout
    n_heads, seq_q,  # heads per batch; query rows per head
    HEAD_DIM: tl.constexpr,  # d
    BLOCK_M: tl.constexpr,  # query rows per program
):
    """D[i] = sum over c of dO[i, c] * O[i, c] for BLOCK_M rows of one (batch, head)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    ACC: tl.constexpr = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)
    inside = rows[:, None] < seq_q
    o = tl.load(out_ptr + batch * stride_ob + head * stride_oh + rows[:, None] * stride_om
                + dims[None, :], mask=inside, other=0.0)
    do = tl.load(dout_ptr + batch * stride_dob + head * stride_doh + rows[:, None] * stride_dom
                 + dims[None, :], mask=inside, other=0.0)
    delta = tl.sum(o.to(ACC) * do.to(ACC), axis=1)  # (BLOCK_M,)
    tl.store(delta_ptr + pid_bh.to(tl.int64) * seq_q + rows, delta, mask=rows < seq_q)


@triton.jit
def _dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start, cols,
               stride_qm, stride_dom, seq_q, qk_scale,
               BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDED: tl.constexpr):
    """One block of BLOCK_M queries, from row ``start``, against the program's keys ``cols``:
    adds its share to dk and dv, (BLOCK_N, HEAD_DIM) float32 each. Transposed tiles: keys
    down, queries across. BOUNDED: the block holds the end of the queries; the rows past it
    load as zeros (q, dO and D), so their P^T dO and dS^T Q add nothing and need no mask.
    CAUSAL_MASK: the block holds the diagonal; P^T is 0 where the key follows the query."""
    rows = start + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    if BOUNDED:
        inside = rows < seq_q
        q = tl.load(q_ptrs + start * stride_qm, mask=inside[:, None], other=0.0)
        do = tl.load(do_ptrs + start * stride_dom, mask=inside[:, None], other=0.0)
        lse = tl.load(lse_ptr + rows, mask=inside, other=0.0)
        delta = tl.load(delta_ptr + rows, mask=inside, other=0.0)
    else:
        q = tl.load(q_ptrs + start * stride_qm)  # (BLOCK_M, HEAD_DIM)
        do = tl.load(do_ptrs + start * stride_dom)
        lse = tl.load(lse_ptr + rows)  # (BLOCK_M,)
        delta = tl.load(delta_ptr + rows)
    s_t = tl.dot(k, tl.trans(q))  # (BLOCK_N, BLOCK_M) raw scores, s_t[j, i] = k_j . q_i
    p_t = tl.math.exp2(s_t * qk_scale - lse[None, :])  # P^T, recomputed: one FMA, one exp2
    if CAUSAL_MASK:
        p_t = tl.where(cols[:, None] <= rows[None, :], p_t, 0.0)
    dv += tl.dot(p_t.to(do.dtype), do)  # dV += P^T dO
    dp_t = tl.dot(v, tl.trans(do))  # (BLOCK_N, BLOCK_M): dP^T = V dO^T
    ds_t = p_t * (dp_t - delta[None, :])  # dS^T = P^T * (dP^T - D)
    dk += tl.dot(ds_t.to(q.dtype), q)  # dK += dS^T Q (the scale once, at the end)
    return dk, dv


@triton.jit
def _attention_backward_dkdv(
    dk_ptr, dv_ptr,  # (batch, heads, seq_k, HEAD_DIM) each, contiguous: one set of strides
    q_ptr, k_ptr, v_ptr, dout_ptr,  # q and dout: (batch, heads, seq_q, d); k, v: seq_k rows
    lse_ptr, delta_ptr,  # (batch * heads, seq_q), contiguous: base-2 log-sum-exp, and D
    stride_dkb, stride_dkh, stride_dkn,  # elements between batches, heads and rows of dk, dv
    stride_qb, stride_qh, stride_qm,  # the same for q
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    stride_dob, stride_doh, stride_dom,  # the same for dout
    n_heads, seq_q, seq_k,  # heads per batch; query rows and keys per head
    sm_scale,  # 1 / sqrt(HEAD_DIM): dS is the gradient of the scaled scores
    qk_scale,  # log2(e) / sqrt(HEAD_DIM): the forward's base-2 scale
    HEAD_DIM: tl.constexpr,  # d, a power of two from 16 to 128
    CAUSAL: tl.constexpr,  # query i sees keys j <= i (seq_q == seq_k)
    BLOCK_M: tl.constexpr,  # query rows per step
    BLOCK_N: tl.constexpr,  # keys per program, a multiple of BLOCK_M
):
    """One program computes dK and dV for BLOCK_N keys of one (batch, head).

    Preconditions: the last dimension of every tensor has stride 1; offsets inside one head
    below 2**31; CAUSAL only with seq_q == seq_k; BLOCK_N % BLOCK_M == 0 (the diagonal's first
    query block starts at the program's first key).
    """
    ACC: tl.constexpr = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    pid_n = tl.program_id(0)  # key block 0 sees the most queries when causal: it starts first
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    dout_ptr += batch * stride_dob + head * stride_doh
    lse_ptr += pid_bh.to(tl.int64) * seq_q
    delta_ptr += pid_bh.to(tl.int64) * seq_q

    first_key = pid_n * BLOCK_N
    cols = first_key + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    dims = tl.arange(0, HEAD_DIM)
    # Keys past the end load as zeros; their rows of dk and dv are computed but never stored.
    key_inside = cols[:, None] < seq_k
    k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :], mask=key_inside, other=0.0)
    v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :], mask=key_inside, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=ACC)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=ACC)
    steps = tl.arange(0, BLOCK_M)
    q_ptrs = q_ptr + steps[:, None] * stride_qm + dims[None, :]  # (BLOCK_M, HEAD_DIM), row 0
    do_ptrs = dout_ptr + steps[:, None] * stride_dom + dims[None, :]

    if CAUSAL:
        # The diagonal: the query blocks from the first key to the last, masked.
        for start in range(first_key, tl.minimum(first_key + BLOCK_N, seq_q), BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start, cols,
                                stride_qm, stride_dom, seq_q, qk_scale, BLOCK_M, True, True)
        whole_start = first_key + BLOCK_N  # every later query sees every key of the block
    else:
        whole_start = 0
    whole_end = seq_q - seq_q % BLOCK_M
    for start in range(whole_start, whole_end, BLOCK_M):  # no mask at all
        dk, dv = _dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start, cols,
                            stride_qm, stride_dom, seq_q, qk_scale, BLOCK_M, False, False)
    for start in range(tl.maximum(whole_start, whole_end), seq_q, BLOCK_M):  # the cut block
        dk, dv = _dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start, cols,
                            stride_qm, stride_dom, seq_q, qk_scale, BLOCK_M, False, True)

    dk *= sm_scale  # S = scale * q k^T, so dK = scale * dS^T Q
    offsets = batch * stride_dkb + head * stride_dkh + cols[:, None] * stride_dkn + dims[None, :]
    tl.store(dk_ptr + offsets, dk.to(dk_ptr.dtype.element_ty), mask=key_inside)
    tl.store(dv_ptr + offsets, dv.to(dv_ptr.dtype.element_ty), mask=key_inside)


@triton.jit
def _dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, rows, stride_kn, stride_vn, seq_k,
             qk_scale, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
             BOUNDED: tl.constexpr):
    """One block of BLOCK_N keys, from key ``start``, against the program's queries ``rows``:
    adds its share to dq, (BLOCK_M, HEAD_DIM) float32. BOUNDED: the block holds the end of the
    keys, which load as zeros; a missing key's score would be 0, not absent, so its P is set
    to 0 (else an exp2 could overflow and 0 * inf reach dQ). CAUSAL_MASK: as in _dkdv_step."""
    cols = start + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    if BOUNDED:
        inside = cols < seq_k
        k = tl.load(k_ptrs + start * stride_kn, mask=inside[:, None], other=0.0)
        v = tl.load(v_ptrs + start * stride_vn, mask=inside[:, None], other=0.0)
    else:
        k = tl.load(k_ptrs + start * stride_kn)  # (BLOCK_N, HEAD_DIM)
        v = tl.load(v_ptrs + start * stride_vn)
    s = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N) raw scores
    p = tl.math.exp2(s * qk_scale - lse[:, None])  # P, recomputed
    if BOUNDED:
        p = tl.where(inside[None, :], p, 0.0)
    if CAUSAL_MASK:
        p = tl.where(cols[None, :] <= rows[:, None], p, 0.0)
    dp = tl.dot(do, tl.trans(v))  # (BLOCK_M, BLOCK_N): dP = dO V^T
    ds = p * (dp - delta[:, None])  # dS = P * (dP - D)
    dq += tl.dot(ds.to(k.dtype), k)  # dQ += dS K (the scale once, at the end)
    return dq


@triton.jit
def _attention_backward_dq(
    dq_ptr,  # (batch, heads, seq_q, HEAD_DIM), contiguous
    q_ptr, k_ptr, v_ptr, dout_ptr, lse_ptr, delta_ptr,  # as for _attention_backward_dkdv
    stride_dqb, stride_dqh, stride_dqm,  # elements between batches, heads and rows of dq
    stride_qb, stride_qh, stride_qm,  # the same for q
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    stride_dob, stride_doh, stride_dom,  # the same for dout
    n_heads, seq_q, seq_k, sm_scale, qk_scale,  # as for _attention_backward_dkdv
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program, a multiple of BLOCK_N
    BLOCK_N: tl.constexpr,  # keys per step
):
    """One program computes dQ for BLOCK_M query rows of one (batch, head).

    Preconditions as for ``_attention_backward_dkdv``, with BLOCK_M % BLOCK_N == 0 (the
    diagonal's first key block starts at the program's first query).
    """
    ACC: tl.constexpr = tl.float64 if q_ptr.dtype.element_ty == tl.float64 else tl.float32
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks visit the most keys: start them first
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    dout_ptr += batch * stride_dob + head * stride_doh
    lse_ptr += pid_bh.to(tl.int64) * seq_q
    delta_ptr += pid_bh.to(tl.int64) * seq_q

    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)
    # Rows past the end load as zeros (and lse, D as 0): finite, and never stored.
    inside = rows < seq_q
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], mask=inside[:, None],
                other=0.0)  # (BLOCK_M, HEAD_DIM), on chip for the whole loop
    do = tl.load(dout_ptr + rows[:, None] * stride_dom + dims[None, :], mask=inside[:, None],
                 other=0.0)
    lse = tl.load(lse_ptr + rows, mask=inside, other=0.0)
    delta = tl.load(delta_ptr + rows, mask=inside, other=0.0)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=ACC)
    steps = tl.arange(0, BLOCK_N)
    k_ptrs = k_ptr + steps[:, None] * stride_kn + dims[None, :]  # (BLOCK_N, HEAD_DIM), key 0
    v_ptrs = v_ptr + steps[:, None] * stride_vn + dims[None, :]

    if CAUSAL:
        # Keys left of the diagonal: every row sees them whole. Then the diagonal, masked.
        for start in range(0, first_row, BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, rows, stride_kn,
                          stride_vn, seq_k, qk_scale, BLOCK_N, False, False)
        for start in range(first_row, tl.minimum(first_row + BLOCK_M, seq_k), BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, rows, stride_kn,
                          stride_vn, seq_k, qk_scale, BLOCK_N, True, True)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        for start in range(0, whole_end, BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, rows, stride_kn,
                          stride_vn, seq_k, qk_scale, BLOCK_N, False, False)
        for start in range(whole_end, seq_k, BLOCK_N):  # the cut block of keys
            dq = _dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, rows, stride_kn,
                          stride_vn, seq_k, qk_scale, BLOCK_N, False, True)

    dq *= sm_scale  # dQ = scale * dS K
    tl.store(dq_ptr + batch * stride_dqb + head * stride_dqh + rows[:, None] * stride_dqm
             + dims[None, :], dq.to(dq_ptr.dtype.element_ty), mask=inside[:, None])


# The backward's tuning tables, one per kernel, timed by the autotuner for each new (seq_q,
# seq_k, d, causal, dtype). In ``DKDV_CONFIGS`` block_n is the keys a program keeps (k and v in
# shared memory, two float32 accumulators of block_n x d in registers) and block_m the queries
# it streams a step; in ``DQ_CONFIGS`` block_m is the queries a program keeps (q, dO, one
# accumulator) and block_n the keys it streams. Each step also holds two float32 tiles of
# scores (P and dP), so the backward's tiles are smaller than the forward's. Every row compiles
# for sm_90 with no register spills at d = 64 and 128 (ptxas, Triton 3.9), but the first two.
DKDV_CONFIGS = (
    # 128 keys, 64 queries a step, two warpgroups: FlashAttention-2's shape on Hopper. At
    # d = 128 the accumulators (64 registers a thread each) and the scores (32 each) fill all
    # 255 registers, and the causal form spills a few: kept because it may still be fastest.
    TileConfig(64, 128, 8, 2),
    TileConfig(64, 128, 8, 3),
    # 32 queries a step: 32 fewer registers for the scores, no spills.
    TileConfig(32, 128, 8, 2),
    TileConfig(32, 128, 8, 3),
    # 64 keys a program: twice the programs, for short sequences or few heads.
    TileConfig(64, 64, 8, 3),
    TileConfig(32, 64, 4, 4),
)
DQ_CONFIGS = (
    # 128 queries, 64 keys a step, two warpgroups (about 210 registers a thread at d = 128).
    TileConfig(128, 64, 8, 2),
    TileConfig(128, 64, 8, 3),
    # 32 keys a step: smaller score tiles, deeper pipelines of k and v.
    TileConfig(128, 32, 8, 3),
    TileConfig(128, 32, 8, 4),
    # 64 queries a program: twice the programs, for short sequences or few heads.
    TileConfig(64, 64, 4, 3),
    TileConfig(64, 32, 4, 4),
)


@dataclass(frozen=True)
class BackwardConfig:
    """The tiles of one backward pass: a row for each of its two main kernels."""

    dkdv: TileConfig  # block_n keys a program, block_m queries a step
    dq: TileConfig  # block_m queries a program, block_n keys a step

    def __post_init__(self):
        for tile in (self.dkdv, self.dq):
            for size in (tile.block_m, tile.block_n):
                if size < 16 or size & (size - 1):
                    raise ValueError(f"BackwardConfig: block {size} is not a power of two >= 16 "
                                     "(tl.arange needs a power of two, tl.dot at least 16)")
        if self.dkdv.block_n % self.dkdv.block_m:
            raise ValueError(f"BackwardConfig: dkdv keeps {self.dkdv.block_n} keys and steps "
                             f"{self.dkdv.block_m} queries; the keys must be a multiple of the "
                             "queries, so that the causal diagonal starts on a query block")
        if self.dq.block_m % self.dq.block_n:
            raise ValueError(f"BackwardConfig: dq keeps {self.dq.block_m} queries and steps "
                             f"{self.dq.block_n} keys; the queries must be a multiple of the "
                             "keys, so that the causal diagonal starts on a key block")

    @property
    def label(self) -> str:
        return f"dkdv {self.dkdv.label}; dq {self.dq.label}"


#: The configuration the interpreter runs.
INTERPRETER_BACKWARD_CONFIG = BackwardConfig(TileConfig(16, 16, 4, 1), TileConfig(16, 16, 4, 1))


def _backward_shared_bytes(kept: int, streamed: int, stages: int, head_dim: int,
                           element_bytes: int) -> int:
    """Shared memory of a backward kernel's pipeline: its two kept tiles (k and v, or q and dO)
    once, and ``stages`` copies of the two tiles it streams."""
    return (2 * kept + 2 * stages * streamed) * head_dim * element_bytes


def _backward_prune(keeps: str):
    """early_config_prune for a backward kernel that keeps BLOCK_N rows ("n": dkdv) or BLOCK_M
    rows ("m": dq): drop the rows whose pipeline would not fit the GPU's shared memory."""
    def prune(configs, named_args, **kwargs):
        q = named_args["q_ptr"]
        limit = getattr(torch.cuda.get_device_properties(q.device),
                        "shared_memory_per_block_optin", 0)
        if not limit:
            return configs
        head_dim = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM", q.shape[-1]))
        kept = [c for c in configs
                if _backward_shared_bytes(
                    c.kwargs["BLOCK_N"] if keeps == "n" else c.kwargs["BLOCK_M"],
                    c.kwargs["BLOCK_M"] if keeps == "n" else c.kwargs["BLOCK_N"],
                    c.num_stages, head_dim, q.element_size()) <= limit]
        return kept or configs[-1:]

    return prune


_BACKWARD_KEY = ["seq_q", "seq_k", "HEAD_DIM", "CAUSAL"]  # and the pointers' dtypes
_DKDV_TUNED = triton.autotune(
    configs=[row.config() for row in DKDV_CONFIGS], key=_BACKWARD_KEY, do_bench=_timed,
    prune_configs_by={"early_config_prune": _backward_prune("n")})(_attention_backward_dkdv)
_DQ_TUNED = triton.autotune(
    configs=[row.config() for row in DQ_CONFIGS], key=_BACKWARD_KEY, do_bench=_timed,
    prune_configs_by={"early_config_prune": _backward_prune("m")})(_attention_backward_dq)


def _check_saved(fn: str, q: torch.Tensor, out: object, dout: object, lse: object) -> None:
    """out and dout are q's shape, dtype and device; lse is the forward's."""
    for name, t in (("out", out), ("dout", dout)):
        _check_tensor(fn, name, t)
        if t.shape != q.shape or t.dtype != q.dtype or t.device != q.device:
            raise ValueError(f"{fn}: {name} is {tuple(t.shape)} {t.dtype} on {t.device}, but "
                             f"q is {tuple(q.shape)} {q.dtype} on {q.device}: they must agree")
    if not isinstance(lse, torch.Tensor):
        raise TypeError(f"{fn}: lse must be a torch.Tensor, got {type(lse).__name__}")
    wanted = _lse_dtype(q.dtype)
    if lse.shape != q.shape[:3] or lse.dtype != wanted or lse.device != q.device:
        raise ValueError(f"{fn}: lse is {tuple(lse.shape)} {lse.dtype} on {lse.device}, but "
                         f"the forward keeps {tuple(q.shape[:3])} {wanted} on {q.device}: pass "
                         "the lse that attention_forward returned")
    if not lse.is_contiguous():
        raise ValueError(f"{fn}: lse has strides {lse.stride()}; the kernels read it "
                         "contiguous: pass lse.contiguous()")


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       dout: torch.Tensor, lse: torch.Tensor, causal: bool = False, *,
                       config: BackwardConfig | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv): the gradients of attention given the gradient ``dout`` of its output.

    ``q``, ``k``, ``v`` and ``causal`` are the forward's arguments (as ``attention`` takes
    them), ``out`` and ``lse`` what ``attention_forward`` returned; ``dout`` is q's shape and
    dtype, any strides but a last one of 1. The gradients are contiguous, in q's dtype, summed
    in float32. On a GPU the tiles come from the autotuner (``DKDV_CONFIGS``, ``DQ_CONFIGS``)
    unless ``config`` names them; in the interpreter ``config`` defaults to
    ``INTERPRETER_BACKWARD_CONFIG``.
    """
    fn = "attention_backward"
    _check(q, k, v, causal, fn)
    _check_saved(fn, q, out, dout, lse)
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if batch * heads == 0:
        return dq, dk, dv
    if seq_k == 0 or seq_q == 0:  # an output of zeros (no keys), or no output at all
        return dq.zero_(), dk.zero_(), dv.zero_()
    if config is None and _interpreted():
        config = INTERPRETER_BACKWARD_CONFIG
    interpreted = _interpreted()

    def options(tile: TileConfig) -> dict:
        return {} if interpreted else {"num_warps": tile.num_warps,
                                       "num_stages": tile.num_stages}

    delta = torch.empty((batch, heads, seq_q), dtype=lse.dtype, device=q.device)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *dout.stride()[:3])
    scales = (heads, seq_q, seq_k, 1.0 / math.sqrt(d), LOG2_E / math.sqrt(d))
    with _on_device(q) if not interpreted else contextlib.nullcontext():
        _attention_backward_preprocess[(triton.cdiv(seq_q, PREPROCESS_ROWS), batch * heads)](
            delta, out, dout, *out.stride()[:3], *dout.stride()[:3], heads, seq_q,
            HEAD_DIM=d, BLOCK_M=PREPROCESS_ROWS, **({} if interpreted else {"num_warps": 4}))
        dkdv_args = (dk, dv, q, k, v, dout, lse, delta, *dk.stride()[:3], *strides, *scales)
        dq_args = (dq, q, k, v, dout, lse, delta, *dq.stride()[:3], *strides, *scales)
        if config is None:
            _DKDV_TUNED[lambda t: (triton.cdiv(seq_k, t["BLOCK_N"]), batch * heads)](
                *dkdv_args, HEAD_DIM=d, CAUSAL=causal)
            _DQ_TUNED[lambda t: (triton.cdiv(seq_q, t["BLOCK_M"]), batch * heads)](
                *dq_args, HEAD_DIM=d, CAUSAL=causal)
        else:
            tile = config.dkdv
            _attention_backward_dkdv[(triton.cdiv(seq_k, tile.block_n), batch * heads)](
                *dkdv_args, HEAD_DIM=d, CAUSAL=causal, BLOCK_M=tile.block_m,
                BLOCK_N=tile.block_n, **options(tile))
            tile = config.dq
            _attention_backward_dq[(triton.cdiv(seq_q, tile.block_m), batch * heads)](
                *dq_args, HEAD_DIM=d, CAUSAL=causal, BLOCK_M=tile.block_m,
                BLOCK_N=tile.block_n, **options(tile))
    return dq, dk, dv


def chosen_backward_config(q: torch.Tensor, k: torch.Tensor,
                           causal: bool) -> BackwardConfig | None:
    """The rows of ``DKDV_CONFIGS`` and ``DQ_CONFIGS`` the autotuners picked, once they ran."""
    wanted = (q.shape[2], k.shape[2], q.shape[-1], causal)
    dkdv = _chosen(_DKDV_TUNED, DKDV_CONFIGS, wanted, q.dtype)
    dq = _chosen(_DQ_TUNED, DQ_CONFIGS, wanted, q.dtype)
    return BackwardConfig(dkdv, dq) if dkdv and dq else None


# ---------------------------------------------------------------------------------------------
# Autograd and torch.compile
# ---------------------------------------------------------------------------------------------
#
# ``AttentionFunction`` is lesson 11's torch.autograd.Function for attention: its forward keeps
# q, k, v, the output and lse, and its backward runs ``attention_backward``. torch.compile cannot
# trace into a function that launches Triton kernels, so the two launchers are registered as
# operators (torch.ops.triton_course.attention_forward and .attention_backward), each with a
# fake implementation, empty tensors of the right shapes to trace with; the function calls the
# operators, and torch.compile(fullgraph=True) keeps both passes in its graph, the launches
# opaque inside. (triton_kernels.py registers softmax the same way.) ``attention`` goes through
# the function only where autograd or a tracer must see the call: the dispatcher costs host time.

_define = getattr(torch.library, "custom_op", None)  # None before torch 2.4: plain functions


def _forward_operator(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_forward(q, k, v, causal)


def _backward_operator(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       dout: torch.Tensor, lse: torch.Tensor,
                       causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return attention_backward(q, k, v, out, dout, lse, causal)


if _define is not None:
    _forward_operator = _define("triton_course::attention_forward", _forward_operator,
                                mutates_args=())
    _backward_operator = _define("triton_course::attention_backward", _backward_operator,
                                 mutates_args=())

    @_forward_operator.register_fake
    def _(q, k, v, causal):
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=_lse_dtype(q.dtype))

    @_backward_operator.register_fake
    def _(q, k, v, out, dout, lse, causal):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _must_be_seen(*tensors: torch.Tensor) -> bool:
    """Whether a call must go through AttentionFunction: torch.compile is tracing it, or
    autograd records it, or a tracer made one of the tensors (fake and functional tensors are
    subclasses)."""
    if torch.compiler.is_compiling():
        return True
    return any(type(t) not in _PLAIN or (t.requires_grad and torch.is_grad_enabled())
               for t in tensors)


class AttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(d)) v whose gradient is ``attention_backward``:
    ``AttentionFunction.apply(q, k, v, causal)``, or ``attention(q, k, v, causal)`` on inputs
    that require grad."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                causal: bool = False) -> torch.Tensor:
        out, lse = _forward_operator(q, k, v, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        if dout.stride(-1) != 1:  # out.sum().backward() sends an expanded dout: strides 0
            dout = dout.contiguous()
        dq, dk, dv = _backward_operator(q, k, v, out, dout, lse, ctx.causal)
        return dq, dk, dv, None
