"""Cross-entropy over class logits (torch.ops.tilekit.cross_entropy_{fwd,bwd}).

Operators (python/csrc/bindings.cpp), classes along the LAST dimension of logits [.., vocab],
int64 labels of the logits' leading shape:

  cross_entropy_fwd(logits, labels, ignore_index, label_smoothing, z_loss,
                    compute_dlogits, grad_per_row?, grad_scale)       -> (loss, lse, dlogits)
  cross_entropy_bwd(logits, labels, lse, grad_per_row?, grad_scale,
                    ignore_index, label_smoothing, z_loss)            -> dlogits
  cross_entropy_reduce(loss?, labels, ignore_index, mean, dtype)      -> (out, row_gradient)

Per row, with eps = label_smoothing and z = z_loss:
  loss = (1 - eps) (lse - logit[label]) + eps (lse - mean(logits)) + z lse^2, 0 for ignored rows.
loss and lse are float32 of the labels' shape. dlogits (the logits' dtype) is the gradient of
sum_r g_r loss_r with g_r = grad_scale * (grad_per_row[r] if given else 1); the forward writes
it only when compute_dlogits (else an empty [0] placeholder), from the same single read of the
logits. Labels outside [0, vocab) that are not ignore_index give NaN (checking them on the host
would need a device synchronization).

cross_entropy_reduce folds the per-row losses into reduction='sum' or 'mean' (over the
non-ignored rows) in one launch: out is a 0-d tensor of `dtype`, row_gradient the 0-d float32
d out / d loss[r] (1, or 1 / count), which reaches the kernels as grad_per_row expanded to the
rows (stride 0, never materialized). Without loss it computes row_gradient alone (a mean's
scale, needed before a fused forward).
"""

from __future__ import annotations

import torch

from . import _library

__all__ = ["cross_entropy", "cross_entropy_forward_backward"]

_REDUCTIONS = ("none", "sum", "mean")


