"""Other softmax backward passes: the mistakes lesson 11 warns about, and correct ones in other
styles."""

from learning.grader.catalogue import Version

PYTHON = (
    Version("forgets the y factor", "python", "no-y-factor", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [g - dot for g in dy]
    '''),
    Version("dot product of dy alone", "python", "dot-without-y", '''
        def softmax_backward_python(y, dy):
            total = sum(dy)
            return [p * (g - total) for p, g in zip(y, dy)]
    '''),
    Version("the Jacobian's diagonal only", "python", "diagonal-only", '''
        def softmax_backward_python(y, dy):
            return [p * (1.0 - p) * g for p, g in zip(y, dy)]
    '''),
    Version("flipped sign", "python", "flipped-sign", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [p * (dot - g) for p, g in zip(y, dy)]
    '''),
    Version("applies softmax to y again", "python", "softmax-again", '''
        import math

        def softmax_backward_python(y, dy):
            top = max(y)
            e = [math.exp(v - top) for v in y]
            p = [v / sum(e) for v in e]
            dot = sum(a * g for a, g in zip(p, dy))
            return [a * (g - dot) for a, g in zip(p, dy)]
    '''),
    Version("writes dx into dy", "python", "mutated-input", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            for i, p in enumerate(y):
                dy[i] = p * (dy[i] - dot)
            return dy
    '''),
    Version("drops the last gradient", "python", "wrong-length", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [p * (g - dot) for p, g in zip(y[:-1], dy[:-1])]
    '''),
    Version("the dot product under another name", "python", "error:name-not-defined", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [p * (g - dot_product) for p, g in zip(y, dy)]
    '''),
    Version("a dot product loop that never advances", "python", "timed-out", '''
        def softmax_backward_python(y, dy):
            dot, i = 0.0, 0
            while i < len(y):
                dot += y[i] * dy[i]
            return [p * (g - dot) for p, g in zip(y, dy)]
    '''),
    Version("the dot product subtracted outside the product", "python", "unknown", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [p * g - dot for p, g in zip(y, dy)]
    '''),
    Version("the dot product averaged over the row", "python", "unknown", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy)) / len(y)
            return [p * (g - dot) for p, g in zip(y, dy)]
    '''),
    Version("y and dy swapped in the product", "python", "unknown", '''
        def softmax_backward_python(y, dy):
            dot = sum(p * g for p, g in zip(y, dy))
            return [g * (p - dot) for p, g in zip(y, dy)]
    '''),
)

TRITON = (
    Version("forgets the y factor", "triton", "no-y-factor", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, dy - dot, mask=mask)
    '''),
    Version("y padded with -inf", "triton", "minus-inf-padding", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            # copied from the forward kernel: fine for a maximum, wrong for a sum of products
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=-float("inf"))
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)
    '''),
    Version("dot product over the whole tensor", "triton", "dot-over-tensor", '''
        @triton.jit
        def scale_kernel(dx_ptr, y_ptr, dy_ptr, dot, dx_row_stride, y_row_stride,
                         dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)

        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            dot = (y.double() * dy.double()).sum().item()  # one number for every row
            scale_kernel[(n_rows,)](dx, y, dy, dot, dx.stride(0), y.stride(0), dy.stride(0),
                                    n_cols, BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("several rows per program, tl.sum without an axis", "triton", "dot-over-tensor", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_rows, n_cols, ROWS: tl.constexpr,
                                    BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # (ROWS, 1)
            cols = tl.arange(0, BLOCK)[None, :]  # (1, BLOCK)
            mask = (rows < n_rows) & (cols < n_cols)
            y = tl.load(y_ptr + rows * y_row_stride + cols, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + rows * dy_row_stride + cols, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy)  # the whole tile, every row of it at once
            tl.store(dx_ptr + rows * dx_row_stride + cols, y * (dy - dot), mask=mask)

        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            grid = (triton.cdiv(n_rows, 4),)
            softmax_backward_kernel[grid](dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0),
                                          n_rows, n_cols, ROWS=4,
                                          BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("row offset from n_cols", "triton", "row-stride", '''
        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            softmax_backward_kernel[(n_rows,)](dx, y, dy, n_cols, n_cols, n_cols, n_cols,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("one row stride for all three tensors", "triton", "shared-stride", '''
        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            stride = y.stride(0)
            softmax_backward_kernel[(n_rows,)](dx, y, dy, n_cols, stride, stride, n_cols,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("float32 arithmetic for float64 too", "triton", "fp64-narrowed", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            y = y.to(tl.float32)
            dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)
    '''),
    Version("y and dy padded with -inf", "triton", "both-minus-inf-padding", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=-float("inf"))
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=-float("inf"))
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)
    '''),
    Version("dot product of dy alone", "triton", "dot-without-y", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            total = tl.sum(dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - total), mask=mask)
    '''),
    Version("the Jacobian's diagonal only", "triton", "diagonal-only", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (1.0 - y) * dy, mask=mask)
    '''),
    Version("no FP32 conversion", "triton", "fp16-dot", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)
    '''),
    Version("returns float32 for float16 input", "triton", "wrong-dtype", '''
        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty(y.shape, dtype=torch.float32, device=y.device)
            softmax_backward_kernel[(n_rows,)](dx, y, dy, dx.stride(0), y.stride(0),
                                               dy.stride(0), n_cols,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("the dot product reduced over axis 1", "triton", "error:reduction-axis", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=1)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * (dy - dot), mask=mask)
    '''),
    Version("the dot product subtracted outside the product", "triton", "unknown", '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * dy - dot, mask=mask)
    '''),
)

