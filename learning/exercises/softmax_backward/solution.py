"""The softmax backward pass (lesson 11): in plain Python, as a Triton kernel, and wired to a
forward kernel through torch.autograd.

Reference solution for softmax_backward.py.
"""

import torch
import triton
import triton.language as tl


def softmax_backward_python(y: list[float], dy: list[float]) -> list[float]:
    """The gradient of softmax for one row, in plain Python (lesson 11).

    ``y`` is the row softmax returned, ``dy`` the gradient of the loss with respect to ``y``.
    Returns ``dx[i] = y[i] * (dy[i] - sum_j y[j] * dy[j])`` as a new list.
    """
    dot = sum(p * g for p, g in zip(y, dy))  # reduction: sum_j y[j] * dy[j]
    return [p * (g - dot) for p, g in zip(y, dy)]  # elementwise


@triton.jit
def softmax_backward_kernel(
    dx_ptr,  # where the program writes its row of dx
    y_ptr,  # the forward output, one row per program
    dy_ptr,  # the upstream gradient, same shape as y
    dx_row_stride,  # elements between the starts of two rows of dx
    y_row_stride,  # elements between the starts of two rows of y (y.stride(0))
    dy_row_stride,  # elements between the starts of two rows of dy (dy.stride(0))
    n_cols,  # the row's width; lanes at or past it are padding
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    """One program computes dx for one row: dx = y * (dy - sum(y * dy)) (lesson 11)."""
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # Padding reads 0: 0 * 0 adds nothing to the dot product, the identity of a sum.
    y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0)
    # float16 and bfloat16 widen to float32; float64 (gradcheck's dtype) stays float64
    if y.dtype != tl.float64:
        y = y.to(tl.float32)
        dy = dy.to(tl.float32)
    dot = tl.sum(y * dy, axis=0)  # one number per row
    dx = y * (dy - dot)
    tl.store(dx_ptr + row * dx_row_stride + offsets, dx, mask=mask)


def softmax_backward_triton(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx for a 2-D ``y`` and ``dy`` with ``softmax_backward_kernel``, one program per row.

    Returns a new tensor shaped like ``y`` in ``y``'s dtype; neither input changes. Each of
    ``y``, ``dy`` and the output has its own row stride (``dy`` may be a slice of a wider
    tensor); the last dimension has stride 1.
    """
    if y.ndim != 2 or y.shape != dy.shape:
        raise ValueError(f"expected two 2-D tensors of one shape, got {tuple(y.shape)} and "
                         f"{tuple(dy.shape)}")
    if y.stride(1) != 1 or dy.stride(1) != 1:
        raise ValueError(f"the last dimension must have stride 1, not {y.stride(1)} (y) and "
                         f"{dy.stride(1)} (dy)")
    n_rows, n_cols = y.shape
    dx = torch.empty_like(y, memory_format=torch.contiguous_format)
    softmax_backward_kernel[(n_rows,)](dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0),
                                       n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return dx


@triton.jit
def softmax_forward_kernel(
    y_ptr,  # where the program writes its row of probabilities
    x_ptr,  # the scores, one row per program
    y_row_stride,  # elements between the starts of two rows of y
    x_row_stride,  # elements between the starts of two rows of x (x.stride(0))
    n_cols,  # the row's width; lanes at or past it are padding
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    """Lesson 08's softmax, one row per program, keeping float64 as float64 for gradcheck."""
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=-float("inf"))
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
    maximum = tl.max(x, axis=0)
    numerator = tl.exp(x - maximum)
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator
    tl.store(y_ptr + row * y_row_stride + offsets, y, mask=mask)


class SoftmaxFunction(torch.autograd.Function):
    """Softmax over the last dimension of a 2-D tensor whose gradient is the backward kernel."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        """Launch ``softmax_forward_kernel``, keep y (not x) for the backward pass, return y."""
        n_rows, n_cols = x.shape
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        softmax_forward_kernel[(n_rows,)](y, x, y.stride(0), x.stride(0), n_cols,
                                          BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        """The gradient with respect to x, from the saved y and the incoming dy."""
        (y,) = ctx.saved_tensors
        if dy.stride(1) != 1:  # y.sum().backward() sends an expanded dy whose strides are 0
            dy = dy.contiguous()
        return softmax_backward_triton(y, dy)


def softmax_gradient(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """The gradient of ``sum(softmax(x) * dy)`` with respect to ``x``, computed by autograd
    through ``SoftmaxFunction``: apply it to a copy of ``x`` that requires grad, call
    ``.backward(dy)`` on the output, and return the copy's ``.grad``. ``x`` must not change."""
    leaf = x.detach().clone().requires_grad_(True)
    y = SoftmaxFunction.apply(leaf)
    y.backward(dy)
    return leaf.grad
