"""Other online softmaxes: the mistakes workshop A1 warns about, and correct ones in other
styles."""

from learning.grader.catalogue import Version

PYTHON = (
    Version("no rescaling when the maximum grows", "python", "no-rescale", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("one pair per row, no rescaling", "python", "no-rescale", '''
        def online_softmax_python(values, block):
            m, s = -math.inf, 0.0
            for start in range(0, len(values), block):
                chunk = values[start:start + block]
                m = max(m, max(chunk))
                ref = 0.0 if m == -math.inf else m
                s += sum(math.exp(x - ref) for x in chunk)
            return [math.exp(x - m) / s for x in values]
    '''),
    Version("no -inf guard", "python", "no-guard", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    s[lane] = s[lane] * math.exp(m[lane] - m_new) + math.exp(x - m_new)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("lanes added without rescaling", "python", "no-combine-rescale", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s)
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("outputs rounded for display", "python", "rounded", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [round(math.exp(x - row_max) / total, 9) for x in values]
    '''),
    Version("loop stops before the partial chunk", "python", "loop-bound", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values) - block + 1, block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("every step reads the first chunk", "python", "not-advanced", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[0:block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("exponentials of the values themselves", "python", "no-shift", '''
        def online_softmax_python(values, block):
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    s[lane] += math.exp(x)
            total = sum(s)
            return [math.exp(x) / total for x in values]
    '''),
    Version("the chunk's lanes read from the row's start", "python", "error:list-index", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane in range(block):
                    x = values[start + lane]
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("a chunk loop that never moves on", "python", "timed-out", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            start = 0
            while start < len(values):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("the running maximum starts at 0", "python", "max-from-zero", '''
        def online_softmax_python(values, block):
            m = [0.0] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    s[lane] = s[lane] * math.exp(m[lane] - m_new) + math.exp(x - m_new)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("the sum taken of the lanes' maxima", "python", "unknown", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m[lane] = max(m[lane], x)
            row_max = max(m)
            total = sum(math.exp(m_k - row_max) for m_k in m if m_k > -math.inf)
            return [math.exp(x - row_max) / total for x in values]
    '''),
    Version("the rescaling factor upside down", "python", "unknown", '''
        def online_softmax_python(values, block):
            m = [-math.inf] * block
            s = [0.0] * block
            for start in range(0, len(values), block):
                for lane, x in enumerate(values[start:start + block]):
                    m_new = max(m[lane], x)
                    ref = 0.0 if m_new == -math.inf else m_new
                    old = 0.0 if m[lane] == -math.inf else m[lane]
                    s[lane] = s[lane] * math.exp(ref - old) + math.exp(x - ref)
                    m[lane] = m_new
            row_max = max(m)
            total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
            return [math.exp(x - row_max) / total for x in values]
    '''),
)

# The Triton versions replace the kernel's first pass (or its padding) and keep the rest.
_HEAD = '''
        @triton.jit
        def online_softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride,
                                  n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            x_row = input_ptr + row * input_row_stride
            y_row = output_ptr + row * output_row_stride
            lanes = tl.arange(0, BLOCK)
            m = tl.full([BLOCK], -float("inf"), tl.float32)
            s = tl.zeros([BLOCK], tl.float32)
'''
_TAIL = '''
            row_max = tl.max(m, axis=0)
            total = tl.sum(s * tl.exp(m - row_max), axis=0)
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                mask = offsets < n_cols
                x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
                tl.store(y_row + offsets, tl.exp(x - row_max) / total, mask=mask)
'''


def _kernel(first_pass: str, tail: str = _TAIL) -> str:
    return _HEAD + first_pass + tail


TRITON = (
    Version("no rescaling when the maximum grows", "triton", "no-rescale", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s + tl.exp(x - ref)
                m = m_new
    ''')),
    Version("no -inf guard", "triton", "no-guard", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
                m = m_new
    ''')),
    Version("lanes added without rescaling", "triton", "no-combine-rescale", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''', _TAIL.replace("tl.sum(s * tl.exp(m - row_max), axis=0)", "tl.sum(s, axis=0)"))),
    Version("first pass stops before the partial chunk", "triton", "loop-bound", _kernel('''
            for start in range(0, n_cols - BLOCK + 1, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''')),
    Version("both passes stop before the partial chunk", "triton", "block-too-small", _kernel('''
            for start in range(0, n_cols - BLOCK + 1, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''', _TAIL.replace("range(0, n_cols, BLOCK)", "range(0, n_cols - BLOCK + 1, BLOCK)"))),
    Version("offsets not advanced", "triton", "not-advanced", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = lanes  # the step moves on, the offsets do not
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''')),
    Version("padding loads 0", "triton", "zero-padding", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols, other=0.0).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''')),
)

TRITON += (
    Version("the running maximum starts at 0", "triton", "max-from-zero", _HEAD.replace(
        'tl.full([BLOCK], -float("inf"), tl.float32)', "tl.zeros([BLOCK], tl.float32)") + '''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
                m = m_new
    ''' + _TAIL),
    Version("exponentials of the values themselves", "triton", "no-shift", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                s = s + tl.exp(x)
    ''', _TAIL.replace("row_max = tl.max(m, axis=0)", "row_max = 0.0").replace(
        "tl.sum(s * tl.exp(m - row_max), axis=0)", "tl.sum(s, axis=0)"))),
    Version("row offset from BLOCK", "triton", "row-offset", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''').replace("row * input_row_stride", "row * BLOCK")),
    Version("row offset from n_cols", "triton", "row-stride", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''').replace("row * input_row_stride", "row * n_cols")),
    Version("returns float32 for float16", "triton", "wrong-dtype", '''
        def online_softmax_triton(x, block):
            n_rows, n_cols = x.shape
            output = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            online_softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols,
                                             BLOCK=block)
            return output
    '''),
    Version("lanes as many as the row's columns", "triton", "error:arange-constexpr", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.exp(x - ref)
                m = m_new
    ''').replace("lanes = tl.arange(0, BLOCK)", "lanes = tl.arange(0, n_cols)")),
    Version("each chunk's own sum, the last one kept", "triton", "unknown", _kernel('''
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = tl.exp(x - ref)
                m = m_new
    ''')),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("one running pair per row", "python", None, '''
        def online_softmax_python(values, block):
            m, s = -math.inf, 0.0
            for start in range(0, len(values), block):
                chunk = values[start:start + block]
                m_new = max(m, max(chunk))
                ref = 0.0 if m_new == -math.inf else m_new
                s = s * math.exp(m - ref) + sum(math.exp(x - ref) for x in chunk)
                m = m_new
            return [math.exp(x - m) / s for x in values]
    '''),
    Version("one running pair per row, reduced every chunk", "triton", None, '''
        @triton.jit
        def online_softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride,
                                  n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            x_row = input_ptr + row * input_row_stride
            y_row = output_ptr + row * output_row_stride
            lanes = tl.arange(0, BLOCK)
            m = -float("inf")
            s = 0.0
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                m_new = tl.maximum(m, tl.max(x, axis=0))
                ref = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - ref) + tl.sum(tl.exp(x - ref), axis=0)
                m = m_new
            for start in range(0, n_cols, BLOCK):
                offsets = start + lanes
                mask = offsets < n_cols
                x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
                tl.store(y_row + offsets, tl.exp(x - m) / s, mask=mask)
    '''),
)
