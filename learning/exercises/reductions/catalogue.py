"""Other reductions: the padding and shape mistakes lessons 03 and 07 warn about, and correct
versions in other styles."""

from learning.grader.catalogue import Version

_TREE = '''
        def tree_reduce(values, op):
            width = 1
            while width < len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            levels = [level]
            while len(level) > 1:
                level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
                levels.append(level)
            return {result}
'''


def _tree(result: str) -> str:
    """The lesson's tree_reduce, returning ``result`` instead of ``levels``."""
    return _TREE.format(result=result)


PYTHON = (
    Version("pads every reduction with 0", "python", "zero-padding", '''
        def identity(op):
            return 0.0
    '''),
    Version("max and min identities swapped", "python", "swapped-identity", '''
        def identity(op):
            return {"sum": 0.0, "max": math.inf, "min": -math.inf, "product": 1.0}[op]
    '''),
    Version("pads every reduction with 1", "python", "one-padding", '''
        def identity(op):
            return 1.0
    '''),
    Version("no padding, odd levels carried over", "python", "no-padding", '''
        def tree_reduce(values, op):
            level = [float(v) for v in values] or [identity(op)]
            levels = [level]
            while len(level) > 1:
                paired = [combine(op, level[i], level[i + 1])
                          for i in range(0, len(level) - 1, 2)]
                if len(level) % 2:
                    paired.append(level[-1])
                level = paired
                levels.append(level)
            return levels
    '''),
    Version("pairs i with i + half", "python", "halves-pairing", '''
        def tree_reduce(values, op):
            width = 1
            while width < len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            levels = [level]
            while len(level) > 1:
                half = len(level) // 2
                level = [combine(op, level[i], level[i + half]) for i in range(half)]
                levels.append(level)
            return levels
    '''),
    Version("returns only the result", "python", "result-only", '''
        def tree_reduce(values, op):
            width = 1
            while width < len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            while len(level) > 1:
                level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
            return level[0]
    '''),
    Version("levels start after the first combine", "python", "first-level-missing", '''
        def tree_reduce(values, op):
            width = 1
            while width < len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            levels = []
            while len(level) > 1:
                level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
                levels.append(level)
            return levels or [level]
    '''),
    Version("levels rounded for display", "python", "rounded",
            _tree("[[round(v, 2) for v in level] for level in levels]")),
    Version("product adds", "python", "wrong-combine", '''
        def combine(op, a, b):
            if op in ("sum", "product"):
                return a + b
            return max(a, b) if op == "max" else min(a, b)
    '''),
    Version("pairs taken without padding", "python", "error:list-index", '''
        def tree_reduce(values, op):
            level = [float(v) for v in values] or [identity(op)]
            levels = [level]
            while len(level) > 1:
                level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
                levels.append(level)
            return levels
    '''),
    Version("a tree that never advances", "python", "timed-out", '''
        def tree_reduce(values, op):
            width = 1
            while width < len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            levels = [level]
            while len(level) > 1:
                levels.append([combine(op, level[i], level[i + 1])
                               for i in range(0, len(level), 2)])
            return levels
    '''),
    Version("levels from the result up", "python", "unknown", _tree("levels[::-1]")),
    Version("min padded with -inf too", "python", "swapped-identity", '''
        def identity(op):
            return {"sum": 0.0, "max": -math.inf, "min": -math.inf, "product": 1.0}[op]
    '''),
    Version("the width doubled once too often", "python", "unknown", '''
        def tree_reduce(values, op):
            width = 1
            while width <= len(values):
                width *= 2
            level = [float(v) for v in values] + [identity(op)] * (width - len(values))
            levels = [level]
            while len(level) > 1:
                level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
                levels.append(level)
            return levels
    '''),
)

_KERNEL = '''
        @triton.jit
        def centre_rows_kernel(out_ptr, x_ptr, out_row_stride, x_row_stride, n_rows, n_cols,
                               OP: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
            cols = tl.arange(0, BLOCK)[None, :]
            mask = {mask}
            if OP == "max":
                x = tl.load(x_ptr + rows * {x_stride} + cols, mask=mask{max_other})
                x = x.to(tl.float32)
                centre = tl.max(x, axis=1{keep})
            else:
                x = tl.load(x_ptr + rows * {x_stride} + cols, mask=mask{sum_other})
                x = x.to(tl.float32)
                centre = tl.sum(x, axis=1{keep}) / {count}
            tl.store(out_ptr + rows * out_row_stride + cols, x - centre, mask=mask)
'''


def _kernel(mask="(rows < n_rows) & (cols < n_cols)", x_stride="x_row_stride",
            max_other=', other=-float("inf")', sum_other=", other=0.0",
            keep=", keep_dims=True", count="n_cols") -> str:
    return _KERNEL.format(mask=mask, x_stride=x_stride, max_other=max_other,
                          sum_other=sum_other, keep=keep, count=count)


