"""RMSNorm and LayerNorm over the trailing dimensions (torch.ops.tilekit.{rms,layer}_norm_{fwd,bwd}).

Operators (python/csrc/bindings.cpp; x is seen as [rows, cols], cols = its last dimension):

  rms_norm_fwd(x, weight, residual?, eps)                 -> (y, h, rstd)
  rms_norm_bwd(dy, x, weight, rstd, dresidual_out?, compute_dweight)        -> (dx, dweight)
  layer_norm_fwd(x, weight, bias?, residual?, eps)        -> (y, h, mean, rstd)
  layer_norm_bwd(dy, x, weight, mean, rstd, dresidual_out?, compute_dweight, compute_dbias)
                                                          -> (dx, dweight, dbias)

With a residual, h = x + residual (rounded to x's dtype) is normalized and returned; without
one, h is an empty placeholder. rstd / mean are float32 with x's leading shape. The backward
takes the normalized input (h when fused); its dx is also the residual's gradient, and the
gradient arriving at h from elsewhere is passed as dresidual_out and added into dx. Outputs
not requested are empty [0] tensors. y, h, dx have x's dtype; dweight / dbias the weight's
(x's dtype or float32). dweight / dbias are reduced over rows deterministically.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from . import _library

__all__ = ["rms_norm", "layer_norm"]


def _normalized_dims(input: torch.Tensor, normalized_shape: int | Sequence[int], fn: str) -> tuple[int, ...]:
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if not shape or input.dim() < len(shape) or tuple(input.shape[-len(shape):]) != shape:
        raise ValueError(
            f"tilekit.{fn}: normalized_shape {list(shape)} must be a non-empty suffix of the input's shape "
            f"{list(input.shape)}"
        )
    return shape


def _rows_view(t: torch.Tensor, normalized: tuple[int, ...]) -> torch.Tensor:
    """The kernels normalize the last dimension: merge the normalized dimensions into one."""
    return t if len(normalized) == 1 else t.flatten(-len(normalized))


def _column_parameter(p: torch.Tensor | None, normalized: tuple[int, ...], dtype: torch.dtype, fn: str, name: str):
    """A weight / bias of the normalized shape as a 1-D tensor of the kernel's weight dtype
    (the input's dtype or float32; other dtypes are cast, differentiably)."""
    if p is None:
        return None
    if tuple(p.shape) != normalized:
        raise ValueError(f"tilekit.{fn}: {name} must have shape {list(normalized)}, got {list(p.shape)}")
    p = p.reshape(math.prod(normalized))
    return p if p.dtype in (dtype, torch.float32) else p.to(dtype)


def _residual_view(residual, input, normalized, fn):
    if residual is None:
        return None
    if residual.shape != input.shape or residual.dtype != input.dtype:
        raise ValueError(
            f"tilekit.{fn}: residual must have the input's shape {list(input.shape)} and dtype {input.dtype}, "
            f"got {list(residual.shape)} {residual.dtype}"
        )
    return _rows_view(residual, normalized)


def rms_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
    residual: torch.Tensor | None = None,
):
    """RMSNorm like torch.nn.functional.rms_norm: y = input / sqrt(mean(input^2) + eps) * weight.

    weight None means ones; eps None means torch.finfo(input.dtype).eps (as in PyTorch). With
    `residual`, h = input + residual is computed in the same pass, normalized, and (y, h) is
    returned (the pre-norm transformer block's residual stream). y has the input's dtype even
    when weight is float32 (PyTorch would promote to float32). Differentiable in input, weight
    and residual.
    """
    normalized = _normalized_dims(input, normalized_shape, "rms_norm")
    x = _rows_view(input, normalized)
    w = _column_parameter(weight, normalized, input.dtype, "rms_norm", "weight")
    if w is None:
        w = torch.ones(x.shape[-1], dtype=input.dtype, device=input.device)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    r = _residual_view(residual, input, normalized, "rms_norm")
    y, h, _ = _library.ops().rms_norm_fwd(x, w, r, float(eps))
    y = y.view(input.shape)
    return y if residual is None else (y, h.view(input.shape))


def layer_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    residual: torch.Tensor | None = None,
):
    """LayerNorm like torch.nn.functional.layer_norm: y = (input - mean) / sqrt(var + eps) * weight + bias.

    weight None means ones, bias None means zeros. With `residual`, (y, h = input + residual)
    is returned as in rms_norm. y has the input's dtype. Differentiable in input, weight, bias
    and residual.
    """
    normalized = _normalized_dims(input, normalized_shape, "layer_norm")
    x = _rows_view(input, normalized)
    w = _column_parameter(weight, normalized, input.dtype, "layer_norm", "weight")
    b = _column_parameter(bias, normalized, input.dtype, "layer_norm", "bias")
    if w is None:
        w = torch.ones(x.shape[-1], dtype=b.dtype if b is not None else input.dtype, device=input.device)
    if b is not None and b.dtype != w.dtype:  # the kernels take one parameter dtype
        b = b.to(w.dtype)
    r = _residual_view(residual, input, normalized, "layer_norm")
    y, h, _, _ = _library.ops().layer_norm_fwd(x, w, b, r, float(eps))
    y = y.view(input.shape)
    return y if residual is None else (y, h.view(input.shape))