# A learner's SoftmaxFunction with the reference forward and the given backward body.
_FUNCTION = '''
        class SoftmaxFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                n_rows, n_cols = x.shape
                y = torch.empty_like(x, memory_format=torch.contiguous_format)
                softmax_forward_kernel[(n_rows,)](y, x, y.stride(0), x.stride(0), n_cols,
                                                  BLOCK=triton.next_power_of_2(n_cols))
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, dy):
'''


def _function(backward_body: str) -> str:
    return _FUNCTION + backward_body.lstrip("\n")


AUTOGRAD = (
    Version("saves x instead of y", "autograd", "saved-x", '''
        class SoftmaxFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                n_rows, n_cols = x.shape
                y = torch.empty_like(x, memory_format=torch.contiguous_format)
                softmax_forward_kernel[(n_rows,)](y, x, y.stride(0), x.stride(0), n_cols,
                                                  BLOCK=triton.next_power_of_2(n_cols))
                ctx.save_for_backward(x)
                return y

            @staticmethod
            def backward(ctx, dy):
                (y,) = ctx.saved_tensors  # holds x, the forward's input
                return softmax_backward_triton(y, dy)
    '''),
    Version("forward in float32 for float64 too", "autograd", "fp64-narrowed", '''
        @triton.jit
        def softmax_forward_kernel(y_ptr, x_ptr, y_row_stride, x_row_stride, n_cols,
                                   BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)  # lesson 08's line, which narrows float64
            numerator = tl.exp(x - tl.max(x, axis=0))
            tl.store(y_ptr + row * y_row_stride + offsets, numerator / tl.sum(numerator, axis=0),
                     mask=mask)
    '''),
    Version("forward pads with zero", "autograd", "forward", '''
        @triton.jit
        def softmax_forward_kernel(y_ptr, x_ptr, y_row_stride, x_row_stride, n_cols,
                                   BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=0.0)
            if x.dtype != tl.float64:
                x = x.to(tl.float32)
            numerator = tl.exp(x - tl.max(x, axis=0))
            tl.store(y_ptr + row * y_row_stride + offsets, numerator / tl.sum(numerator, axis=0),
                     mask=mask)
    '''),
    Version("forward without the maximum", "autograd", "forward", '''
        @triton.jit
        def softmax_forward_kernel(y_ptr, x_ptr, y_row_stride, x_row_stride, n_cols,
                                   BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf"))
            if x.dtype != tl.float64:
                x = x.to(tl.float32)
            numerator = tl.exp(x)
            tl.store(y_ptr + row * y_row_stride + offsets, numerator / tl.sum(numerator, axis=0),
                     mask=mask)
    '''),
    # Shift-invariance hides the wrong row's maximum until rows lie far apart; what the
    # gradient shows (NaN rows) is no evidence for one cause over another, so none is named.
    Version("forward shifts every row by row 0's maximum", "autograd", "unknown", '''
        @triton.jit
        def softmax_forward_kernel(y_ptr, x_ptr, y_row_stride, x_row_stride, n_cols,
                                   BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf"))
            if x.dtype != tl.float64:
                x = x.to(tl.float32)
            first_row = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")).to(x.dtype)
            numerator = tl.exp(x - tl.max(first_row, axis=0))
            tl.store(y_ptr + row * y_row_stride + offsets, numerator / tl.sum(numerator, axis=0),
                     mask=mask)
    '''),
    Version("backward passes dy on as it comes", "autograd", "dy-not-contiguous", '''
        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            softmax_backward_kernel[(n_rows,)](dx, y, dy, dx.stride(0), y.stride(0),
                                               dy.stride(0), n_cols,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return dx
    ''' + _function('''
                (y,) = ctx.saved_tensors
                return softmax_backward_triton(y, dy)
    '''), interpreter_only=True),
    Version("backward reads dy with the width as its row stride", "autograd", "row-stride", '''
        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            softmax_backward_kernel[(n_rows,)](dx, y, dy, n_cols, y.stride(0), n_cols, n_cols,
                                               BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("returns float32 for float16", "autograd", "wrong-dtype", '''
        def softmax_gradient(x, dy):
            leaf = x.detach().float().requires_grad_(True)
            SoftmaxFunction.apply(leaf).backward(dy.float())
            return leaf.grad
    '''),
    Version("requires_grad on x itself", "autograd", "input-autograd", '''
        def softmax_gradient(x, dy):
            leaf = x.requires_grad_(True)
            SoftmaxFunction.apply(leaf).backward(dy)
            return leaf.grad.clone()
    '''),
    Version("the saved tensor misnamed in backward", "autograd", "error:name-not-defined",
            _function('''
                (probabilities,) = ctx.saved_tensors
                return softmax_backward_triton(y, dy.contiguous())
    ''')),
    # torch's product in backward, which autograd's engine runs where the check's record of
    # torch's work does not reach: no kernel's store reaches the gradient
    Version("backward passes dy through", "autograd", "not-from-kernels", _function('''
                return 0.5 * dy.contiguous()
    ''')),
)

_FORMULA_KERNEL = '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, {dx}, mask=mask)
'''
# The wrong formulas of the backward kernel, seen through autograd as the learner's
# SoftmaxFunction calls the same kernel.
_FORMULAS = (
    ("forgets the y factor", "no-y-factor", "dy - dot"),
    ("dot product of dy alone", "dot-without-y", "y * (dy - tl.sum(dy, axis=0))"),
    ("the Jacobian's diagonal only", "diagonal-only", "y * (1.0 - y) * dy"),
    ("flipped sign", "flipped-sign", "y * (dot - dy)"),
)
TRITON += (Version("flipped sign", "triton", "flipped-sign",
                   _FORMULA_KERNEL.format(dx="y * (dot - dy)")),)
# The right formula, one step of the kernel changed.
_CORRECT_KERNEL = _FORMULA_KERNEL.format(dx="y * (dy - dot)")
TRITON += (
    Version("the dot product averaged over the row", "triton", "unknown",
            _CORRECT_KERNEL.replace("tl.sum(y * dy, axis=0)", "tl.sum(y * dy, axis=0) / n_cols")),
    Version("the dot product rounded to the storage dtype", "triton", "fp16-dot",
            _CORRECT_KERNEL.replace("tl.sum(y * dy, axis=0)",
                                    "tl.sum(y * dy, axis=0).to(dx_ptr.dtype.element_ty)")),
    Version("mask with <=", "triton", "out-of-bounds",
            _CORRECT_KERNEL.replace("offsets < n_cols", "offsets <= n_cols"),
            interpreter_only=True),
    Version("dx stored with y's row stride", "triton", "out-of-bounds",
            _CORRECT_KERNEL.replace("row * dx_row_stride", "row * y_row_stride"),
            interpreter_only=True),
)
AUTOGRAD += tuple(Version(f"backward kernel: {name}", "autograd", bug,
                          _FORMULA_KERNEL.format(dx=dx)) for name, bug, dx in _FORMULAS)
# a kernel of the learner's computing the gradient wrongly, in a way no known mistake gives
AUTOGRAD += (Version("backward kernel: the dot product averaged over the row", "autograd",
                     "unknown", _CORRECT_KERNEL.replace("tl.sum(y * dy, axis=0)",
                                                        "tl.sum(y * dy, axis=0) / n_cols")),)

WRONG = PYTHON + TRITON + AUTOGRAD

RIGHT = (
    Version("explicit loops", "python", None, '''
        def softmax_backward_python(y, dy):
            dot = 0.0
            for i in range(len(y)):
                dot += y[i] * dy[i]
            dx = []
            for i in range(len(y)):
                dx.append(y[i] * dy[i] - y[i] * dot)
            return dx
    '''),
    Version("the Jacobian, row by row", "python", None, '''
        def softmax_backward_python(y, dy):
            n = len(y)
            jacobian = [[y[i] * ((1.0 if i == j else 0.0) - y[j]) for j in range(n)]
                        for i in range(n)]
            return [sum(jacobian[i][j] * dy[j] for j in range(n)) for i in range(n)]
    '''),
    Version("several rows per program", "triton", None, '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_rows, n_cols, ROWS: tl.constexpr,
                                    BLOCK: tl.constexpr):
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # (ROWS, 1)
            cols = tl.arange(0, BLOCK)[None, :]  # (1, BLOCK)
            mask = (rows < n_rows) & (cols < n_cols)
            y = tl.load(y_ptr + rows * y_row_stride + cols, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + rows * dy_row_stride + cols, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            dot = tl.sum(y * dy, axis=1, keep_dims=True)  # (ROWS, 1): one per row
            tl.store(dx_ptr + rows * dx_row_stride + cols, y * (dy - dot), mask=mask)

        def softmax_backward_triton(y, dy):
            n_rows, n_cols = y.shape
            dx = torch.empty_like(y, memory_format=torch.contiguous_format)
            grid = (triton.cdiv(n_rows, 4),)
            softmax_backward_kernel[grid](dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0),
                                          n_rows, n_cols, ROWS=4,
                                          BLOCK=triton.next_power_of_2(n_cols))
            return dx
    '''),
    Version("-inf padding, removed before the sum", "triton", None, '''
        @triton.jit
        def softmax_backward_kernel(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride,
                                    dy_row_stride, n_cols, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n_cols
            y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=-float("inf"))
            dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
            if y.dtype != tl.float64:
                y = y.to(tl.float32)
                dy = dy.to(tl.float32)
            # the padded products are NaN; tl.where swaps them for 0 before they reach the sum
            dot = tl.sum(tl.where(mask, y * dy, 0.0), axis=0)
            tl.store(dx_ptr + row * dx_row_stride + offsets, y * dy - y * dot, mask=mask)
    '''),
    Version("backward makes dy contiguous", "autograd", None, '''
        class SoftmaxFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                n_rows, n_cols = x.shape
                y = torch.empty_like(x, memory_format=torch.contiguous_format)
                softmax_forward_kernel[(n_rows,)](y, x, y.stride(0), x.stride(0), n_cols,
                                                  BLOCK=triton.next_power_of_2(n_cols))
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, dy):
                (y,) = ctx.saved_tensors
                return softmax_backward_triton(y, dy.contiguous())

        def softmax_gradient(x, dy):
            x = x.detach().requires_grad_()
            SoftmaxFunction.apply(x).backward(dy)
            return x.grad
    '''),
)
