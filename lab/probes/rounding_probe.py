"""How a compiled kernel rounds where Triton's interpreter rounds otherwise: tl.dot on float32
blocks (TensorFloat-32 by default: which rounding of the inputs) and a product that feeds an
add or a subtraction (which are fused into one fma, and which operand is).

    PYTHONPATH=. python lab/probes/rounding_probe.py --json lab/results/rounding.json

The interpreter multiplies float32 blocks exactly and rounds every product before the add
that follows; the GPU compiler does neither. The grader's interpreter (``sanitizer``) is meant
to round as the GPU does, so this probe measures what the GPU does, value by value:

- tl.dot with float32 inputs and each input precision, on a 16-row block (one warp) and a
  64-row one (four warps: Hopper's warp-group instruction), with one input holding values
  that sit between TensorFloat-32 numbers (a half step, above and below it, negative ones),
  the other holding ones; each result is matched against the input kept, cut (toward zero),
  rounded to nearest (ties to even) and rounded to nearest (ties away from zero);
- expressions of products and sums in float32, float16 and bfloat16: each result is matched
  against no fusion, the left product fused and the right one fused.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
import triton
import triton.language as tl

from learning.bench.rowwise import environment


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, PRECISION: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, 16)
    a = tl.load(a_ptr + rows[:, None] * 16 + cols[None, :])
    b = tl.load(b_ptr + cols[:, None] * 16 + cols[None, :])
    c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rows[:, None] * 16 + cols[None, :], c)


#: What each output of ``_products`` computes, in order
EXPRESSIONS = ("x*y - x*y", "x*y + z", "z + x*y", "x*y - z", "z - x*y", "x*y - z*w",
               "x*y + z*w", "p = x*y (stored too); p + z", "p = x*y before a loop; acc + p",
               "acc + x*y inside a loop", "x*2 + z", "(x*y + z) * w + z",
               "p = x*y before a loop of TRIPS; acc + p", "acc + x*y inside a loop of TRIPS",
               "p = x*y (stored too); p - z*w", "q = z*w (stored too); x*y + q")


@triton.jit
def _products(x_ptr, y_ptr, z_ptr, w_ptr, out_ptr, p_ptr, q_ptr, trips, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + i)
    z = tl.load(z_ptr + i)
    w = tl.load(w_ptr + i)
    tl.store(out_ptr + 0 * N + i, x * y - x * y)
    tl.store(out_ptr + 1 * N + i, x * y + z)
    tl.store(out_ptr + 2 * N + i, z + x * y)
    tl.store(out_ptr + 3 * N + i, x * y - z)
    tl.store(out_ptr + 4 * N + i, z - x * y)
    tl.store(out_ptr + 5 * N + i, x * y - z * w)
    tl.store(out_ptr + 6 * N + i, x * y + z * w)
    p = x * y
    tl.store(p_ptr + i, p)
    tl.store(out_ptr + 7 * N + i, p + z)
    acc = z
    for _ in range(1):
        acc = acc + p
    tl.store(out_ptr + 8 * N + i, acc)
    acc = z
    for _ in range(1):
        acc = acc + x * y
    tl.store(out_ptr + 9 * N + i, acc)
    tl.store(out_ptr + 10 * N + i, x * 2.0 + z)
    tl.store(out_ptr + 11 * N + i, (x * y + z) * w + z)
    acc = z
    for _ in range(trips):  # a loop the compiler cannot unroll away (trips is 1)
        acc = acc + p
    tl.store(out_ptr + 12 * N + i, acc)
    acc = z
    for _ in range(trips):
        acc = acc + x * y
    tl.store(out_ptr + 13 * N + i, acc)
    tl.store(out_ptr + 14 * N + i, p - z * w)
    q = z * w
    tl.store(q_ptr + i, q)
    tl.store(out_ptr + 15 * N + i, x * y + q)


def _tf32(values: np.ndarray, how: str) -> np.ndarray:
    """float32 values kept to TensorFloat-32's 10 stored mantissa bits."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.int64)
    low = bits & 0x1FFF
    kept = bits - low
    if how == "cut":
        out = kept
    elif how == "nearest, ties away":
        out = np.where(low >= 0x1000, kept + 0x2000, kept)
    else:  # nearest, ties to even
        odd = (kept >> 13) & 1
        out = np.where((low > 0x1000) | ((low == 0x1000) & (odd == 1)), kept + 0x2000, kept)
    return out.astype(np.uint32).view(np.float32)


def _between_values() -> np.ndarray:
    one = np.float32(1.0).view(np.uint32)
    steps = [0, 0x1000, 0x1001, 0x0FFF, 0x3000, 0x2000 + 0x1000, 0x1FFF, 1]
    values = [np.uint32(one + s).view(np.float32) for s in steps]
    values += [-v for v in values]
    return np.array(values * 4, dtype=np.float32)[:64]