def _rows_layout(input: torch.Tensor, target: torch.Tensor, reduction: str, fn: str):
    """(logits [.., C] with classes last, int64 labels [..]) in PyTorch's layouts: input [C] with
    a 0-d target, [N, C] with [N], or [N, C, d1, ...] with [N, d1, ...] (classes in dim 1)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"tilekit.{fn}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if target.is_floating_point():
        raise NotImplementedError(f"tilekit.{fn}: class-probability targets are not supported (give class indices)")
    if input.dim() == 0:
        raise ValueError(f"tilekit.{fn}: input must have a class dimension")
    if input.dim() == 1:
        logits, labels = input.unsqueeze(0), target.reshape(1) if target.dim() == 0 else target
    elif input.dim() == 2:
        logits, labels = input, target
    else:  # classes in dim 1, as in PyTorch; the kernels want them last (a copy)
        logits, labels = input.movedim(1, -1), target
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"tilekit.{fn}: target shape {list(target.shape)} does not match input shape {list(input.shape)}"
        )
    return logits, labels if labels.dtype == torch.int64 else labels.long()


def _reduce(loss: torch.Tensor, labels: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str,
            dtype: torch.dtype) -> torch.Tensor:
    """PyTorch's reductions of the per-row float32 losses; 'mean' divides by the number of
    non-ignored rows (NaN when there is none, as in PyTorch). The result has the input's dtype.
    'sum' and 'mean' are one launch (cross_entropy_reduce), differentiable in loss."""
    if reduction == "none":
        return loss.reshape(target.shape).to(dtype)
    out, _ = _library.ops().cross_entropy_reduce(loss, labels, int(ignore_index), reduction == "mean", dtype)
    return out


def cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
) -> torch.Tensor:
    """Cross-entropy like torch.nn.functional.cross_entropy (class-index targets, no class
    weights), plus an optional z-loss term z_loss * lse^2 per non-ignored row (lse = log-sum-exp
    of the row's logits). The loss has the input's dtype (computed in float32). Differentiable
    in input: the backward is one read of the logits and one write of dlogits.
    """
    logits, labels = _rows_layout(input, target, reduction, "cross_entropy")
    loss, _, _ = _library.ops().cross_entropy_fwd(
        logits, labels, int(ignore_index), float(label_smoothing), float(z_loss), False, None, 1.0
    )
    return _reduce(loss, labels, target, ignore_index, reduction, input.dtype)


@torch.no_grad()
def cross_entropy_forward_backward(
    input: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
    grad_output: torch.Tensor | None = None,
):
    """(loss, dinput) from ONE read of the logits, without autograd (a training step's last
    layer, where the loss's upstream gradient is known before the forward runs).

    loss is what cross_entropy(...) returns; dinput is the gradient of grad_output * loss with
    respect to input (grad_output None means 1; for reduction='none' it has the loss's shape).
    Nothing synchronizes: the 'mean' scale 1 / (non-ignored rows) stays on the device.
    """
    logits, labels = _rows_layout(input, target, reduction, "cross_entropy_forward_backward")
    rows = labels.numel()
    # The rows' upstream gradient: a scalar expanded to the rows (stride 0) unless it is per row.
    scale = None
    if reduction == "mean":  # 1 / (non-ignored rows), on the device, before the forward needs it
        _, scale = _library.ops().cross_entropy_reduce(None, labels, int(ignore_index), True, input.dtype)
    grad_per_row = scale.expand(rows) if scale is not None else None
    if grad_output is not None:
        g = grad_output.detach().float()
        if reduction == "none":
            if g.shape != target.shape:
                raise ValueError(
                    f"tilekit.cross_entropy_forward_backward: grad_output must have the loss's shape "
                    f"{list(target.shape)}, got {list(g.shape)}"
                )
            grad_per_row = g.reshape(rows)
        else:
            if g.numel() != 1:
                raise ValueError("tilekit.cross_entropy_forward_backward: grad_output of a reduced loss is a scalar")
            g = g.reshape(())
            grad_per_row = (g * scale if scale is not None else g).expand(rows)
    loss, _, dlogits = _library.ops().cross_entropy_fwd(
        logits, labels, int(ignore_index), float(label_smoothing), float(z_loss), True, grad_per_row, 1.0
    )
    if input.dim() == 1:
        dinput = dlogits.reshape(input.shape)
    elif input.dim() == 2:
        dinput = dlogits
    else:
        dinput = dlogits.movedim(-1, 1)
    return _reduce(loss, labels, target, ignore_index, reduction, input.dtype), dinput


def _cross_entropy_fwd_fake(logits, labels, ignore_index, label_smoothing, z_loss, compute_dlogits, grad_per_row,
                            grad_scale):
    per_row = logits.shape[:-1]
    loss = logits.new_empty(per_row, dtype=torch.float32)
    lse = logits.new_empty(per_row, dtype=torch.float32)
    dlogits = logits.new_empty(logits.shape) if compute_dlogits else logits.new_empty((0,))
    return loss, lse, dlogits


def _cross_entropy_bwd_fake(logits, labels, lse, grad_per_row, grad_scale, ignore_index, label_smoothing, z_loss):
    return logits.new_empty(logits.shape)


def _cross_entropy_reduce_fake(loss, labels, ignore_index, mean, dtype):
    out = labels.new_empty(() if loss is not None else (0,), dtype=dtype)
    return out, labels.new_empty((), dtype=torch.float32)


def _cross_entropy_reduce_setup_context(ctx, inputs, output):
    loss, _labels, _ignore_index, _mean, _dtype = inputs
    _out, row_gradient = output
    ctx.loss_shape = loss.shape if loss is not None else None
    ctx.set_materialize_grads(False)  # no zeros for row_gradient's (never used) gradient
    ctx.mark_non_differentiable(row_gradient)
    ctx.save_for_backward(row_gradient)


def _cross_entropy_reduce_backward(ctx, grad_out, _grad_row_gradient):
    (row_gradient,) = ctx.saved_tensors
    grad_loss = None
    if grad_out is not None and ctx.needs_input_grad[0]:
        # One float32 scalar (grad * 1 / count), broadcast to the rows as a stride-0 view: the
        # backward kernel reads it for every row, nothing of size rows is written.
        grad_loss = (grad_out * row_gradient).expand(ctx.loss_shape)
    return grad_loss, None, None, None, None


def _cross_entropy_setup_context(ctx, inputs, output):
    logits, labels, ignore_index, label_smoothing, z_loss, _compute_dlogits, _grad_per_row, _grad_scale = inputs
    _loss, lse, dlogits = output
    ctx.ignore_index = ignore_index
    ctx.label_smoothing = label_smoothing
    ctx.z_loss = z_loss
    ctx.set_materialize_grads(False)
    # Only the loss is differentiable (lse's gradient would need another term in the kernel).
    ctx.mark_non_differentiable(lse, dlogits)
    ctx.save_for_backward(logits, labels, lse)


def _cross_entropy_backward(ctx, grad_loss, _grad_lse, _grad_dlogits):
    logits, labels, lse = ctx.saved_tensors
    dlogits = None
    if grad_loss is not None and ctx.needs_input_grad[0]:
        dlogits = _library.ops().cross_entropy_bwd(
            logits, labels, lse, grad_loss.float(), 1.0, ctx.ignore_index, ctx.label_smoothing, ctx.z_loss
        )
    return dlogits, None, None, None, None, None, None, None


@_library.on_load
def _register():
    torch.library.register_fake("tilekit::cross_entropy_fwd")(_cross_entropy_fwd_fake)
    torch.library.register_fake("tilekit::cross_entropy_bwd")(_cross_entropy_bwd_fake)
    torch.library.register_fake("tilekit::cross_entropy_reduce")(_cross_entropy_reduce_fake)
    torch.library.register_autograd(
        "tilekit::cross_entropy_reduce", _cross_entropy_reduce_backward,
        setup_context=_cross_entropy_reduce_setup_context
    )
    torch.library.register_autograd(
        "tilekit::cross_entropy_fwd", _cross_entropy_backward, setup_context=_cross_entropy_setup_context
    )