# ------------------------------------------------------------------------------------------
# Fake implementations (shapes only, for torch.compile / meta tensors) and autograd formulas.
# They mirror bindings.cpp exactly: contiguous outputs of the input's shape, statistics of the
# leading shape in float32, empty [0] placeholders for outputs not requested.
# ------------------------------------------------------------------------------------------


def _placeholder(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty((0,))


def _row_stats(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1], dtype=torch.float32)


def _rms_norm_fwd_fake(x, weight, residual, eps):
    h = x.new_empty(x.shape) if residual is not None else _placeholder(x)
    return x.new_empty(x.shape), h, _row_stats(x)


def _rms_norm_bwd_fake(dy, x, weight, rstd, dresidual_out, compute_dweight):
    dweight = weight.new_empty(weight.shape) if compute_dweight else _placeholder(weight)
    return x.new_empty(x.shape), dweight


def _layer_norm_fwd_fake(x, weight, bias, residual, eps):
    h = x.new_empty(x.shape) if residual is not None else _placeholder(x)
    return x.new_empty(x.shape), h, _row_stats(x), _row_stats(x)


def _layer_norm_bwd_fake(dy, x, weight, mean, rstd, dresidual_out, compute_dweight, compute_dbias):
    dweight = weight.new_empty(weight.shape) if compute_dweight else _placeholder(weight)
    dbias = weight.new_empty(weight.shape) if compute_dbias else _placeholder(weight)
    return x.new_empty(x.shape), dweight, dbias


def _rms_norm_setup_context(ctx, inputs, output):
    x, weight, residual, _eps = inputs
    _y, h, rstd = output
    ctx.has_residual = residual is not None
    # Gradients of unused outputs arrive as None instead of zero tensors (no wasted passes).
    ctx.set_materialize_grads(False)
    if ctx.has_residual:
        ctx.mark_non_differentiable(rstd)
    else:
        ctx.mark_non_differentiable(h, rstd)
    ctx.save_for_backward(h if ctx.has_residual else x, weight, rstd)


def _rms_norm_backward(ctx, grad_y, grad_h, _grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    need_x, need_weight, need_residual = ctx.needs_input_grad[:3]
    dresidual_out = grad_h if ctx.has_residual else None
    if grad_y is None:  # only h was used: it passes its gradient straight to x and residual
        dx, dweight = dresidual_out, None
    else:
        dx, dweight = _library.ops().rms_norm_bwd(grad_y, x, weight, rstd, dresidual_out, need_weight)
    return (
        dx if need_x else None,
        dweight if need_weight else None,
        dx if ctx.has_residual and need_residual else None,
        None,
    )


def _layer_norm_setup_context(ctx, inputs, output):
    x, weight, bias, residual, _eps = inputs
    _y, h, mean, rstd = output
    ctx.has_residual = residual is not None
    ctx.has_bias = bias is not None
    ctx.set_materialize_grads(False)
    if ctx.has_residual:
        ctx.mark_non_differentiable(mean, rstd)
    else:
        ctx.mark_non_differentiable(h, mean, rstd)
    ctx.save_for_backward(h if ctx.has_residual else x, weight, mean, rstd)


def _layer_norm_backward(ctx, grad_y, grad_h, _grad_mean, _grad_rstd):
    x, weight, mean, rstd = ctx.saved_tensors
    need_x, need_weight, need_bias, need_residual = ctx.needs_input_grad[:4]
    need_bias = need_bias and ctx.has_bias
    dresidual_out = grad_h if ctx.has_residual else None
    if grad_y is None:
        dx, dweight, dbias = dresidual_out, None, None
    else:
        dx, dweight, dbias = _library.ops().layer_norm_bwd(
            grad_y, x, weight, mean, rstd, dresidual_out, need_weight, need_bias
        )
    return (
        dx if need_x else None,
        dweight if need_weight else None,
        dbias if need_bias else None,
        dx if ctx.has_residual and need_residual else None,
        None,
    )


@_library.on_load
def _register():
    torch.library.register_fake("tilekit::rms_norm_fwd")(_rms_norm_fwd_fake)
    torch.library.register_fake("tilekit::rms_norm_bwd")(_rms_norm_bwd_fake)
    torch.library.register_fake("tilekit::layer_norm_fwd")(_layer_norm_fwd_fake)
    torch.library.register_fake("tilekit::layer_norm_bwd")(_layer_norm_bwd_fake)
    torch.library.register_autograd(
        "tilekit::rms_norm_fwd", _rms_norm_backward, setup_context=_rms_norm_setup_context
    )
    torch.library.register_autograd(
        "tilekit::layer_norm_fwd", _layer_norm_backward, setup_context=_layer_norm_setup_context
    )