def dot_rows(device) -> list[dict]:
    rows = []
    values = _between_values()
    for m, warps in ((16, 1), (64, 4)):
        for side in ("a", "b"):
            for precision in ("tf32", "tf32x3", "ieee"):
                a = np.zeros((m, 16), np.float32)
                b = np.zeros((16, 16), np.float32)
                if side == "a":
                    a[:, 0] = values[:m]
                    b[0, :] = 1.0
                    kept = values[:m, None].repeat(16, 1)
                else:
                    a[:, 0] = 1.0
                    b[0, :] = values[:16]
                    kept = np.broadcast_to(values[None, :16], (m, 16))
                c = torch.empty((m, 16), dtype=torch.float32, device=device)
                _dot[(1,)](torch.from_numpy(a).to(device), torch.from_numpy(b).to(device), c,
                           M=m, PRECISION=precision, num_warps=warps)
                got = c.cpu().numpy()
                models = {"kept": kept}
                for how in ("cut", "nearest, ties to even", "nearest, ties away"):
                    models[how] = _tf32(kept, how)
                matches = [name for name, model in models.items()
                           if np.array_equal(got.view(np.uint32), model.astype(np.float32)
                                             .view(np.uint32))]
                rows.append({"rows": m, "warps": warps, "input with the values": side,
                             "precision": precision, "matches": matches or ["no model"]})
    return rows


def _round(values: np.ndarray, dtype) -> np.ndarray:
    return torch.from_numpy(values).to(dtype).float().numpy().astype(np.float64)


def product_rows(device, n: int = 128) -> list[dict]:
    rows = []
    kinds = [("float32", torch.float32), ("float16", torch.float16)]
    if device != "cpu":  # Triton's interpreter mishandles bfloat16 arithmetic (raw bits)
        kinds.append(("bfloat16", torch.bfloat16))
    for name, dtype in kinds:
        g = torch.Generator().manual_seed(0)
        x, y, z, w = (torch.randn(n, generator=g).to(dtype) for _ in range(4))
        out = torch.empty(16 * n, dtype=dtype, device=device)
        p = torch.empty(n, dtype=dtype, device=device)
        q = torch.empty(n, dtype=dtype, device=device)
        _products[(1,)](*(t.to(device) for t in (x, y, z, w)), out, p, q, 1, N=n)
        got = out.float().cpu().numpy().reshape(16, n).astype(np.float64)
        X, Y, Z, W = (t.float().numpy().astype(np.float64) for t in (x, y, z, w))

        def r(v, dtype=dtype):
            return _round(v, dtype)

        xy, zw = r(X * Y), r(Z * W)
        fused_inner = r(X * Y + Z)
        candidates = [
            {"unfused": r(xy - xy), "left fused": r(X * Y - xy), "right fused": r(xy - X * Y)},
            {"unfused": r(xy + Z), "fused": fused_inner},
            {"unfused": r(Z + xy), "fused": fused_inner},
            {"unfused": r(xy - Z), "fused": r(X * Y - Z)},
            {"unfused": r(Z - xy), "fused": r(Z - X * Y)},
            {"unfused": r(xy - zw), "left fused": r(X * Y - zw), "right fused": r(xy - Z * W)},
            {"unfused": r(xy + zw), "left fused": r(X * Y + zw), "right fused": r(xy + Z * W)},
            {"unfused": r(xy + Z), "fused": fused_inner},
            {"unfused": r(Z + xy), "fused": fused_inner},
            {"unfused": r(Z + xy), "fused": fused_inner},
            {"unfused": r(r(X * 2) + Z), "fused": r(X * 2 + Z)},
            {"unfused": r(r(r(xy + Z) * W) + Z), "inner fused": r(r(fused_inner * W) + Z),
             "both fused": r(fused_inner * W + Z)},
            {"unfused": r(Z + xy), "fused": fused_inner},
            {"unfused": r(Z + xy), "fused": fused_inner},
            {"unfused": r(xy - zw), "left fused": r(X * Y - zw), "right fused": r(xy - Z * W)},
            {"unfused": r(xy + zw), "left fused": r(X * Y + zw), "right fused": r(xy + Z * W)},
        ]
        for expression, models, result in zip(EXPRESSIONS, candidates, got):
            matches = [k for k, v in models.items() if np.array_equal(result, v)]
            # each model's differences from the others, so a match means something
            distinct = len({v.tobytes() for v in models.values()}) == len(models)
            rows.append({"dtype": name, "expression": expression,
                         "matches": matches or ["no model"], "models distinct": distinct})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: run with TRITON_INTERPRET=1
    results = {"environment": environment() if device == "cuda" else "interpreter",
               "dot": dot_rows(device), "products": product_rows(device)}
    for row in results["dot"]:
        print(f"dot {row['rows']:>2} rows {row['precision']:>6} values in "
              f"{row['input with the values']}: {', '.join(row['matches'])}")
    for row in results["products"]:
        print(f"{row['dtype']:>8} {row['expression']:<34} {', '.join(row['matches'])}"
              f"{'' if row['models distinct'] else ' (models not all distinct)'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
