"""Other attentions: the mistakes lesson 13 warns about, and correct ones in other styles."""

from learning.grader.catalogue import Version

# The Python versions replace attention_python; this is the reference's body, to edit.
_PYTHON = '''
    def attention_python(q, k, v, causal, block):
        if causal and len(q) != len(k):
            raise ValueError("causal attention needs as many queries as keys")
        scale = 1.0 / math.sqrt(len(q[0]))
        out = []
        for i, row in enumerate(q):
            m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])
            for start in range(0, len(k), block):
                keys = range(start, min(start + block, len(k)))
                scores = [scale * sum(a * b for a, b in zip(row, k[j])) if not causal or j <= i
                          else -math.inf for j in keys]
                m_new = max(m, max(scores))
                ref = m_new if m_new != -math.inf else 0.0
                alpha = math.exp(m - ref)
                p = [math.exp(s - ref) for s in scores]
                l = l * alpha + sum(p)
                acc = [a * alpha + sum(pj * v[j][c] for pj, j in zip(p, keys))
                       for c, a in enumerate(acc)]
                m = m_new
            out.append([a / l for a in acc])
        return out
'''

# The Triton versions replace attention_kernel (or the launcher); the reference's, to edit.
_KERNEL = '''
    @triton.jit
    def attention_kernel(out_ptr, q_ptr, k_ptr, v_ptr, stride_ob, stride_oh, stride_om,
                         stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                         stride_vb, stride_vh, stride_vn, n_heads, seq_q, seq_k, scale,
                         CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
        batch = pid_bh // n_heads
        head = pid_bh % n_heads
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        dims = tl.arange(0, HEAD_DIM)
        q_ptr += batch * stride_qb + head * stride_qh
        k_ptr += batch * stride_kb + head * stride_kh
        v_ptr += batch * stride_vb + head * stride_vh
        out_ptr += batch * stride_ob + head * stride_oh
        q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :],
                    mask=rows[:, None] < seq_q, other=0.0)
        m = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
        l = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
        for start in range(0, seq_k, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :],
                        mask=cols[:, None] < seq_k, other=0.0)
            v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :],
                        mask=cols[:, None] < seq_k, other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            visible = cols[None, :] < seq_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None])
            s = tl.where(visible, s, -float("inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            ref = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp(m - ref)
            p = tl.exp(s - ref[:, None])
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / l[:, None]
        tl.store(out_ptr + rows[:, None] * stride_om + dims[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)
'''

_LAUNCH = '''
    def attention_triton(q, k, v, causal=False):
        batch, heads, seq_q, d = q.shape
        seq_k = k.shape[2]
        if causal and seq_q != seq_k:
            raise ValueError("causal attention needs seq_q == seq_k")
        out = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
        grid = (triton.cdiv(seq_q, 16), batch * heads)
        attention_kernel[grid](out, q, k, v, out.stride(0), out.stride(1), out.stride(2),
                               q.stride(0), q.stride(1), q.stride(2),
                               k.stride(0), k.stride(1), k.stride(2),
                               v.stride(0), v.stride(1), v.stride(2),
                               heads, seq_q, seq_k, 1.0 / math.sqrt(d),
                               CAUSAL=causal, HEAD_DIM=d, BLOCK_M=16, BLOCK_N=16)
        return out
'''


