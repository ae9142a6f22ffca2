"""Other softmaxes: the mistakes lessons 04 and 08 warn about, and correct ones in other styles."""

from learning.grader.catalogue import Version

PYTHON = (
    Version("no max subtraction", "python", "no-max-shift", '''
        def softmax_python(values):
            numerator = [math.exp(v) for v in values]
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
    # numpy in the Python part: the derivation is the lesson's in plain Python, whatever the
    # values (learning.grader.plain)
    Version("no max subtraction, numpy", "python", "not-plain-python", '''
        import numpy as np

        def softmax_python(values):
            e = np.exp(np.array(values, dtype=np.float64))
            return list(e / e.sum())
    '''),
    Version("exp alone", "python", "exp-only", '''
        def softmax_python(values):
            return [math.exp(v) for v in values]
    '''),
    Version("normalised by the maximum", "python", "not-divided-by-sum", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(v - maximum) for v in values]
            return [n / max(numerator) for n in numerator]
    '''),
    Version("no normalisation", "python", "not-divided-by-sum", '''
        def softmax_python(values):
            maximum = max(values)
            return [math.exp(v - maximum) for v in values]
    '''),
    Version("shift by the first element", "python", "wrong-shift", '''
        def softmax_python(values):
            numerator = [math.exp(v - values[0]) for v in values]
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
    Version("shift by the mean", "python", "wrong-shift", '''
        def softmax_python(values):
            mean = sum(values) / len(values)
            numerator = [math.exp(v - mean) for v in values]
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
    Version("sum of the shifted values", "python", "summed-shifted", '''
        def softmax_python(values):
            maximum = max(values)
            shifted = [v - maximum for v in values]
            denominator = sum(shifted)
            return [math.exp(s) / denominator for s in shifted]
    '''),
    Version("mutates the input", "python", "mutated-input", '''
        def softmax_python(values):
            maximum = max(values)
            for i, v in enumerate(values):
                values[i] = math.exp(v - maximum)
            denominator = sum(values)
            for i, v in enumerate(values):
                values[i] = v / denominator
            return list(values)
    '''),
    Version("returns a generator", "python", "returned-generator", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(v - maximum) for v in values]
            denominator = sum(numerator)
            return (n / denominator for n in numerator)
    '''),
    Version("returns a tuple", "python", "returned-tuple", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(v - maximum) for v in values]
            denominator = sum(numerator)
            return tuple(n / denominator for n in numerator)
    '''),
    Version("returns None", "python", "returned-none", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(v - maximum) for v in values]
            denominator = sum(numerator)
            output = [n / denominator for n in numerator]
    '''),
    Version("drops the last element", "python", "wrong-length", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(values[i] - maximum) for i in range(len(values) - 1)]
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
    Version("rounds the outputs", "python", "rounded", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(v - maximum) for v in values]
            denominator = sum(numerator)
            return [round(n / denominator, 4) for n in numerator]
    '''),
    Version("float32 arithmetic", "python", "unknown", '''
        import struct

        def float32(v):  # rounded to the nearest float32, in plain Python
            return struct.unpack("f", struct.pack("f", v))[0]

        def softmax_python(values):
            x = [float32(v) for v in values]
            maximum = max(x)
            e = [float32(math.exp(float32(v - maximum))) for v in x]
            total = float32(sum(e))
            return [float32(v / total) for v in e]
    '''),
    Version("loops one index too far", "python", "error:list-index", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = [math.exp(values[i] - maximum) for i in range(len(values) + 1)]
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
    Version("a while loop that never advances", "python", "timed-out", '''
        def softmax_python(values):
            maximum = max(values)
            numerator = []
            i = 0
            while i < len(values):
                numerator.append(math.exp(values[i] - maximum))
            denominator = sum(numerator)
            return [n / denominator for n in numerator]
    '''),
)

