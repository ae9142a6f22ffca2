"""The course's reference matrix product, which lesson 12 reads: C = A @ B with tl.dot.

Why this kernel exists
======================

A matrix product does 2 * M * N * K floating-point operations on M * K + K * N inputs: for
large matrices it is the first kernel of the course whose speed limit is arithmetic, not
memory, but only if each value loaded from memory serves many operations. One program per
BLOCK_M x BLOCK_N tile of C does that: it walks K in steps of BLOCK_K, loads a BLOCK_M x
BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B per step, and lets ``tl.dot`` (the GPU's
tensor cores) multiply them into a float32 accumulator that never leaves the chip. Every
element it loads is used BLOCK_N (or BLOCK_M) times. Lesson 12 derives this in plain Python
and has the learner write the simple version in ``matmul.py``; this file adds what makes it
fast:

1. ``_matmul``: the kernel. Programs are numbered in *grouped* order: GROUP_M tile rows at a
   time, column by column, so that the programs running together share row panels of A and
   column panels of B in the L2 cache instead of each fetching its own. Rows past M and
   columns past N wrap around to real ones (``% M``, ``% N``), so the loads need no mask in
   those directions; the store's mask drops what the wrapped lanes compute. The K edge is
   masked with 0 on both operands, and not masked at all when K is a multiple of BLOCK_K
   (``EVEN_K``, decided before the launch).
2. ``CONFIGS``: the tile shapes the autotuner times for each new (M, N, K, dtype), each with
   the reason it is in the table.
3. ``matmul(a, b)``: checks its arguments (with the numbers and the fix in every message),
   allocates C, and launches: through the autotuner on a GPU, with one fixed configuration in
   Triton's interpreter (which cannot time anything).

Inputs are float32, float16 or bfloat16 (both of one dtype), of any strides; C has their
dtype. The sum is float32. On NVIDIA GPUs ``tl.dot`` multiplies float32 inputs as TF32 (10
bits of mantissa; Triton's docstring warns they may be truncated, not rounded), as torch does
only when asked (``allow_tf32``, off by default); 16-bit inputs are multiplied exactly.
Importing this module defines the kernel and does nothing else.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["CONFIGS", "INTERPRETER_CONFIG", "MAX_OFFSET", "TileConfig", "matmul"]

#: Largest element offset the kernel computes in 32-bit integers: (rows - 1) * row stride +
#: (columns - 1) * column stride of every operand must stay below it.
MAX_OFFSET = 2**31 - 1


@dataclass(frozen=True)
class TileConfig:
    """One row of the tuning table: the tile of C, the K step, the grouping, the launch."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int

    def config(self) -> triton.Config:
        return triton.Config({"BLOCK_M": self.block_m, "BLOCK_N": self.block_n,
                              "BLOCK_K": self.block_k, "GROUP_M": self.group_m},
                             num_warps=self.num_warps, num_stages=self.num_stages)

    def shared_bytes(self, element_bytes: int) -> int:
        """Shared memory the software pipeline holds: num_stages tiles of A and of B."""
        return self.num_stages * (self.block_m + self.block_n) * self.block_k * element_bytes

    @property
    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} group {self.group_m}, "
                f"{self.num_warps} warps, {self.num_stages} stages")