TRITON = (
    Version("other=0 for the max", "triton", "zero-other", _kernel(max_other=", other=0.0")),
    Version("no other at all", "triton", "zero-other", _kernel(max_other="", sum_other="")),
    Version("other=-inf for the sum too", "triton", "minus-inf-other-for-sum",
            _kernel(sum_other=', other=-float("inf")')),
    Version("mean over BLOCK lanes", "triton", "mean-over-block", _kernel(count="BLOCK")),
    Version("reductions without keep_dims", "triton", "keep-dims", _kernel(keep="")),
    # ROWS == BLOCK: the (ROWS,) statistic broadcasts along the columns and the kernel runs
    Version("reductions without keep_dims, as many rows as columns", "triton", "keep-dims",
            _kernel(keep="") + '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            block = triton.next_power_of_2(n_cols)
            centre_rows_kernel[(triton.cdiv(n_rows, block),)](
                out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op, ROWS=block,
                BLOCK=block)
            return out
    '''),
    Version("the statistic down the columns", "triton", "wrong-axis",
            _kernel(keep="").replace("axis=1", "axis=0")),
    Version("columns masked, rows not", "triton", "out-of-bounds",
            _kernel(mask="cols < n_cols")),
    Version("row offset from n_cols", "triton", "row-stride", _kernel(x_stride="n_cols")),
    Version("too few programs", "triton", "grid-too-small", '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            centre_rows_kernel[(n_rows // 4,)](out, x, out.stride(0), x.stride(0), n_rows,
                                               n_cols, OP=op, ROWS=4,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return out
    '''),
    Version("a fixed block of 1024", "triton", "block-too-small", '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            centre_rows_kernel[(triton.cdiv(n_rows, 4),)](
                out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op, ROWS=4, BLOCK=1024)
            return out
    '''),
    Version("the block as wide as the row", "triton", "error:arange-power-of-two", '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            centre_rows_kernel[(triton.cdiv(n_rows, 4),)](
                out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op, ROWS=4, BLOCK=n_cols)
            return out
    '''),
    Version("max centred on the minimum", "triton", "unknown",
            _kernel(max_other=', other=float("inf")').replace("tl.max(", "tl.min(")),
    Version("mean for both ops", "triton", "wrong-op", '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            centre_rows_kernel[(triton.cdiv(n_rows, 4),)](
                out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP="mean", ROWS=4,
                BLOCK=triton.next_power_of_2(n_cols))
            return out
    '''),
    Version("returns float32 for float16", "triton", "wrong-dtype", '''
        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            centre_rows_kernel[(triton.cdiv(n_rows, 4),)](
                out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op, ROWS=4,
                BLOCK=triton.next_power_of_2(n_cols))
            return out
    '''),
    Version("float16 arithmetic", "triton", "fp16-arithmetic",
            _kernel().replace("                x = x.to(tl.float32)\n", "")),
    Version("reduced over axis 0", "triton", "wrong-axis", _kernel().replace("axis=1", "axis=0")),
    # no reduction at all: what axis=0 over tiles of one row would give, and no such mistake
    Version("the row itself as its statistic", "triton", "unknown",
            _kernel().replace("tl.max(x, axis=1, keep_dims=True)", "x")
            .replace("tl.sum(x, axis=1, keep_dims=True)", "x")),
    Version("the mean divided by n_rows", "triton", "unknown", _kernel(count="n_rows")),
    Version("rows without the program's ROWS", "triton", "grid-too-small",
            _kernel().replace("tl.program_id(0) * ROWS + tl.arange",
                              "tl.program_id(0) + tl.arange")),
)

WRONG = PYTHON + TRITON

RIGHT = (
    Version("recursive halves of neighbours", "python", None, '''
        def identity(op):
            return {"sum": 0.0, "max": -math.inf, "min": math.inf, "product": 1.0}[op]

        def tree_reduce(values, op):
            width = 1 << (len(values) - 1).bit_length() if values else 1
            first = list(map(float, values)) + [identity(op)] * (width - len(values))

            def above(level):
                if len(level) == 1:
                    return [level]
                pairs = zip(level[0::2], level[1::2])
                return [level] + above([combine(op, a, b) for a, b in pairs])

            return above(first)
    '''),
    Version("one row per program, scalar statistic", "triton", None, '''
        @triton.jit
        def centre_rows_kernel(out_ptr, x_ptr, out_row_stride, x_row_stride, n_rows, n_cols,
                               OP: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            cols = tl.arange(0, BLOCK)
            mask = cols < n_cols
            if OP == "max":
                x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask,
                            other=-float("inf")).to(tl.float32)
                centre = tl.max(x, axis=0)  # a scalar broadcasts over the row by itself
            else:
                x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask,
                            other=0.0).to(tl.float32)
                centre = tl.sum(x, axis=0) / n_cols
            tl.store(out_ptr + row * out_row_stride + cols, x - centre, mask=mask)

        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            centre_rows_kernel[(n_rows,)](out, x, out.stride(0), x.stride(0), n_rows, n_cols,
                                          OP=op, ROWS=1, BLOCK=triton.next_power_of_2(n_cols))
            return out
    '''),
    Version("tl.where for the padding, [:, None] instead of keep_dims", "triton", None, '''
        @triton.jit
        def centre_rows_kernel(out_ptr, x_ptr, out_row_stride, x_row_stride, n_rows, n_cols,
                               OP: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
            cols = tl.arange(0, BLOCK)[None, :]
            mask = (rows < n_rows) & (cols < n_cols)
            x = tl.load(x_ptr + rows * x_row_stride + cols, mask=mask, other=0.0)
            x = x.to(tl.float32)
            if OP == "max":
                centre = tl.max(tl.where(mask, x, -float("inf")), axis=1)[:, None]
            else:
                centre = (tl.sum(x, axis=1) / n_cols)[:, None]
            tl.store(out_ptr + rows * out_row_stride + cols, x - centre, mask=mask)

        def centre_rows_triton(x, op):
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            grid = (triton.cdiv(n_rows, 8),)
            centre_rows_kernel[grid](out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op,
                                     ROWS=8, BLOCK=triton.next_power_of_2(n_cols))
            return out
    '''),
)
