"""The course's reference attention, which lesson 13 reads: FlashAttention's forward pass.

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

Inputs are float32, float16 or bfloat16 tensors of one dtype, shaped (batch, heads, seq, d) with
any strides but a last one of 1 (a (batch, seq, heads, d) tensor transposed is fine); d is a
power of two from 16 to 128. Causal attention needs seq_q == seq_k. The sums are float32. On
NVIDIA GPUs ``tl.dot`` multiplies float32 inputs as TF32 (10 bits of mantissa; Triton's
docstring warns they may be truncated, not rounded), as torch does only when asked
(``allow_tf32``, off by default). Importing this module defines the kernel and does nothing else.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["CONFIGS", "HEAD_DIMS", "INTERPRETER_CONFIG", "TileConfig", "attention"]

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
):
    """One program computes BLOCK_M rows of the output of one (batch, head).

    Preconditions: the last dimension of every tensor has stride 1; offsets inside one head
    below 2**31; CAUSAL only with seq_q == seq_k; BLOCK_M % BLOCK_N == 0.
    """
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

    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)

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


@triton.jit
def _attention_tma(
    out_tiles, q_tiles, k_tiles, v_tiles,  # descriptors of (batch, heads, seq, HEAD_DIM) tensors
    n_heads, seq_q, seq_k, qk_scale,  # as in _attention
    DTYPE: tl.constexpr,  # the tensors' dtype, by name: the autotuner's key (see _TUNED)
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
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
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
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


def _tuned(kernel, descriptors: bool):
    # A descriptor carries no dtype the autotuner could read into its key, so _attention_tma
    # names its tensors' dtype in DTYPE; _attention's key has it from its pointers.
    key = ["seq_q", "seq_k", "HEAD_DIM", "CAUSAL"] + (["DTYPE"] if descriptors else [])
    configs = [row.config() for row in CONFIGS]
    for config in configs if descriptors else ():
        config.pre_hook = _set_tile_shapes
    return triton.autotune(configs=configs, key=key,
                           prune_configs_by={"early_config_prune": _fits_in_shared_memory})(kernel)


# The two kernels, by whether tiles move through tensor descriptors, and their autotuned forms.
_KERNELS = {False: _attention, True: _attention_tma}
_TUNED = {descriptors: _tuned(kernel, descriptors) for descriptors, kernel in _KERNELS.items()}

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _interpreted() -> bool:
    """True when the kernel was defined under TRITON_INTERPRET=1 and so runs on the CPU."""
    return not isinstance(_attention, triton.runtime.jit.JITFunction)


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


def _check(q: object, k: object, v: object, causal: bool) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(f"attention: {name} must be 4-D (batch, heads, seq, d), got shape "
                             f"{tuple(t.shape)}: add the missing axes with {name}[None]")
        if t.dtype not in _DTYPES:
            raise TypeError(f"attention: {name} has dtype {t.dtype}; the kernel takes float32, "
                            f"float16 or bfloat16: convert with {name}.half()")
        wanted = "cpu" if _interpreted() else "cuda"
        if t.device.type != wanted:
            where = ("Triton's interpreter (TRITON_INTERPRET=1 was set when reference_attention "
                     "was imported), which reads CPU memory" if wanted == "cpu"
                     else "the CUDA GPU")
            raise ValueError(f"attention: {name} is on {t.device}, but the kernel runs in "
                             f"{where}: pass {name}.{wanted}()")
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(f"attention: {name}'s last dimension has stride {t.stride(-1)}, "
                             f"not 1: pass {name}.contiguous()")
        offset = sum((size - 1) * abs(stride) for size, stride in zip(t.shape[2:], t.stride()[2:]))
        if offset > MAX_OFFSET:
            raise ValueError(f"attention: one head of {name} spans {offset + 1} elements, more "
                             f"than the kernel's 32-bit offsets reach ({MAX_OFFSET + 1})")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"attention: q is {q.dtype}, k is {k.dtype} and v is {v.dtype}: "
                        f"convert them to one, e.g. k.to({q.dtype})")
    if not q.device == k.device == v.device:
        raise ValueError(f"attention: q is on {q.device}, k on {k.device} and v on {v.device}: "
                         "put all three on one")
    if q.shape[:2] != k.shape[:2] or k.shape != v.shape:
        raise ValueError(f"attention: q is {tuple(q.shape)}, k is {tuple(k.shape)} and v is "
                         f"{tuple(v.shape)}: batch and heads must agree, and k and v must have "
                         "one shape")
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"attention: q's head dim is {d} and k's {k.shape[-1]}: they must agree")
    if d not in HEAD_DIMS:
        raise ValueError(f"attention: head dim {d} is not one of {HEAD_DIMS} (tl.arange needs "
                         "a power of two, tl.dot at least 16): pad q, k and v with zeros to the "
                         "next one (zeros change no score) and slice the output")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"attention: causal attention needs seq_q == seq_k, got {q.shape[2]} "
                         f"queries and {k.shape[2]} keys: which keys query i sees is then a "
                         "choice (aligned at the start or at the end); slice q or k to agree")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, *,
              config: TileConfig | None = None,
              descriptors: bool | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for (batch, heads, seq, d) tensors; the output has q's shape
    and dtype and is contiguous.

    On a GPU the tile shape comes from the autotuner (``CONFIGS``) unless ``config`` names one;
    in the interpreter ``config`` defaults to ``INTERPRETER_CONFIG``. ``descriptors`` picks
    the kernel: ``_attention_tma`` where ``_descriptors_fit`` allows it, unless False;
    ``_attention`` otherwise (True is for tests of the descriptor kernel in the interpreter).
    """
    _check(q, k, v, causal)
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    out = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    if seq_k == 0:
        return out.zero_()  # no key to attend to: zeros, as torch's SDPA returns
    if descriptors is None:
        descriptors = _descriptors_fit(out, q, k, v)
    if config is None and _interpreted():
        config = INTERPRETER_CONFIG
    if descriptors:
        args = (*_descriptors((out, q, k, v), config), heads, seq_q, seq_k,
                LOG2_E / math.sqrt(d))
        meta = {"DTYPE": str(q.dtype)}
    else:
        args = (out, q, k, v, *out.stride()[:3], *q.stride()[:3], *k.stride()[:3],
                *v.stride()[:3], heads, seq_q, seq_k, LOG2_E / math.sqrt(d))
        meta = {}
    if config is None:
        def grid(tile):
            return (triton.cdiv(seq_q, tile["BLOCK_M"]), batch * heads)

        with _on_device(q):
            _TUNED[descriptors][grid](*args, HEAD_DIM=d, CAUSAL=causal, **meta)
        return out
    grid = (triton.cdiv(seq_q, config.block_m), batch * heads)
    options = {} if _interpreted() else {"num_warps": config.num_warps,
                                         "num_stages": config.num_stages}
    with _on_device(q) if not _interpreted() else contextlib.nullcontext():
        _KERNELS[descriptors][grid](*args, HEAD_DIM=d, CAUSAL=causal, BLOCK_M=config.block_m,
                                    BLOCK_N=config.block_n, **meta, **options)
    return out


def chosen_config(q: torch.Tensor, k: torch.Tensor, causal: bool) -> TileConfig | None:
    """The row of ``CONFIGS`` the autotuner picked for these shapes, once it has run."""
    cached = getattr(_TUNED[_descriptors_fit(q, k)], "cache", {})
    wanted = (q.shape[2], k.shape[2], q.shape[-1], causal)
    for key, config in cached.items():
        if tuple(key[:4]) == wanted and str(q.dtype) in str(key):
            for row in CONFIGS:
                if config.kwargs == row.config().kwargs and config.num_warps == row.num_warps \
                        and config.num_stages == row.num_stages:
                    return row
    return None
