"""Softmax (torch.ops.tilekit.softmax_{fwd,bwd}).

Operators (python/csrc/bindings.cpp), along the LAST dimension of x (viewed as [rows, cols]):

  softmax_fwd(x)      -> y = softmax(x, -1), contiguous, x's dtype
  softmax_bwd(dy, y)  -> dx = y * (dy - sum(dy * y, -1))
"""

from __future__ import annotations

import torch

from . import _library

__all__ = ["softmax"]


def softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax like torch.softmax / torch.nn.functional.softmax (dim defaults to the last one).

    The kernels reduce along the last dimension; for another `dim` the input is transposed
    (a view; the operator copies it once because that view's last dimension is not contiguous)
    and the result transposed back. `dtype` casts the input first, as in PyTorch. Differentiable.
    """
    if dtype is not None:
        input = input.to(dtype)
    if input.dim() == 0:
        return softmax(input.reshape(1), 0).reshape(())
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"tilekit.softmax: dim {dim} out of range for a {input.dim()}-D input")
    dim %= input.dim()
    last = input.dim() - 1
    if dim == last:
        return _library.ops().softmax_fwd(input)
    return _library.ops().softmax_fwd(input.transpose(dim, last)).transpose(dim, last)


def _softmax_fwd_fake(x):
    return x.new_empty(x.shape)


def _softmax_bwd_fake(dy, y):
    return y.new_empty(y.shape)


def _softmax_setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad_y):
    (y,) = ctx.saved_tensors
    return _library.ops().softmax_bwd(grad_y, y)


@_library.on_load
def _register():
    torch.library.register_fake("tilekit::softmax_fwd")(_softmax_fwd_fake)
    torch.library.register_fake("tilekit::softmax_bwd")(_softmax_bwd_fake)
    torch.library.register_autograd("tilekit::softmax_fwd", _softmax_backward, setup_context=_softmax_setup_context)