# The autotuning table: the autotuner times every row that fits in shared memory the first time
# it meets an (M, N, K, dtype) and keeps the fastest for the next calls. Few rows, each there
# for a reason: every row costs a compile and a timing run per new shape.
CONFIGS = (
    # Large 16-bit products: the widest tile that fits three pipeline stages (2 bytes *
    # (128 + 256) * 64 * 3 = 144 KiB); 8 warps make two warpgroups on Hopper's tensor cores.
    TileConfig(128, 256, 64, 8, 8, 3),
    # The same tile, one stage deeper (192 KiB): more loads in flight per program.
    TileConfig(128, 256, 64, 8, 8, 4),
    # The transposed shape, for products whose N is the smaller side.
    TileConfig(256, 128, 64, 8, 8, 3),
    # Square 128 tiles: twice the programs of the wide tiles, for mid-sized products.
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(128, 128, 64, 8, 8, 3),
    # Thin K step, deep pipeline: what the Triton tutorials use on Ampere-class GPUs.
    TileConfig(64, 256, 32, 8, 4, 4),
    # Small products (or few tiles): more, smaller programs keep every multiprocessor busy.
    TileConfig(128, 64, 64, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(64, 64, 64, 8, 4, 3),
)

#: The configuration the interpreter runs (it times nothing, so there is nothing to tune).
INTERPRETER_CONFIG = TileConfig(32, 32, 32, 4, 4, 1)


@triton.jit
def _matmul(
    c_ptr,  # the output C, (M, N), in the inputs' dtype
    a_ptr,  # A, (M, K)
    b_ptr,  # B, (K, N)
    stride_cm, stride_cn,  # elements between neighbours down a column and along a row of C
    stride_am, stride_ak,  # the same for A
    stride_bk, stride_bn,  # the same for B
    M, N, K,  # C is M x N; the sum runs over K
    BLOCK_M: tl.constexpr,  # rows of C per program
    BLOCK_N: tl.constexpr,  # columns of C per program
    BLOCK_K: tl.constexpr,  # the K step: one tile of A is BLOCK_M x BLOCK_K
    GROUP_M: tl.constexpr,  # tile rows visited together before moving on (L2 reuse)
    EVEN_K: tl.constexpr,  # K % BLOCK_K == 0: no step needs the K mask
):
    """One program computes one BLOCK_M x BLOCK_N tile of C = A @ B.

    Preconditions: every BLOCK a power of two, at least 16 (tl.dot's K on a GPU, and its M
    and N too before Triton 3.5); M and N at least 1; every offset below 2**31. Any strides.
    """
    # Which tile: programs come in groups of GROUP_M tile rows; inside a group they go down a
    # column of tiles before moving right, so neighbours in time share panels of A and B.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    height = min(tiles_m - first_m, GROUP_M)  # the last group may have fewer tile rows
    pid_m = first_m + (pid % per_group) % height
    pid_n = (pid % per_group) // height

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    steps = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # Rows past M read row r % M, a real one, so the loads need no M or N mask; the store
    # below is masked, so what those rows compute is never written.
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + steps[None, :] * stride_ak
    b_ptrs = b_ptr + steps[:, None] * stride_bk + (cols % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)  # (BLOCK_M, BLOCK_K)
            b = tl.load(b_ptrs)  # (BLOCK_K, BLOCK_N)
        else:  # the last step pads K with 0 in both tiles: 0 * anything adds nothing
            a = tl.load(a_ptrs, mask=steps[None, :] < K - k0, other=0.0)
            b = tl.load(b_ptrs, mask=steps[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)  # acc += a @ b on the tensor cores, summed in float32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)  # one rounding, at the end
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


# EVEN_K follows from K and the configuration's BLOCK_K; the autotuner passes BLOCK_K first.
_matmul_even_k = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})(
    _matmul)


def _fits_in_shared_memory(configs, named_args, **kwargs):
    """Drop the rows whose pipeline would not fit the GPU's shared memory for this dtype."""
    a = named_args["a_ptr"]
    limit = getattr(torch.cuda.get_device_properties(a.device), "shared_memory_per_block_optin",
                    0)
    if not limit:
        return configs
    rows = [row for row in CONFIGS if row.shared_bytes(a.element_size()) <= limit]
    kept = [c for c in configs if any(c.kwargs == row.config().kwargs and
                                      c.num_stages == row.num_stages and
                                      c.num_warps == row.num_warps for row in rows)]
    return kept or configs[-1:]