def _edit(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each (old, new) edit made; an edit that finds nothing fails."""
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the catalogue's source has no {old!r}")
        text = text.replace(old, new)
    return text


def _python(*edits: tuple[str, str]) -> str:
    return _edit(_PYTHON, *edits)


def _kernel(*edits: tuple[str, str]) -> str:
    return _edit(_KERNEL, *edits)


def _launcher(*edits: tuple[str, str]) -> str:
    return _edit(_LAUNCH, *edits)


# The block's own maximum, then the block's sums scaled to the running maximum: right with the
# guard, NaN without it wherever a block holds only hidden keys.
_OWN_MAX_PYTHON = ("""                m_new = max(m, max(scores))
                ref = m_new if m_new != -math.inf else 0.0
                alpha = math.exp(m - ref)
                p = [math.exp(s - ref) for s in scores]
                l = l * alpha + sum(p)
                acc = [a * alpha + sum(pj * v[j][c] for pj, j in zip(p, keys))
                       for c, a in enumerate(acc)]""",
                   """                own = max(scores)
                own_ref = own if own != -math.inf else 0.0
                p = [math.exp(s - own_ref) for s in scores]
                m_new = max(m, own)
                ref = m_new if m_new != -math.inf else 0.0
                alpha, beta = math.exp(m - ref), math.exp(own_ref - ref)
                l = l * alpha + beta * sum(p)
                acc = [a * alpha + beta * sum(pj * v[j][c] for pj, j in zip(p, keys))
                       for c, a in enumerate(acc)]""")
_OWN_MAX_KERNEL = ("""            m_new = tl.maximum(m, tl.max(s, axis=1))
            ref = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp(m - ref)
            p = tl.exp(s - ref[:, None])
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)""",
                   """            own = tl.max(s, axis=1)
            own_ref = tl.where(own == -float("inf"), 0.0, own)
            p = tl.exp(s - own_ref[:, None])
            m_new = tl.maximum(m, own)
            ref = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp(m - ref)
            beta = tl.exp(own_ref - ref)
            l = l * alpha + beta * tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + beta[:, None] * tl.dot(p.to(v.dtype), v)""")

PYTHON = (
    Version("hidden scores set to 0", "python", "masked-zero", _python(
        ("if not causal or j <= i\n                          else -math.inf",
         "if not causal or j <= i\n                          else 0.0"))),
    Version("outputs rounded for display", "python", "rounded", _python(
        ("out.append([a / l for a in acc])", "out.append([round(a / l, 6) for a in acc])"))),
    Version("the accumulator not rescaled", "python", "acc-not-rescaled", _python(
        ("acc = [a * alpha + sum(", "acc = [a + sum("))),
    Version("the sum not rescaled", "python", "sum-not-rescaled", _python(
        ("l = l * alpha + sum(p)", "l = l + sum(p)"))),
    Version("acc divided by l in every block", "python", "normalised-per-block", _python(
        ("                m = m_new\n", "                m = m_new\n"
         "                acc = [a / l for a in acc]\n"),
        ("out.append([a / l for a in acc])", "out.append(acc)"))),
    Version("the causal flag ignored", "python", "causal-ignored", _python(
        (" if not causal or j <= i\n                          else -math.inf for j in keys]",
         " for j in keys]"))),
    Version("the causal mask hides the diagonal", "python", "causal-off-by-one", _python(
        ("if not causal or j <= i\n", "if not causal or j < i\n"))),
    Version("the causal mask lets one key too many through", "python", "causal-off-by-one",
            _python(("if not causal or j <= i\n", "if not causal or j <= i + 1\n"))),
    Version("the causal mask turned round", "python", "causal-reversed", _python(
        ("if not causal or j <= i\n", "if not causal or j >= i\n"))),
    Version("the scale forgotten", "python", "scale", _python(
        ("scale = 1.0 / math.sqrt(len(q[0]))", "scale = 1.0"))),
    Version("the scale applied to the output", "python", "scale", _python(
        ("scale = 1.0 / math.sqrt(len(q[0]))", "scale = 1.0"),
        ("out.append([a / l for a in acc])",
         "out.append([a / l / math.sqrt(len(q[0])) for a in acc])"))),
    Version("each block measured from its own maximum, no guard", "python", "no-guard",
            _edit(_python(_OWN_MAX_PYTHON),
                  ("own_ref = own if own != -math.inf else 0.0", "own_ref = own"))),
    Version("exponentials of the scores themselves", "python", "no-shift", _python(
        ("ref = m_new if m_new != -math.inf else 0.0", "ref = 0.0"),
        ("alpha = math.exp(m - ref)", "alpha = 1.0"))),
    Version("causal with any lengths", "python", "missing-error", _python(
        ("        if causal and len(q) != len(k):\n"
         "            raise ValueError(\"causal attention needs as many queries as keys\")\n",
         ""))),
    Version("q scaled in place", "python", "mutated-input", _python(
        ("        out = []\n", "        for row in q:\n"
         "            row[:] = [x * scale for x in row]\n"
         "        scale = 1.0\n"
         "        out = []\n"))),
    Version("returns the output transposed", "python", "wrong-length", _python(
        ("        return out", "        return [list(column) for column in zip(*out)]"))),
    Version("every block read whole, past the last key", "python", "error:list-index",
            _python(("keys = range(start, min(start + block, len(k)))",
                     "keys = range(start, start + block)"))),
    Version("a block loop that never moves on", "python", "timed-out", '''
        def attention_python(q, k, v, causal, block):
            scale = 1.0 / math.sqrt(len(q[0]))
            out = []
            for row in q:
                start, acc, l = 0, [0.0] * len(v[0]), 0.0
                while start < len(k):
                    for j in range(start, min(start + block, len(k))):
                        p = math.exp(scale * sum(a * b for a, b in zip(row, k[j])))
                        l += p
                        acc = [a + p * x for a, x in zip(acc, v[j])]
                out.append([a / l for a in acc])
            return out
    '''),
    Version("divided by the number of keys instead of l", "python", "unknown", _python(
        ("out.append([a / l for a in acc])", "out.append([a / len(k) for a in acc])"))),
    Version("the scale 1/d, not 1/sqrt(d)", "python", "scale", _python(
        ("scale = 1.0 / math.sqrt(len(q[0]))", "scale = 1.0 / len(q[0])"))),
    Version("never divided by l", "python", "not-normalised", _python(
        ("out.append([a / l for a in acc])", "out.append(acc)"))),
)

TRITON = (
    Version("hidden scores set to 0", "triton", "masked-zero", _kernel(
        ('s = tl.where(visible, s, -float("inf"))', "s = tl.where(visible, s, 0.0)"))),
    Version("the causal mask sets 0, the key tail -inf", "triton", "masked-zero", _kernel(
        ('                visible = visible & (cols[None, :] <= rows[:, None])\n'
         '            s = tl.where(visible, s, -float("inf"))',
         '                s = tl.where(cols[None, :] <= rows[:, None], s, 0.0)\n'
         '            s = tl.where(visible, s, -float("inf"))'))),
    Version("the key tail left unmasked, the causal mask kept", "triton", "masked-zero",
            _kernel(("visible = cols[None, :] < seq_k", "visible = cols[None, :] >= 0"))),
    Version("the accumulator not rescaled", "triton", "acc-not-rescaled", _kernel(
        ("acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot("))),
    Version("the sum not rescaled", "triton", "sum-not-rescaled", _kernel(
        ("l = l * alpha + tl.sum(p, axis=1)", "l = l + tl.sum(p, axis=1)"))),
    Version("acc divided by l in every block", "triton", "normalised-per-block", _kernel(
        ("            m = m_new\n", "            m = m_new\n"
         "            acc = acc / l[:, None]\n"),
        ("out = acc / l[:, None]", "out = acc"))),
    Version("no causal mask in the kernel", "triton", "causal-ignored", _kernel(
        ("            if CAUSAL:\n"
         "                visible = visible & (cols[None, :] <= rows[:, None])\n", ""))),
    Version("the launch never passes causal", "triton", "causal-ignored", _launcher(
        ("CAUSAL=causal,", "CAUSAL=False,"))),
    Version("the causal mask hides the diagonal", "triton", "causal-off-by-one", _kernel(
        ("(cols[None, :] <= rows[:, None])", "(cols[None, :] < rows[:, None])"))),
    Version("the causal mask turned round", "triton", "causal-reversed", _kernel(
        ("(cols[None, :] <= rows[:, None])", "(cols[None, :] >= rows[:, None])"))),
    Version("the scale forgotten", "triton", "scale", _kernel(
        ("s = tl.dot(q, tl.trans(k)) * scale", "s = tl.dot(q, tl.trans(k))"))),
    Version("the scale applied to the output", "triton", "scale", _kernel(
        ("s = tl.dot(q, tl.trans(k)) * scale", "s = tl.dot(q, tl.trans(k))"),
        ("out = acc / l[:, None]", "out = acc / l[:, None] * scale"))),
    Version("the scale 1/d, not 1/sqrt(d)", "triton", "scale", _launcher(
        ("heads, seq_q, seq_k, 1.0 / math.sqrt(d),", "heads, seq_q, seq_k, 1.0 / d,"))),
    Version("never divided by l", "triton", "not-normalised", _kernel(
        ("out = acc / l[:, None]", "out = acc"))),
    Version("each block measured from its own maximum, no guard", "triton", "no-guard",
            _edit(_kernel(_OWN_MAX_KERNEL),
                  ('own_ref = tl.where(own == -float("inf"), 0.0, own)', "own_ref = own"))),
    Version("blocks visited from the last one down, no guard", "triton", "no-guard", _kernel(
        ("        for start in range(0, seq_k, BLOCK_N):\n"
         "            cols = start + tl.arange(0, BLOCK_N)",
         "        n_blocks = tl.cdiv(seq_k, BLOCK_N)\n"
         "        for step in range(0, n_blocks):\n"
         "            cols = (n_blocks - 1 - step) * BLOCK_N + tl.arange(0, BLOCK_N)"),
        ('ref = tl.where(m_new == -float("inf"), 0.0, m_new)', "ref = m_new"))),
    Version("exponentials of the scores themselves", "triton", "no-shift", _kernel(
        ('ref = tl.where(m_new == -float("inf"), 0.0, m_new)',
         "ref = tl.zeros((BLOCK_M,), dtype=tl.float32)"),
        ("alpha = tl.exp(m - ref)", "alpha = tl.full((BLOCK_M,), 1.0, dtype=tl.float32)"))),
    Version("the accumulator in the inputs' dtype", "triton", "acc-16-bit", _kernel(
        ("acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)",
         "acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=q_ptr.dtype.element_ty)"),
        ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
         "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(q_ptr.dtype.element_ty)"))),
    Version("strides of contiguous tensors", "triton", "strides-assumed", _launcher(
        ("attention_kernel[grid](out, q, k, v, out.stride(0), out.stride(1), out.stride(2),\n"
         "                               q.stride(0), q.stride(1), q.stride(2),\n"
         "                               k.stride(0), k.stride(1), k.stride(2),\n"
         "                               v.stride(0), v.stride(1), v.stride(2),",
         "attention_kernel[grid](out, q, k, v, heads * seq_q * d, seq_q * d, d,\n"
         "                               heads * seq_q * d, seq_q * d, d,\n"
         "                               heads * seq_k * d, seq_k * d, d,\n"
         "                               heads * seq_k * d, seq_k * d, d,"))),
    Version("strides of a contiguous q, k's and v's their own", "triton", "strides-assumed",
            _launcher(("q.stride(0), q.stride(1), q.stride(2),",
                       "heads * seq_q * d, seq_q * d, d,"))),
    Version("k and v at q's batch and head offsets", "triton", "out-of-bounds", _kernel(
        ("k_ptr += batch * stride_kb + head * stride_kh",
         "k_ptr += batch * stride_qb + head * stride_qh"),
        ("v_ptr += batch * stride_vb + head * stride_vh",
         "v_ptr += batch * stride_qb + head * stride_qh")), interpreter_only=True),
    # where k's rows are further apart than v's ("k laid out apart from q"), v's reads run past
    # its end: the interpreter's bounds checks see it
    Version("v's rows stepped by k's row stride", "triton", "out-of-bounds", _kernel(
        ("v = tl.load(v_ptr + cols[:, None] * stride_vn", "v = tl.load(v_ptr + cols[:, None] "
         "* stride_kn")), interpreter_only=True),
    Version("a grid of heads, not batch x heads", "triton", "grid-too-small", _launcher(
        ("grid = (triton.cdiv(seq_q, 16), batch * heads)", "grid = (triton.cdiv(seq_q, 16), "
         "heads)"))),
    Version("k and v loaded without a mask", "triton", "out-of-bounds", _kernel(
        ("k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :],\n"
         "                        mask=cols[:, None] < seq_k, other=0.0)",
         "k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :])"),
        ("v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :],\n"
         "                        mask=cols[:, None] < seq_k, other=0.0)",
         "v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :])")),
        interpreter_only=True),
    Version("the output stored without a mask", "triton", "out-of-bounds", _kernel(
        ("out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)",
         "out.to(out_ptr.dtype.element_ty))")), interpreter_only=True),
    Version("q scaled in place", "triton", "mutated-input", _launcher(
        ("        out = torch.empty(", "        q.mul_(1.0 / math.sqrt(d))\n"
         "        out = torch.empty("),
        ("heads, seq_q, seq_k, 1.0 / math.sqrt(d),", "heads, seq_q, seq_k, 1.0,"))),
    Version("returns float32 for 16-bit inputs", "triton", "wrong-dtype", _launcher(
        ("dtype=q.dtype, device=q.device)", "dtype=torch.float32, device=q.device)"))),
    Version("causal with any lengths", "triton", "missing-error", _launcher(
        ("        if causal and seq_q != seq_k:\n"
         "            raise ValueError(\"causal attention needs seq_q == seq_k\")\n", ""))),
    Version("blocks of 24 keys", "triton", "error:arange-power-of-two", _launcher(
        ("BLOCK_N=16)", "BLOCK_N=24)"))),
    Version("exp2 without log2(e)", "triton", "exp2-base", _kernel(
        ("alpha = tl.exp(m - ref)\n            p = tl.exp(s - ref[:, None])",
         "alpha = tl.exp2(m - ref)\n            p = tl.exp2(s - ref[:, None])"))),
    Version("batch and head taken the wrong way from the program id", "triton",
            "out-of-bounds", _kernel(("batch = pid_bh // n_heads", "batch = pid_bh % n_heads"),
                                     ("head = pid_bh % n_heads", "head = pid_bh // n_heads")),
            interpreter_only=True),
    Version("the causal mask broadcast the wrong way", "triton", "unknown", _kernel(
        ("cols[None, :] <= rows[:, None]", "cols[:, None] <= rows[None, :]"))),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("the whole row's softmax, no blocks", "python", None, '''
        def attention_python(q, k, v, causal, block):
            if causal and len(q) != len(k):
                raise ValueError("causal attention needs as many queries as keys")
            scale = 1.0 / math.sqrt(len(q[0]))
            out = []
            for i, row in enumerate(q):
                seen = [j for j in range(len(k)) if not causal or j <= i]
                scores = [scale * math.fsum(a * b for a, b in zip(row, k[j])) for j in seen]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = math.fsum(weights)
                out.append([math.fsum(w * v[j][c] for w, j in zip(weights, seen)) / total
                            for c in range(len(v[0]))])
            return out
    '''),
    Version("an output kept normalised (FlashAttention-1's form)", "python", None, _python(
        ("                l = l * alpha + sum(p)\n"
         "                acc = [a * alpha + sum(pj * v[j][c] for pj, j in zip(p, keys))\n"
         "                       for c, a in enumerate(acc)]",
         "                l_new = l * alpha + sum(p)\n"
         "                acc = [(a * l * alpha + sum(pj * v[j][c] for pj, j in zip(p, keys)))"
         " / l_new\n"
         "                       for c, a in enumerate(acc)]\n"
         "                l = l_new"),
        ("out.append([a / l for a in acc])", "out.append(acc)"))),
    Version("causal blocks only up to the diagonal", "python", None, _python(
        ("for start in range(0, len(k), block):",
         "for start in range(0, i + 1 if causal else len(k), block):"))),
    Version("each block measured from its own maximum, with the guard", "python", None,
            _python(_OWN_MAX_PYTHON)),
    Version("exp2 with log2(e) folded into the scale", "triton", None, _kernel(
        ("s = tl.dot(q, tl.trans(k)) * scale",
         "s = tl.dot(q, tl.trans(k)) * (scale * 1.4426950408889634)"),
        ("alpha = tl.exp(m - ref)\n            p = tl.exp(s - ref[:, None])",
         "alpha = tl.exp2(m - ref)\n            p = tl.exp2(s - ref[:, None])"))),
    Version("causal blocks only up to the diagonal", "triton", None, _kernel(
        ("for start in range(0, seq_k, BLOCK_N):",
         "end = tl.minimum((pid_m + 1) * BLOCK_M, seq_k) if CAUSAL else seq_k\n"
         "        for start in range(0, end, BLOCK_N):"))),
    Version("each block measured from its own maximum, with the guard", "triton", None,
            _kernel(_OWN_MAX_KERNEL)),
    Version("hidden scores -1e6, as the Triton tutorial masks", "triton", None, _kernel(
        ('s = tl.where(visible, s, -float("inf"))', "s = tl.where(visible, s, -1.0e6)"))),
    Version("blocks of 32 queries and 16 keys, contiguous copies", "triton", None, '''
        def attention_triton(q, k, v, causal=False):
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            batch, heads, seq_q, d = q.shape
            seq_k = k.shape[2]
            if causal and seq_q != seq_k:
                raise ValueError(f"causal attention needs seq_q == seq_k, not {seq_q}, {seq_k}")
            out = torch.empty_like(q)
            grid = (triton.cdiv(seq_q, 32), batch * heads)
            attention_kernel[grid](out, q, k, v, out.stride(0), out.stride(1), out.stride(2),
                                   q.stride(0), q.stride(1), q.stride(2),
                                   k.stride(0), k.stride(1), k.stride(2),
                                   v.stride(0), v.stride(1), v.stride(2),
                                   heads, seq_q, seq_k, d ** -0.5,
                                   CAUSAL=causal, HEAD_DIM=d, BLOCK_M=32, BLOCK_N=16)
            return out
    '''),
)
