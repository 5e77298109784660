"""The one place that loads the compiled extension `tilekit._C`.

Importing `tilekit._C` runs its TORCH_LIBRARY registrations, which create the operators
torch.ops.tilekit.* (CUDA implementations, python/csrc/bindings.cpp). Every family module
(norms.py, softmax.py, cross_entropy.py, later attention) gets the operators through `ops()`
and registers its fake implementations and autograd formulas through `on_load`, so
`import tilekit` also works where the extension is not built (a CPU-only machine, docs):
the public functions then raise a clear error when called.
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch / libc10, which the extension links against)

try:
    from . import _C  # noqa: F401
except ImportError as error:  # not built, or built against another torch
    _load_error: ImportError | None = error
else:
    _load_error = None

BUILD_HINT = (
    "build it with `cd python && python3 setup.py build_ext --inplace` "
    "(optionally with TILEKIT_KERNELS_LIB=<build>/kernels/libtilekit_kernels.a), see python/README.md"
)


def is_available() -> bool:
    """True when the compiled operators are loaded."""
    return _load_error is None


def load_error() -> ImportError | None:
    """Why the extension could not be imported (None when it was)."""
    return _load_error


def ops():
    """The operator namespace torch.ops.tilekit; raises when the extension is not loaded."""
    if _load_error is not None:
        raise RuntimeError(f"tilekit._C could not be imported ({_load_error}); {BUILD_HINT}")
    return torch.ops.tilekit


def on_load(register):
    """Runs `register()` (fake impls, autograd) now if the operators exist; returns it unchanged."""
    if _load_error is None:
        register()
    return register