_matmul_tuned = triton.autotune(
    configs=[row.config() for row in CONFIGS], key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _fits_in_shared_memory})(_matmul_even_k)

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _interpreted() -> bool:
    """True when the kernel was defined under TRITON_INTERPRET=1 and so runs on the CPU."""
    return not isinstance(_matmul, triton.runtime.jit.JITFunction)


def _on_device(t: torch.Tensor):
    """Make ``t``'s GPU the current one for the launch (Triton launches on the current one)."""
    if t.device.index in (None, torch.cuda.current_device()):
        return contextlib.nullcontext()
    return torch.cuda.device(t.device)


def _check(a: object, b: object) -> None:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 2:
            raise ValueError(f"matmul: {name} must be 2-D, got shape {tuple(t.shape)}: for a "
                             "batch, loop over it or reshape to 2-D")
        if t.dtype not in _DTYPES:
            raise TypeError(f"matmul: {name} has dtype {t.dtype}; the kernel takes float32, "
                            f"float16 or bfloat16: convert with {name}.float()")
        wanted = "cpu" if _interpreted() else "cuda"
        if t.device.type != wanted:
            where = ("Triton's interpreter (TRITON_INTERPRET=1 was set when reference_matmul "
                     "was imported), which reads CPU memory" if wanted == "cpu"
                     else "the CUDA GPU")
            raise ValueError(f"matmul: {name} is on {t.device}, but the kernel runs in {where}: "
                             f"pass {name}.{wanted}()")
        offset = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
        if offset > MAX_OFFSET:
            raise ValueError(f"matmul: {name} spans {offset + 1} elements, more than the "
                             f"kernel's 32-bit offsets reach ({MAX_OFFSET + 1}): split the "
                             "product into smaller ones")
    if a.dtype != b.dtype:
        raise TypeError(f"matmul: a is {a.dtype} and b is {b.dtype}: convert one, e.g. "
                        f"b.to({a.dtype})")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's "
                         f"{a.shape[1]} columns must equal b's {b.shape[0]} rows")
    if a.device != b.device:
        raise ValueError(f"matmul: a is on {a.device} and b on {b.device}: put both on one")


def matmul(a: torch.Tensor, b: torch.Tensor, *, config: TileConfig | None = None) -> torch.Tensor:
    """C = A @ B for 2-D float tensors of one dtype and any strides; C has their dtype.

    On a GPU the tile shape comes from the autotuner (``CONFIGS``) unless ``config`` names
    one; in the interpreter ``config`` defaults to ``INTERPRETER_CONFIG``.
    """
    _check(a, b)
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return c
    if k == 0:
        return c.zero_()  # an empty sum is 0
    args = (c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), m, n, k)
    if config is None and not _interpreted():
        def grid(meta):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

        with _on_device(a):
            _matmul_tuned[grid](*args)
        return c
    config = config or INTERPRETER_CONFIG
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    launch = _matmul_even_k[grid]
    if _interpreted():
        launch(*args, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
               GROUP_M=config.group_m)
        return c
    with _on_device(a):
        launch(*args, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
               GROUP_M=config.group_m, num_warps=config.num_warps, num_stages=config.num_stages)
    return c


def forget_choices() -> None:
    """Forget the autotuner's picks: the next call of each product times the table again.
    The bench does this between rounds, so each round's figure includes the autotuner's own
    choice, which varies from run to run where several rows time within noise of each other."""
    getattr(_matmul_tuned, "cache", {}).clear()


def chosen_config(a: torch.Tensor, b: torch.Tensor) -> TileConfig | None:
    """The row of ``CONFIGS`` the autotuner picked for this product, once it has run."""
    cached = getattr(_matmul_tuned, "cache", {})
    m, k = a.shape
    n = b.shape[1]
    for key, config in cached.items():
        if tuple(key[:3]) == (m, n, k) and str(a.dtype) in key:
            for row in CONFIGS:
                if config.kwargs == row.config().kwargs and config.num_warps == row.num_warps \
                        and config.num_stages == row.num_stages:
                    return row
    return None
