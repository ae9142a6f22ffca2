"""The softmax backward pass (lesson 11): in plain Python, as a Triton kernel, and wired to a
forward kernel through torch.autograd.

This is your file: edit it, then grade it with

    python -m learning.check softmax_backward

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import torch
import triton
import triton.language as tl


def softmax_backward_python(y: list[float], dy: list[float]) -> list[float]:
    """The gradient of softmax for one row, in plain Python (lesson 11).

    ``y`` is the row softmax returned, ``dy`` the gradient of the loss with respect to ``y``.
    Returns ``dx[i] = y[i] * (dy[i] - sum_j y[j] * dy[j])`` as a new list.
    """
    # TODO(lesson 11): one reduction (the dot product), then one elementwise step.
    raise NotImplementedError("softmax_backward_python is not written yet: lesson 11 starts it")


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
    """One program computes dx for one row: dx = y * (dy - sum(y * dy)) (lesson 11).

    Preconditions: BLOCK >= n_cols and a power of two; the last dimension has stride 1.
    """
    # TODO(lesson 11): which row am I, two masked loads (what must padding hold?), the math in
    # float32 (float64 stays float64), the dot product, a masked store.
    pass


def softmax_backward_triton(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx for a 2-D ``y`` and ``dy`` with ``softmax_backward_kernel``, one program per row.

    Returns a new tensor shaped like ``y`` in ``y``'s dtype; neither input changes. Each of
    ``y``, ``dy`` and the output has its own row stride (``dy`` may be a slice of a wider
    tensor); the last dimension has stride 1.
    """
    # TODO(lesson 11): allocate dx, choose BLOCK, launch one program per row.
    raise NotImplementedError("softmax_backward_triton is not written yet: lesson 11 starts it")


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
    # TODO(lesson 11): your lesson 08 kernel, with the float64 exception of the backward kernel.
    pass


class SoftmaxFunction(torch.autograd.Function):
    """Softmax over the last dimension of a 2-D tensor whose gradient is the backward kernel."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        """Launch ``softmax_forward_kernel``, keep y (not x) for the backward pass, return y."""
        # TODO(lesson 11): allocate y, launch, ctx.save_for_backward(...), return y.
        raise NotImplementedError("SoftmaxFunction.forward is not written yet: lesson 11 "
                                  "starts it")

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        """The gradient with respect to x, from the saved y and the incoming dy."""
        # TODO(lesson 11): take y back from ctx.saved_tensors and call softmax_backward_triton.
        raise NotImplementedError("SoftmaxFunction.backward is not written yet: lesson 11 "
                                  "starts it")


def softmax_gradient(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """The gradient of ``sum(softmax(x) * dy)`` with respect to ``x``, computed by autograd
    through ``SoftmaxFunction``: apply it to a copy of ``x`` that requires grad, call
    ``.backward(dy)`` on the output, and return the copy's ``.grad``. ``x`` must not change."""
    # TODO(lesson 11): four lines; the lesson shows how to call .backward().
    raise NotImplementedError("softmax_gradient is not written yet: lesson 11 starts it")
