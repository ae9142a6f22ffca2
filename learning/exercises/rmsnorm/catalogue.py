"""Other RMSNorms: the mistakes lessons 05 and 09 warn about, and correct ones in other styles."""

from learning.grader.catalogue import Version

PYTHON = (
    Version("eps outside the square root", "python", "eps-outside", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            rms = largest * math.sqrt(sum(s * s for s in scaled) / len(scaled)) + eps
            return [v / rms * w for v, w in zip(values, weight)]
    '''),
    Version("sum instead of mean", "python", "sum-not-mean", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            rms = math.sqrt(sum(s * s for s in scaled) + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("divides by n - 1", "python", "n-minus-one", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / (len(scaled) - 1)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("forgets the weight", "python", "no-weight", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [s / rms for s in scaled]
    '''),
    Version("no square root", "python", "no-sqrt", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean_square = sum(v * v for v in values) / len(values)
            return [v / (mean_square + eps) * w for v, w in zip(values, weight)]
    '''),
    Version("subtracts the mean (LayerNorm)", "python", "subtracts-mean", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean = sum(values) / len(values)
            centred = [v - mean for v in values]
            variance = sum(c * c for c in centred) / len(centred)
            return [c / math.sqrt(variance + eps) * w for c, w in zip(centred, weight)]
    '''),
    Version("square of the mean", "python", "mean-squared", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean = sum(values) / len(values)
            return [v / math.sqrt(mean * mean + eps) * w for v, w in zip(values, weight)]
    '''),
    Version("weight before normalising", "python", "weight-inside", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            weighted = [v * w for v, w in zip(values, weight)]
            mean_square = sum(u * u for u in weighted) / len(weighted)
            return [u / math.sqrt(mean_square + eps) for u in weighted]
    '''),
    Version("rescaled, eps not", "python", "eps-not-scaled", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            return [s / math.sqrt(mean_square + eps) * w for s, w in zip(scaled, weight)]
    '''),
    Version("scaled by max(values)", "python", "scale-sign", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("no rescaling: x * x", "python", "square-overflow", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean_square = sum(v * v for v in values) / len(values)
            rms = math.sqrt(mean_square + eps)
            return [v / rms * w for v, w in zip(values, weight)]
    '''),
    Version("no rescaling: v ** 2", "python", "square-overflow", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean_square = sum(v ** 2 for v in values) / len(values)
            return [v / math.sqrt(mean_square + eps) * w for v, w in zip(values, weight)]
    '''),
    Version("no eps", "python", "no-eps", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean_square = sum(v * v for v in values) / len(values)
            return [v / math.sqrt(mean_square) * w for v, w in zip(values, weight)]
    '''),
    Version("rescaled, eps over largest squared", "python", "tiny-row", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / (largest * largest))
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("normalises in place", "python", "mutated-input", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            for i, v in enumerate(values):
                values[i] = v / largest
            rms = math.sqrt(sum(s * s for s in values) / len(values) + eps / largest / largest)
            for i, (s, w) in enumerate(zip(values, weight)):
                values[i] = s / rms * w
            return list(values)
    '''),
    Version("a misspelt name", "python", "error:name-not-defined", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_sqaure + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("rounds the outputs to 6 places", "python", "rounded", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [round(s / rms * w, 6) for s, w in zip(scaled, weight)]
    '''),
    Version("drops the last value", "python", "wrong-length", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values[:-1]] or [values[0] / largest]
            rms = math.sqrt(sum(s * s for s in scaled) / len(scaled) + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("a while loop over the squares that never advances", "python", "timed-out", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            total, i = 0.0, 0
            while i < len(values):
                total += (values[i] / largest) ** 2
            rms = math.sqrt(total / len(values) + eps / largest / largest)
            return [v / largest / rms * w for v, w in zip(values, weight)]
    '''),
    Version("the mean of the absolute values", "python", "unknown", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            mean_abs = sum(abs(v) for v in values) / len(values)
            return [v / (mean_abs + eps) * w for v, w in zip(values, weight)]
    '''),
    Version("scaled by the largest value with its sign", "python", "scale-sign", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(values, key=abs)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("the row itself over the rescaled rms", "python", "unknown", '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest == 0.0:
                return [0.0 for _ in values]
            scaled = [v / largest for v in values]
            mean_square = sum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [v / rms * w for v, w in zip(values, weight)]
    '''),
)

_KERNEL_HEAD = '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, output_row_stride,
                           input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
'''


def _kernel(body: str) -> str:
    """A kernel version: the usual head, then ``body`` (indented like the head)."""
    return _KERNEL_HEAD + body



def _racing(scaler: int, counted: bool = False, waits: bool = False) -> str:
    """Two programs a row: the one of parity ``scaler`` stores the row's scale in a buffer,
    the other reads it back in the same launch (``counted``: after counting itself in with an
    atomic add, which orders nothing, since it does not wait; ``waits``: after spinning until
    the first sets the row's flag)."""
    flag = "scale_ptr + n_rows + row"  # the buffer's second half: a number per row
    indent = "\n                "
    before_read = f"tl.atomic_add({flag}, 1.0){indent}" if counted else \
        f"while tl.atomic_add({flag}, 0.0) == 0.0:{indent}    pass{indent}" if waits else ""
    after_store = f"{indent}tl.atomic_add({flag}, 1.0)" if waits else ""
    return f'''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, scale_ptr, output_row_stride,
                           input_row_stride, n_cols, n_rows, eps, BLOCK: tl.constexpr):
            # two programs a row: one finds its scale, the other applies it
            program = tl.program_id(0)
            row = program // 2
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            if program % 2 == {scaler}:
                mean_square = tl.sum(x * x, axis=0) / n_cols
                tl.store(scale_ptr + row, tl.rsqrt(mean_square + eps)){after_store}
            else:
                {before_read}inverse_rms = tl.load(scale_ptr + row)
                w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
                tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                         mask=mask)


        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            scale = torch.zeros(2 * n_rows, dtype=torch.float32, device=x.device)
            rmsnorm_kernel[(2 * n_rows,)](output, x, weight, scale, output.stride(0),
                                          x.stride(0), n_cols, n_rows, eps,
                                          BLOCK=triton.next_power_of_2(n_cols))
            return output
'''


def _summed(adds: str, zeroed: bool = True, programs: int = 2) -> str:
    """``programs`` programs a row (``part`` of them), each with its share of the row's
    columns in ``x``, run ``adds`` to put the row's sum of squares in ``sum_ptr + row``;
    ``apply_kernel``, a second launch, scales the row by it. ``count_ptr`` and
    ``partial_ptr``: two counters and ``programs`` partial sums a row, all zeros; the sums
    start at zero where ``zeroed``, uninitialised otherwise."""
    sums = "torch.zeros" if zeroed else "torch.empty"
    return f'''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, sum_ptr, partial_ptr, count_ptr,
                           output_row_stride, input_row_stride, n_cols, eps,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            part = tl.program_id(1)
            half = part
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            mine = mask & ((offsets % {programs}) == part)
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mine,
                        other=0.0).to(tl.float32){adds}


        @triton.jit
        def apply_kernel(output_ptr, input_ptr, weight_ptr, sum_ptr, output_row_stride,
                         input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            inverse_rms = tl.rsqrt(tl.load(sum_ptr + row) / n_cols + eps)
            tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                     mask=mask)


        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            sums = {sums}(n_rows, dtype=torch.float32, device=x.device)
            partials = torch.zeros(n_rows * {programs}, dtype=torch.float32, device=x.device)
            counts = torch.zeros(2 * n_rows, dtype=torch.int32, device=x.device)
            block = triton.next_power_of_2(n_cols)
            rmsnorm_kernel[(n_rows, {programs})](output, x, weight, sums, partials, counts,
                                                 output.stride(0), x.stride(0), n_cols, eps,
                                                 BLOCK=block)
            apply_kernel[(n_rows,)](output, x, weight, sums, output.stride(0), x.stride(0),
                                    n_cols, eps, BLOCK=block)
            return output
'''


TRITON = (
    Version("padding -inf, copied from softmax", "triton", "minus-inf-padding", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=-float("inf")).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x / tl.sqrt(mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("mean over BLOCK", "triton", "mean-over-block", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / BLOCK
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x / tl.sqrt(mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("eps outside the square root", "triton", "eps-outside", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x / (tl.sqrt(mean_square) + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("sum instead of mean", "triton", "sum-not-mean", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            total = tl.sum(x * x, axis=0)
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(total + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("forgets the weight", "triton", "no-weight", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            y = x * tl.rsqrt(mean_square + eps)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("row offset from n_cols", "triton", "row-stride", _kernel('''
            x = tl.load(input_ptr + row * n_cols + offsets, mask=mask, other=0.0)
            x = x.to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("the weight at the row's offset", "triton", "weight-row-offset", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
            y = x * tl.rsqrt(mean_square + eps) * w.to(tl.float32)
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''), interpreter_only=True),
    Version("the square root called as tl.rsqrt without tl", "triton", "error:name-not-defined",
            _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * rsqrt(mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("the mean square without its square root", "triton", "unknown", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x / (mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("no FP32 conversion", "triton", "fp16-squares", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0)
            y = x * tl.rsqrt(mean_square.to(tl.float32) + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("no eps", "triton", "no-eps", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(mean_square) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("too few programs", "triton", "grid-too-small", '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            grid = (max(1, n_rows // 2),)
            rmsnorm_kernel[grid](output, x, weight, output.stride(0), x.stride(0), n_cols, eps,
                                 BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
    Version("a fixed BLOCK of 1024", "triton", "block-too-small", '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
            block = min(triton.next_power_of_2(n_cols), 1024)
            rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0),
                                      min(n_cols, block), eps, BLOCK=block)
            return output
    '''),
    Version("normalises into the input", "triton", "mutated-input", '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            rmsnorm_kernel[(n_rows,)](x, x, weight, x.stride(0), x.stride(0), n_cols, eps,
                                      BLOCK=triton.next_power_of_2(n_cols))
            return x
    '''),
    Version("returns float32 for float16 input", "triton", "wrong-dtype", '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
            rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0), n_cols,
                                      eps, BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
    Version("mask with <=", "triton", "out-of-bounds", _kernel('''
            mask = offsets <= n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(mean_square + eps) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    '''), interpreter_only=True),
    Version("the shape unpacked as (n_cols, n_rows)", "triton", "out-of-bounds", '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            n_cols, n_rows = x.shape
            output = torch.empty_like(x)
            rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0), n_cols,
                                      eps, BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''', interpreter_only=True),
    Version("the program's row from axis 1", "triton", "grid-too-small", _kernel('''
            x = tl.load(input_ptr + tl.program_id(1) * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(mean_square + eps) * w
            tl.store(output_ptr + tl.program_id(1) * output_row_stride + offsets, y, mask=mask)
    ''')),
    Version("eps written into the kernel", "triton", "unknown", _kernel('''
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=0) / n_cols
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = x * tl.rsqrt(mean_square + 1e-6) * w
            tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)
    ''')),
    # Right only where the program that finds a row's scale runs before the one that applies
    # it, an order no GPU promises. The check sees one program read what another stored, in
    # any order, with nothing to order the two: an atomic count that waits for nothing, made
    # by the reader alone, orders nothing
    Version("a row's scale stored by one program, read by the next", "triton",
            "programs-share-memory", _racing(scaler=0), interpreter_only=True),
    Version("a row's scale stored by one program, read by the one before", "triton",
            "programs-share-memory", _racing(scaler=1), interpreter_only=True),
    Version("a row's scale read after counting in with an atomic add, by the next program",
            "triton", "programs-share-memory", _racing(scaler=0, counted=True),
            interpreter_only=True),
    Version("a row's scale read after counting in with an atomic add, by the one before",
            "triton", "programs-share-memory", _racing(scaler=1, counted=True),
            interpreter_only=True),
    # Two programs a row, each adding its half of the squares into one sum with a load and a
    # store: run one after another nothing is lost, on a GPU both may load before either
    # stores
    Version("two programs add into one sum with a load and a store", "triton",
            "programs-share-memory", '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, sum_ptr, output_row_stride,
                           input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            half = tl.program_id(1)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            mine = mask & ((offsets % 2) == half)
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mine,
                        other=0.0).to(tl.float32)
            total = tl.load(sum_ptr + row) + tl.sum(x * x, axis=0)
            tl.store(sum_ptr + row, total)


        @triton.jit
        def apply_kernel(output_ptr, input_ptr, weight_ptr, sum_ptr, output_row_stride,
                         input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            inverse_rms = tl.rsqrt(tl.load(sum_ptr + row) / n_cols + eps)
            tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                     mask=mask)


        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            sums = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
            block = triton.next_power_of_2(n_cols)
            rmsnorm_kernel[(n_rows, 2)](output, x, weight, sums, output.stride(0), x.stride(0),
                                        n_cols, eps, BLOCK=block)
            apply_kernel[(n_rows,)](output, x, weight, sums, output.stride(0), x.stride(0),
                                    n_cols, eps, BLOCK=block)
            return output
    ''', interpreter_only=True),
    # The last to count itself in reads the other's partial sum, but the count is relaxed: a
    # relaxed atomic operation orders nothing between programs
    Version("two programs a row, counted in with a relaxed atomic add", "triton",
            "programs-share-memory", _summed('''
            tl.store(partial_ptr + row * 2 + part, tl.sum(x * x, axis=0))
            if tl.atomic_add(count_ptr + row, 1, sem="relaxed") == 1:
                total = tl.load(partial_ptr + row * 2) + tl.load(partial_ptr + row * 2 + 1)
                tl.store(sum_ptr + row, total)'''), interpreter_only=True),
    # Both programs of a row store the whole row, the second with a wrong scale: what the row
    # holds is whichever stored last. Neither reads what the other stored (two stores to one
    # place are not judged: both may store the same values), so only the order shows it
    Version("both programs of a row store it, the second by the next with a wrong scale",
            "triton", "program-order", '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, output_row_stride,
                           input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            program = tl.program_id(0)
            row = program // 2
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            inverse_rms = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
            if program % 2 == 1:
                inverse_rms = inverse_rms * 2.0
            tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                     mask=mask)


        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            rmsnorm_kernel[(2 * n_rows,)](output, x, weight, output.stride(0), x.stride(0),
                                          n_cols, eps, BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''', interpreter_only=True),
    # The row's sum zeroed inside the launch by one of its programs while the other adds into
    # it atomically: on a GPU the add may land before the zero, and is lost
    Version("a row's sum zeroed by one of its programs while the other adds into it", "triton",
            "programs-share-memory", _summed('''
            if half == 0:
                tl.store(sum_ptr + row, 0.0)
            tl.atomic_add(sum_ptr + row, tl.sum(x * x, axis=0))''', zeroed=False),
            interpreter_only=True),
    # The same split with a wait: the second program of a row spins on a flag until the first
    # has stored the scale. Run last to first, the interpreter runs the waiting program before
    # the one it waits for, and the case never ends; on a GPU nothing promises the order either
    Version("a row's second program waits in a loop for the first one's scale", "triton",
            "waits-for-another-program", _racing(scaler=0, waits=True), interpreter_only=True),
)

WRONG = PYTHON + TRITON

RIGHT = (
    # Programs that share memory through atomic operations, rightly: each program's writes
    # reach the program that reads them through an atomic operation on one element (directly,
    # or passed on by a third program), so no GPU order can break them
    Version("two programs a row add their halves atomically", "triton", None, _summed('''
            tl.atomic_add(sum_ptr + row, tl.sum(x * x, axis=0))'''), interpreter_only=True),
    Version("two programs a row, the last to count itself in adds both halves", "triton", None,
            _summed('''
            tl.store(partial_ptr + row * 2 + part, tl.sum(x * x, axis=0))
            if tl.atomic_add(count_ptr + row, 1) == 1:  # both halves are in
                total = tl.load(partial_ptr + row * 2) + tl.load(partial_ptr + row * 2 + 1)
                tl.store(sum_ptr + row, total)'''), interpreter_only=True),
    # programs 0 and 1 of a row meet at a first counter; the last of them, and program 2, at
    # a second; the last there reads all three partial sums, program 0's among them though it
    # met program 0 only through the first counter's last program
    Version("three programs a row, counted in twice, the last adds all three", "triton", None,
            _summed('''
            tl.store(partial_ptr + row * 3 + part, tl.sum(x * x, axis=0))
            go = part == 2
            if part < 2:
                go = tl.atomic_add(count_ptr + row, 1) == 1
            if go:
                if tl.atomic_add(count_ptr + tl.num_programs(0) + row, 1) == 1:
                    total = tl.load(partial_ptr + row * 3) + \\
                        tl.load(partial_ptr + row * 3 + 1) + tl.load(partial_ptr + row * 3 + 2)
                    tl.store(sum_ptr + row, total)''', programs=3), interpreter_only=True),
    # The same hand-over with its workspace kept from call to call: the last program of a row
    # puts the row's count back to zero for the next call, so the host never clears it
    Version("two programs a row, the last finishes it, the workspace kept between calls",
            "triton", None, '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, partial_ptr, count_ptr,
                           output_row_stride, input_row_stride, n_cols, eps,
                           BLOCK: tl.constexpr):
            row = tl.program_id(0)
            part = tl.program_id(1)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(input_ptr + row * input_row_stride + offsets,
                        mask=mask & ((offsets % 2) == part), other=0.0).to(tl.float32)
            tl.store(partial_ptr + row * 2 + part, tl.sum(x * x, axis=0))
            if tl.atomic_add(count_ptr + row, 1) == 1:  # the row's other half is in
                total = tl.load(partial_ptr + row * 2) + tl.load(partial_ptr + row * 2 + 1)
                x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                            other=0.0).to(tl.float32)
                w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
                tl.store(output_ptr + row * output_row_stride + offsets,
                         x * tl.rsqrt(total / n_cols + eps) * w, mask=mask)
                tl.store(count_ptr + row, 0)  # ready for the next call


        _workspaces = {}


        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            if (n_rows, x.device) not in _workspaces:
                _workspaces[(n_rows, x.device)] = (
                    torch.zeros(2 * n_rows, dtype=torch.float32, device=x.device),
                    torch.zeros(n_rows, dtype=torch.int32, device=x.device))
            partials, counts = _workspaces[(n_rows, x.device)]
            rmsnorm_kernel[(n_rows, 2)](output, x, weight, partials, counts, output.stride(0),
                                        x.stride(0), n_cols, eps,
                                        BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''', interpreter_only=True),
    Version("math.hypot", "python", None, '''
        def rmsnorm_python(values, weight, eps=1e-6):
            # hypot adds squares without overflowing: sqrt(sum x**2) = hypot(*x)
            rms = math.hypot(math.hypot(*values) / math.sqrt(len(values)), math.sqrt(eps))
            return [v / rms * w for v, w in zip(values, weight)]
    '''),
    Version("explicit loops", "python", None, '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = 0.0
            for v in values:
                if abs(v) > largest:
                    largest = abs(v)
            output = []
            if largest == 0.0:
                for _ in values:
                    output.append(0.0)
                return output
            total = 0.0
            for v in values:
                total += (v / largest) * (v / largest)
            inverse = 1.0 / math.sqrt(total / len(values) + eps / largest / largest)
            for v, w in zip(values, weight):
                output.append(v / largest * inverse * w)
            return output
    '''),
    Version("rescale only when needed, math.fsum", "python", None, '''
        def rmsnorm_python(values, weight, eps=1e-6):
            largest = max(abs(v) for v in values)
            if largest < 1e100:  # the squares fit a double: no rescaling needed
                rms = math.sqrt(math.fsum(v * v for v in values) / len(values) + eps)
                return [v / rms * w for v, w in zip(values, weight)]
            scaled = [v / largest for v in values]
            mean_square = math.fsum(s * s for s in scaled) / len(scaled)
            rms = math.sqrt(mean_square + eps / largest / largest)
            return [s / rms * w for s, w in zip(scaled, weight)]
    '''),
    Version("rsqrt, weight loaded first", "triton", None, _kernel('''
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask,
                        other=0.0).to(tl.float32)
            inverse_rms = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
            tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                     mask=mask)
    ''')),
    Version("several rows per program", "triton", None, '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, output_row_stride,
                           input_row_stride, n_rows, n_cols, eps, ROWS: tl.constexpr,
                           BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # (ROWS, 1)
            cols = tl.arange(0, BLOCK)[None, :]  # (1, BLOCK)
            mask = (rows < n_rows) & (cols < n_cols)
            x = tl.load(input_ptr + rows * input_row_stride + cols, mask=mask,
                        other=0.0).to(tl.float32)
            w = tl.load(weight_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            mean_square = tl.sum(x * x, axis=1, keep_dims=True) / n_cols  # (ROWS, 1)
            y = x * tl.rsqrt(mean_square + eps) * w
            tl.store(output_ptr + rows * output_row_stride + cols, y, mask=mask)

        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
            rows_per_program = 4
            rmsnorm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
                output, x, weight, output.stride(0), x.stride(0), n_rows, n_cols, eps,
                ROWS=rows_per_program, BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
    Version("looped over chunks, two passes", "triton", None, '''
        @triton.jit
        def rmsnorm_kernel(output_ptr, input_ptr, weight_ptr, output_row_stride,
                           input_row_stride, n_cols, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            x_row = input_ptr + row * input_row_stride
            squares = tl.zeros((BLOCK,), tl.float32)
            for start in range(0, n_cols, BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                x = tl.load(x_row + offsets, mask=offsets < n_cols, other=0.0).to(tl.float32)
                squares += x * x
            inverse_rms = tl.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
            for start in range(0, n_cols, BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                mask = offsets < n_cols
                x = tl.load(x_row + offsets, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
                tl.store(output_ptr + row * output_row_stride + offsets, x * inverse_rms * w,
                         mask=mask)

        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            output = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
            block = min(triton.next_power_of_2(n_cols), 256)
            rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0), n_cols,
                                      eps, BLOCK=block)
            return output
    '''),
    Version("contiguous copy in the launcher", "triton", None, '''
        def rmsnorm_triton(x, weight, eps=1e-6):
            x = x.contiguous()
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            rmsnorm_kernel[(n_rows,)](output, x, weight, n_cols, n_cols, n_cols, eps,
                                      BLOCK=triton.next_power_of_2(n_cols))
            return output
    '''),
)
