"""tilekit: Hopper (sm_90a) kernels as PyTorch operators.

Functions with signatures close to torch.nn.functional's, differentiable, on the current CUDA
stream, never synchronizing (CUDA-graph capturable) and traceable by torch.compile:

    tilekit.rms_norm(input, normalized_shape, weight=None, eps=None, residual=None)
    tilekit.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, residual=None)
    tilekit.softmax(input, dim=-1, dtype=None)
    tilekit.cross_entropy(input, target, ignore_index=-100, reduction="mean",
                          label_smoothing=0.0, z_loss=0.0)
    tilekit.cross_entropy_forward_backward(...)  -> (loss, dinput) from one read of the logits

The raw operators are torch.ops.tilekit.* (documented in each family module). Inputs: CUDA
tensors in bfloat16, float16 or float32 (float32 arithmetic); the reduced dimension is the
last one and rows may be strided (slices of wider tensors are not copied).

Layout: one module per kernel family (norms, softmax, cross_entropy; attention later), each
holding its public functions, fake implementations and autograd formulas; _library is the
single place that loads the compiled extension tilekit._C.
"""

from ._library import is_available, load_error, ops
from .cross_entropy import cross_entropy, cross_entropy_forward_backward
from .norms import layer_norm, rms_norm
from .softmax import softmax

__all__ = [
    "is_available",
    "load_error",
    "ops",
    "rms_norm",
    "layer_norm",
    "softmax",
    "cross_entropy",
    "cross_entropy_forward_backward",
]
__version__ = "0.1.0"
