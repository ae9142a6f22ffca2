"""Tensor arguments described as data, so the grader and the learner's process build the same ones.

The grader computes its float64 reference from ``TensorSpec.exact()`` without importing torch;
the learner's process turns the same spec into a real tensor with ``build`` (dtype, device and
memory layout included). Nothing here imports torch at module level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The memory layouts a case can ask for. Padding holds a value a correct kernel never reads, so
# reading it (a row offset computed from n_cols instead of the row stride) changes the result.
LAYOUTS = ("contiguous", "row-strided", "column-slice", "expanded", "transposed", "seq-heads")
PADDING_VALUE = 1.0e4
GUARD_ELEMENTS = 4096
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """A tensor argument: its logical values, the dtype to store them in, and the layout.

    - ``contiguous``: a fresh tensor.
    - ``row-strided``: every second row of a taller tensor (``buffer[::2]``): row stride
      2 * n_cols, last-dimension stride 1.
    - ``column-slice``: the first n_cols columns of a wider tensor (``buffer[:, :n_cols]``):
      row stride larger than n_cols, last-dimension stride 1.
    - ``expanded``: one value broadcast to the whole shape (``torch.full((), v).expand(...)``),
      every stride 0, as ``y.sum().backward()`` hands autograd's gradient on; ``values`` must
      all be equal.
    - ``transposed``: the transpose of a contiguous (cols, rows) tensor (``buffer.T``): row
      stride 1, last-dimension stride rows, as a matrix product's ``b.T`` operand arrives.
    - ``seq-heads``: 4-D values (batch, heads, seq, d) held as a contiguous (batch, seq, heads,
      d) tensor transposed (``buffer.transpose(1, 2)``), as attention's q, k and v arrive from
      a model: strides (seq * heads * d, d, heads * d, 1).

    ``guard`` is what the bands around a contiguous tensor on a GPU hold: a read past its end
    gets that value (NaN makes even a read multiplied by 0 show).
    """

    values: Any  # numpy float64 array: any shape when contiguous, 2-D (rows, cols) otherwise
    dtype: str = "float32"
    layout: str = "contiguous"
    guard: float = PADDING_VALUE

    def __post_init__(self):
        if self.dtype not in FLOAT_DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}; use one of {FLOAT_DTYPES}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}; use one of {LAYOUTS}")
        if self.layout == "seq-heads" and self.values.ndim != 4:
            raise ValueError(f"layout 'seq-heads' needs a 4-D tensor, not {self.values.ndim}-D")
        if self.layout not in ("contiguous", "seq-heads") and self.values.ndim != 2:
            raise ValueError(f"layout {self.layout!r} needs a 2-D tensor, not {self.values.ndim}-D")
        if self.layout == "expanded" and (self.values != self.values.flat[0]).any():
            raise ValueError("layout 'expanded' needs every value equal")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    def exact(self):
        """The values as float64 after rounding to the storage dtype: what the kernel sees."""
        return round_to_dtype(self.values, self.dtype)

    def stored(self):
        """``exact()``, carrying the memory the tensor lives in as ``build`` lays it out on the
        CPU: ``storage`` (a flat float64 buffer, padding included) and ``row_stride``, so that
        a replay can read what a kernel with a wrong row offset reads."""
        import numpy as np

        exact = self.exact()
        if self.layout == "seq-heads":  # (batch, seq, heads, d) memory; a row is (b, s)
            storage, row_stride = exact.transpose(0, 2, 1, 3).ravel(), exact.shape[1] * \
                exact.shape[3]
        elif self.layout == "contiguous" or exact.ndim != 2:
            storage, row_stride = exact.ravel(), exact.shape[-1] if exact.ndim else 1
        elif self.layout == "expanded":
            storage, row_stride = exact.ravel()[:1].copy(), 0
        elif self.layout == "transposed":
            storage, row_stride = exact.T.ravel(), 1
        else:
            rows, cols = exact.shape
            if self.layout == "row-strided":
                buffer = np.full((2 * rows, cols), PADDING_VALUE)
                buffer[::2] = exact
                row_stride = 2 * cols
            else:
                buffer = np.full((rows, cols + max(3, cols // 2 + 1)), PADDING_VALUE)
                buffer[:, :cols] = exact
                row_stride = buffer.shape[1]
            storage = round_to_dtype(buffer, self.dtype).ravel()
        view = exact.view(_stored_array())
        view.storage, view.row_stride, view.stored_dtype = storage, row_stride, self.dtype
        return view

    def describe(self) -> str:
        shape = "×".join(str(n) for n in self.shape)
        layout = "" if self.layout == "contiguous" else f", {self.layout}"
        return f"{self.dtype} tensor {shape}{layout}"

    def build(self, device: str):
        """The torch tensor this spec stands for (called in the learner's process)."""
        import torch

        dtype = getattr(torch, self.dtype)
        exact = torch.from_numpy(self.exact())
        if self.layout == "contiguous":
            if device == "cpu":  # the interpreter's bounds checking guards CPU tensors
                return exact.to(dtype=dtype).contiguous()
            # On a GPU nothing stops a read past the end: surround the tensor with bands of
            # PADDING_VALUE, so that such a read changes the result instead of going unseen.
            size = exact.numel()
            buffer = torch.full((size + 2 * GUARD_ELEMENTS,), self.guard, dtype=dtype,
                                device=device)
            buffer[GUARD_ELEMENTS:GUARD_ELEMENTS + size] = exact.flatten().to(device, dtype)
            return buffer[GUARD_ELEMENTS:GUARD_ELEMENTS + size].view(exact.shape)
        if self.layout == "seq-heads":
            return exact.transpose(1, 2).contiguous().to(device=device, dtype=dtype).transpose(1, 2)
        rows, cols = exact.shape
        if self.layout == "transposed":
            return exact.T.contiguous().to(device=device, dtype=dtype).T
        if self.layout == "expanded":
            return torch.full((), float(exact.flatten()[0]), dtype=dtype, device=device).expand(
                rows, cols)
        if self.layout == "row-strided":
            buffer = torch.full((2 * rows, cols), PADDING_VALUE, dtype=torch.float64)
            buffer[::2] = exact
            return buffer.to(device=device, dtype=dtype)[::2]
        extra = max(3, cols // 2 + 1)
        buffer = torch.full((rows, cols + extra), PADDING_VALUE, dtype=torch.float64)
        buffer[:, :cols] = exact
        return buffer.to(device=device, dtype=dtype)[:, :cols]


_STORED_ARRAY = []


def _stored_array():
    """The ndarray subclass ``TensorSpec.stored`` returns (made on first use: no NumPy import
    at module level)."""
    if not _STORED_ARRAY:
        import numpy as np

        class StoredArray(np.ndarray):
            storage = None
            row_stride = 0
            stored_dtype = "float64"

            def __array_finalize__(self, obj):
                self.storage = getattr(obj, "storage", None)
                self.row_stride = getattr(obj, "row_stride", 0)
                self.stored_dtype = getattr(obj, "stored_dtype", "float64")

        _STORED_ARRAY.append(StoredArray)
    return _STORED_ARRAY[0]


def rows_read_at(x, row_start):
    """The (rows, cols) block a kernel reads when row r of ``x`` (from ``TensorSpec.stored``)
    starts at element ``row_start(r, cols, x.row_stride)`` of its storage; None when that
    reaches past the storage, or ``x`` carries none."""
    import numpy as np

    storage = getattr(x, "storage", None)
    if storage is None or np.ndim(x) != 2:
        return None
    rows, cols = np.shape(x)
    out = np.empty((rows, cols))
    for r in range(rows):
        start = row_start(r, cols, x.row_stride)
        if start < 0 or start + cols > storage.size:
            return None
        out[r] = storage[start:start + cols]
    return out


def round_to_dtype(values, dtype: str):
    """float64 copy of ``values`` rounded to ``dtype`` (round-to-nearest-even, as torch does)."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    if dtype == "float64":
        return values.copy()
    if dtype in ("float32", "float16"):
        return values.astype(dtype).astype(np.float64)
    # bfloat16: the top 16 bits of a float32, rounded to nearest even; numpy has no bfloat16.
    as_float32 = values.astype(np.float32)
    bits = as_float32.view(np.uint32).astype(np.uint64)
    rounding = 0x7FFF + ((bits >> 16) & 1)
    rounded = ((bits + rounding) >> 16) << 16
    finite = np.isfinite(as_float32)
    out = np.where(finite, rounded, bits & 0xFFFF0000).astype(np.uint32)
    return out.view(np.float32).astype(np.float64)