TRITON = (
    Version('zero padding', "triton", 'zero-padding', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('load without other', "triton", 'zero-padding', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask)
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('masks only the store', "triton", 'zero-padding', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            # the mask is applied here only: the padded lanes already entered max and sum
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('maximum over zero padding, masked sum', "triton", 'max-over-padding', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            e = tl.where(mask, e, 0.0)
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('no max subtraction', "triton", 'no-max-shift', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf"))
            e = tl.exp(x.to(tl.float32))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('row offset from BLOCK', "triton", 'out-of-bounds', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * BLOCK + offsets, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * BLOCK + offsets, y, mask=mask)
    '''),
    Version('row offset from n_cols', "triton", 'row-stride', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('skips the last column', "triton", 'off-by-one-mask', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols - 1
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf"))
            x = x.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('a fixed BLOCK smaller than the row', "triton", 'block-too-small', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            block = min(triton.next_power_of_2(n_cols), 1024)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), min(n_cols, block),
                                      BLOCK=block)
            return output
    '''),
    # A BLOCK fixed big enough for every row the learner tried: the widest rows lose their ends
    Version('a fixed BLOCK of 8192', "triton", 'block-too-small', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0),
                                      min(n_cols, 8192), BLOCK=8192)
            return output
    '''),
    # A grid capped at a fixed number of programs, as if every GPU had that many: the rows
    # past it are never written
    Version('a grid of at most 128 programs', "triton", 'grid-too-small', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            block = triton.next_power_of_2(n_cols)
            softmax_kernel[(min(n_rows, 128),)](output, x, output.stride(0), x.stride(0), n_cols,
                                                BLOCK=block)
            return output
    '''),
    Version('too few programs', "triton", 'grid-too-small', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            block = triton.next_power_of_2(n_cols)
            grid = (max(1, n_rows // 2),)
            softmax_kernel[grid](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
            return output
    '''),
    # An output kept from call to call, one per shape, to save the allocation: every call of
    # a shape returns the same tensor, and the next call overwrites what the caller was given
    Version('one output kept per shape, reused by every call', "triton", 'output-reused', '''
        _outputs = {}


        def softmax_triton(x):
            n_rows, n_cols = x.shape
            key = (n_rows, n_cols, x.dtype, x.device)
            if key not in _outputs:
                _outputs[key] = torch.empty_like(x)
            output = _outputs[key]
            block = triton.next_power_of_2(n_cols)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols,
                                      BLOCK=block)
            return output
    '''),
    # Two outputs per shape, handed out in turn ("double buffering"): the call after next
    # overwrites what the caller was given
    Version('two outputs kept per shape, handed out in turn', "triton", 'output-reused', '''
        _outputs = {}


        def softmax_triton(x):
            n_rows, n_cols = x.shape
            key = (n_rows, n_cols, x.dtype, x.device)
            if key not in _outputs:
                _outputs[key] = [torch.empty_like(x), torch.empty_like(x)]
            ring = _outputs[key]
            output = ring.pop(0)
            ring.append(output)
            block = triton.next_power_of_2(n_cols)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols,
                                      BLOCK=block)
            return output
    '''),
    Version('writes into the input', "triton", 'mutated-input', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            block = triton.next_power_of_2(n_cols)
            softmax_kernel[(n_rows,)](x, x, x.stride(0), x.stride(0), n_cols, BLOCK=block)
            return x
    '''),
    Version('turns -inf scores into zeros', "triton", 'minus-inf-to-zero', '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf"))
            x = x.to(tl.float32)
            x = tl.where(mask & (x == -float("inf")), 0.0, x)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version('returns float32 for float16 input', "triton", 'wrong-dtype', '''
        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            block = triton.next_power_of_2(n_cols)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
            return output
    '''),
    Version("a masked store given other=", "triton", "error:store-other", '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask,
                     other=-float("inf"))
    '''),
    Version("a denominator nudged away from zero", "triton", "unknown", '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / (tl.sum(e, axis=0) + 0.01)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    # Shift-invariance hides the wrong row's maximum until rows lie far apart; what the
    # output shows (NaN rows) is no evidence for one cause over another, so none is named.
    Version("every row shifted by row 0's maximum", "triton", "unknown", '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            maximum = tl.max(tl.load(input_ptr + offsets, mask=mask, other=-float("inf")), axis=0)
            e = tl.exp(x - maximum)
            y = e / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
    Version("a zero for an all -inf row", "triton", "all-minus-inf", '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            maximum = tl.max(x, axis=0)
            maximum = tl.where(maximum == -float("inf"), 0.0, maximum)
            e = tl.exp(x - maximum)
            denominator = tl.sum(e, axis=0)
            y = tl.where(denominator > 0, e / denominator, 0.0)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("explicit loops", "python", None, '''
        def softmax_python(values):
            maximum = values[0]
            for v in values:
                if v > maximum:
                    maximum = v
            numerator = []
            for v in values:
                numerator.append(math.exp(v - maximum))
            denominator = 0.0
            for n in numerator:
                denominator += n
            output = []
            for n in numerator:
                output.append(n / denominator)
            return output
    '''),
    Version("math.fsum", "python", None, '''
        def softmax_python(values):
            m = max(values)
            e = [math.exp(v - m) for v in values]
            total = math.fsum(e)
            return [x / total for x in e]
    '''),
    Version("log-sum-exp", "python", None, '''
        def softmax_python(values):
            m = max(values)
            log_total = m + math.log(sum(math.exp(v - m) for v in values))
            return [math.exp(v - log_total) for v in values]
    '''),
    Version("numpy", "python", "not-plain-python", '''
        import numpy as np

        def softmax_python(values):
            x = np.asarray(values, dtype=np.float64)
            e = np.exp(x - x.max())
            return (e / e.sum()).tolist()
    '''),
    Version("several rows per program", "triton", None, '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_rows,
                           n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # (ROWS, 1)
            cols = tl.arange(0, BLOCK)[None, :]  # (1, BLOCK)
            mask = (rows < n_rows) & (cols < n_cols)
            x = tl.load(input_ptr + rows * input_row_stride + cols, mask=mask,
                        other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=1, keep_dims=True))
            y = e / tl.sum(e, axis=1, keep_dims=True)
            tl.store(output_ptr + rows * output_row_stride + cols, y, mask=mask)

        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            rows_per_program = 4
            grid = (triton.cdiv(n_rows, rows_per_program),)
            softmax_kernel[grid](output, x, output.stride(0), x.stride(0), n_rows, n_cols,
                                 ROWS=rows_per_program, BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
    Version("online, looped over chunks", "triton", None, '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            x_row = input_ptr + row * input_row_stride
            y_row = output_ptr + row * output_row_stride
            m = tl.full((BLOCK,), -float("inf"), tl.float32)
            s = tl.zeros((BLOCK,), tl.float32)
            for start in range(0, n_cols, BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                x = tl.load(x_row + offsets, mask=offsets < n_cols,
                            other=-float("inf")).to(tl.float32)
                new_m = tl.maximum(m, x)
                # a lane that has seen only -inf keeps s = 0 instead of (-inf) - (-inf) = NaN
                safe_m = tl.where(new_m == -float("inf"), 0.0, new_m)
                s = s * tl.exp(m - safe_m) + tl.exp(x - safe_m)
                m = new_m
            row_max = tl.max(m, axis=0)
            lane_scale = tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max))
            total = tl.sum(s * lane_scale, axis=0)
            for start in range(0, n_cols, BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                mask = offsets < n_cols
                x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
                tl.store(y_row + offsets, tl.exp(x - row_max) / total, mask=mask)

        def softmax_triton(x):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            block = min(triton.next_power_of_2(n_cols), 256)
            softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols,
                                      BLOCK=block)
            return output
    '''),
    Version("exp2 and a reciprocal", "triton", None, '''
        @triton.jit
        def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            log2e: tl.constexpr = 1.4426950408889634
            e = tl.exp2((x - tl.max(x, axis=0)) * log2e)
            inverse = 1.0 / tl.sum(e, axis=0)
            tl.store(output_ptr + row * output_row_stride + offsets, e * inverse, mask=mask)
    '''),
    Version("contiguous copy in the launcher", "triton", None, '''
        def softmax_triton(x):
            x = x.contiguous()
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            softmax_kernel[(n_rows,)](output, x, n_cols, n_cols, n_cols,
                                      BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
)
