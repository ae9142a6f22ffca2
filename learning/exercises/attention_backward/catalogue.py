"""Other attention backward passes: the mistakes lesson 14 warns about, and correct ones in other
styles."""

import ast
from functools import cache

from learning.exercises import solution_path
from learning.grader.catalogue import Version


@cache
def _definition(name: str) -> str:
    """The reference's definition of ``name`` (decorator included), to edit."""
    text = solution_path("attention_backward").read_text(encoding="utf-8")
    lines = text.splitlines()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            return "\n".join(lines[start:node.end_lineno]) + "\n"
    raise ValueError(f"the reference defines no {name}")


def _edit(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each (old, new) edit made; an edit that finds nothing fails."""
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the catalogue's source has no {old!r}")
        text = text.replace(old, new)
    return text


def _python(*edits):
    return _edit(_definition("attention_backward_python"), *edits)


def _dkdv(*edits):
    return _edit(_definition("attention_backward_dkdv_kernel"), *edits)


def _dq(*edits):
    return _edit(_definition("attention_backward_dq_kernel"), *edits)


def _both(*edits):
    """Both kernels with the same edits (each must find every one)."""
    return _dkdv(*edits) + "\n\n" + _dq(*edits)


def _launcher(*edits):
    return _edit(_definition("attention_backward_triton"), *edits)


_DELTA_PY = "delta = [sum(a * b for a, b in zip(do_row, o_row)) for do_row, o_row in zip(do, o)]"
_DELTA_TL = "delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)"

PYTHON = (
    Version("D as rowsum(dO)", "python", "delta-wrong", _python(
        (_DELTA_PY, "delta = [sum(do_row) for do_row in do]"))),
    Version("D left out", "python", "delta-wrong", _python(
        ("ds = p * (dp - delta[i])", "ds = p * dp"))),
    Version("P without the scale", "python", "p-scale", _python(
        ("p = math.exp(scale * sum(", "p = math.exp(sum("))),
    Version("dQ without the scale", "python", "grad-scale", _python(
        ("dq[i][c] += ds * k[j][c] * scale", "dq[i][c] += ds * k[j][c]"))),
    Version("dK without the scale", "python", "grad-scale", _python(
        ("dk[j][c] += ds * q[i][c] * scale", "dk[j][c] += ds * q[i][c]"))),
    Version("the causal flag ignored", "python", "causal-ignored", _python(
        ("                    if causal and j > i:\n"
         "                        continue  # a hidden key: P = 0, so it adds nothing anywhere\n",
         ""))),
    Version("the causal mask off by one", "python", "causal-off-by-one", _python(
        ("if causal and j > i:", "if causal and j >= i:"))),
    Version("causal with any lengths", "python", "missing-error", _python(
        ("    if causal and len(q) != len(k):\n"
         "        raise ValueError(f\"causal attention needs as many queries as keys: got "
         "{len(q)} \"\n"
         "                         f\"queries and {len(k)} keys\")\n", ""))),
    Version("outputs rounded for display", "python", "rounded", _python(
        ("    return dq + dk + dv", "    return [[round(x, 6) for x in row] for row in "
         "dq + dk + dv]"))),
    Version("dk left out of the list returned", "python", "wrong-length", _python(
        ("    return dq + dk + dv", "    return dq + dv"))),
    Version("dS without P", "python", "unknown", _python(
        ("ds = p * (dp - delta[i])", "ds = dp - delta[i]"))),
    Version("every block read whole, past the last key", "python", "error:list-index",
            _python(("keys = range(k_start, min(k_start + block, len(k)))",
                     "keys = range(k_start, k_start + block)"))),
    Version("a block loop that never moves on", "python", "timed-out", '''
        def attention_backward_python(q, k, v, o, do, lse, causal, block):
            d = len(q[0])
            dq, dk, dv = [[0.0] * d for _ in q], [[0.0] * d for _ in k], [[0.0] * d for _ in v]
            start = 0
            while start < len(k):
                for j in range(start, min(start + block, len(k))):
                    for i in range(len(q)):
                        p = math.exp(sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(d)
                                     - lse[i])
                        dv[j] = [x + p * y for x, y in zip(dv[j], do[i])]
            return dq + dk + dv
    '''),
)

TRITON = (
    Version("D as rowsum(dO)", "triton", "delta-wrong", _both(
        (_DELTA_TL, "delta = tl.sum(do.to(tl.float32), axis=1)"))),
    Version("D left out", "triton", "delta-wrong", _both(
        ("ds = p * (dp - delta[:, None])", "ds = p * dp"))),
    Version("P without the scale", "triton", "p-scale", _both(
        ("s = tl.dot(q, tl.trans(k)) * scale", "s = tl.dot(q, tl.trans(k))"))),
    Version("dQ without the scale", "triton", "grad-scale", _dq(
        ("    dq = dq * scale\n", ""))),
    Version("dK without the scale", "triton", "grad-scale", _dkdv(
        ("    dk = dk * scale\n", ""))),
    Version("the causal mask in the dK, dV kernel only", "triton", "causal-one-pass", _dq(
        ("        if CAUSAL:\n"
         "            visible = visible & (cols[None, :] <= rows[:, None])\n", ""))),
    Version("the causal mask in the dQ kernel only", "triton", "causal-one-pass", _dkdv(
        ("        if CAUSAL:\n"
         "            visible = visible & (cols[None, :] <= rows[:, None])\n", ""))),
    Version("the causal mask off by one", "triton", "causal-off-by-one", _both(
        ("visible = visible & (cols[None, :] <= rows[:, None])",
         "visible = visible & (cols[None, :] < rows[:, None])"))),
    Version("the launches never pass causal", "triton", "causal-ignored", _launcher(
        ("sizes = dict(CAUSAL=causal,", "sizes = dict(CAUSAL=False,"))),
    Version("dK and dV overwritten by each query block", "triton", "not-accumulated", _dkdv(
        ("dv += tl.dot(", "dv = tl.dot("), ("dk += tl.dot(", "dk = tl.dot("))),
    Version("dV alone overwritten by each query block", "triton", "not-accumulated", _dkdv(
        ("dv += tl.dot(", "dv = tl.dot("))),
    Version("the causal mask in the dQ kernel only, the dK, dV kernel skipping the blocks "
            "above the diagonal", "triton", "causal-one-pass", _dkdv(
                ("for start in range(0, seq_q, BLOCK_M):",
                 "for start in range((pid_n * BLOCK_N // BLOCK_M) * BLOCK_M if CAUSAL else 0, "
                 "seq_q, BLOCK_M):"),
                ("        if CAUSAL:\n"
                 "            visible = visible & (cols[None, :] <= rows[:, None])\n", ""))),
    Version("dQ overwritten by each key block", "triton", "not-accumulated", _dq(
        ("dq += tl.dot(", "dq = tl.dot("))),
    Version("the accumulators in the inputs' dtype", "triton", "acc-16-bit", _dkdv(
        ("dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)",
         "dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=q_ptr.dtype.element_ty)"),
        ("dv += tl.dot(tl.trans(p.to(do.dtype)), do)",
         "dv = (dv + tl.dot(tl.trans(p.to(do.dtype)), do)).to(q_ptr.dtype.element_ty)"))),
    Version("strides of contiguous tensors", "triton", "strides-assumed", _launcher(
        ("inputs = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), "
         "k.stride(2),\n"
         "              v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), "
         "o.stride(2),\n"
         "              do.stride(0), do.stride(1), do.stride(2),",
         "inputs = (heads * seq_q * d, seq_q * d, d, heads * seq_k * d, seq_k * d, d,\n"
         "              heads * seq_k * d, seq_k * d, d, heads * seq_q * d, seq_q * d, d,\n"
         "              heads * seq_q * d, seq_q * d, d,"))),
    Version("k and v loaded without a mask", "triton", "out-of-bounds", _dq(
        ("k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :], mask=key_mask, "
         "other=0.0)", "k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :])"),
        ("v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :], mask=key_mask, "
         "other=0.0)", "v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :])")),
        interpreter_only=True),
    Version("returns float32 for 16-bit inputs", "triton", "wrong-dtype", _launcher(
        ("return torch.cat((dq, dk, dv), dim=2)",
         "return torch.cat((dq, dk, dv), dim=2).float()"))),
    Version("causal with any lengths", "triton", "missing-error", _launcher(
        ("    if causal and seq_q != seq_k:\n"
         "        raise ValueError(f\"causal attention needs seq_q == seq_k, got {seq_q} "
         "queries and \"\n"
         "                         f\"{seq_k} keys: which keys should query i see?\")\n", ""))),
    Version("dV from dS instead of P", "triton", "unknown", _dkdv(
        ("dv += tl.dot(tl.trans(p.to(do.dtype)), do)",
         "dv += tl.dot(tl.trans(p.to(do.dtype)), do)\n"
         "        dv += tl.dot(tl.trans(p.to(do.dtype)), do)"))),
    Version("blocks of 24 keys", "triton", "error:arange-power-of-two", _launcher(
        ("block_m, block_n = 16, 16", "block_m, block_n = 16, 24"))),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("whole matrices, no blocks", "python", None, '''
        def attention_backward_python(q, k, v, o, do, lse, causal, block):
            if causal and len(q) != len(k):
                raise ValueError("causal attention needs as many queries as keys")
            d, scale = len(q[0]), 1.0 / math.sqrt(len(q[0]))
            p = [[math.exp(scale * math.fsum(a * b for a, b in zip(qi, kj)) - li)
                  if not causal or j <= i else 0.0 for j, kj in enumerate(k)]
                 for i, (qi, li) in enumerate(zip(q, lse))]
            dp = [[math.fsum(a * b for a, b in zip(doi, vj)) for vj in v] for doi in do]
            delta = [math.fsum(a * b for a, b in zip(doi, oi)) for doi, oi in zip(do, o)]
            ds = [[pij * (dpij - di) for pij, dpij in zip(pi, dpi)]
                  for pi, dpi, di in zip(p, dp, delta)]
            dq = [[scale * math.fsum(ds[i][j] * k[j][c] for j in range(len(k)))
                   for c in range(d)] for i in range(len(q))]
            dk = [[scale * math.fsum(ds[i][j] * q[i][c] for i in range(len(q)))
                   for c in range(d)] for j in range(len(k))]
            dv = [[math.fsum(p[i][j] * do[i][c] for i in range(len(q)))
                   for c in range(len(v[0]))] for j in range(len(k))]
            return dq + dk + dv
    '''),
    Version("the key blocks past the diagonal skipped in the dQ kernel", "triton", None, _dq(
        ("    for start in range(0, seq_k, BLOCK_N):",
         "    end = tl.minimum((pid_m + 1) * BLOCK_M, seq_k) if CAUSAL else seq_k\n"
         "    for start in range(0, end, BLOCK_N):"))),
    Version("blocks of 32 keys, contiguous copies", "triton", None, '''
        def attention_backward_triton(q, k, v, o, do, lse, causal=False):
            q, k, v, o, do = (x.contiguous() for x in (q, k, v, o, do))
            batch, heads, seq_q, d = q.shape
            seq_k = k.shape[2]
            if causal and seq_q != seq_k:
                raise ValueError(f"causal attention needs seq_q == seq_k, not {seq_q}, {seq_k}")
            dq = torch.empty_like(q)
            dk, dv = torch.empty_like(k), torch.empty_like(v)
            inputs = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                      *do.stride()[:3], lse.stride(0), lse.stride(1), heads, seq_q, seq_k,
                      d ** -0.5)
            sizes = dict(CAUSAL=causal, HEAD_DIM=d, BLOCK_M=16, BLOCK_N=32)
            attention_backward_dkdv_kernel[(triton.cdiv(seq_k, 32), batch * heads)](
                dk, dv, q, k, v, o, do, lse, *dk.stride()[:3], *dv.stride()[:3], *inputs,
                **sizes)
            attention_backward_dq_kernel[(triton.cdiv(seq_q, 16), batch * heads)](
                dq, q, k, v, o, do, lse, *dq.stride()[:3], *inputs, **sizes)
            return torch.cat((dq, dk, dv), dim=2)
    '''),
)
