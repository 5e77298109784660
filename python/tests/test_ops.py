"""tilekit's PyTorch operators against float64 PyTorch references (forward and autograd).

Every reference is computed by upcasting the very same inputs to float64, so the only error
left is the kernels' own: float32 arithmetic plus one rounding of each output to its dtype.
Inputs are random; row widths cover one column, odd widths, exact powers of two, widths just
past a size class (4097, 65543) and the widest row (262144); rows include 1; inputs come in
three layouts (LAYOUTS: contiguous, strided slices of a wider tensor, misaligned slices).

Set TILEKIT_REQUIRE_EXTENSION=1 to turn the "not built / no GPU" skips into failures
(python/run_gpu_checks.sh does).
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402


def _unavailable(reason: str):
    if os.environ.get("TILEKIT_REQUIRE_EXTENSION") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


if not torch.cuda.is_available():
    _unavailable("no CUDA device")
import tilekit  # noqa: E402

if not tilekit.is_available():
    _unavailable(f"tilekit._C is not built or does not load: {tilekit.load_error()}")
if torch.cuda.get_device_capability() != (9, 0):
    _unavailable(f"the kernels are sm_90a-only, this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")

ops = tilekit.ops()
DEVICE = "cuda"

# Relative error budget by output dtype, as a fraction of the largest reference magnitude.
# One rounding to the output dtype costs half an ulp (bf16 2^-9 relative to the value's
# binade, i.e. <= 2^-8 = 3.9e-3; fp16 4.9e-4; fp32 6e-8); the float32 reductions (sums over up
# to 262144 elements, tree-ordered) add a few fp32 ulps, and gradients add one more rounding
# of intermediate inputs. ~4-5 output ulps leaves room for that while still catching any
# indexing or formula error (those show up as O(1) relative errors).
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}

# (cols, rows) pairs: widths around every size class of the kernels, including M = 1.
SHAPES = [(1, 3), (7, 1), (100, 4), (1000, 5), (1024, 3), (4097, 2), (8192, 2), (65543, 2), (262144, 1)]
SHAPE_IDS = [f"N{c}xM{r}" for c, r in SHAPES]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
DTYPE_IDS = ["bf16", "fp16", "fp32"]


@pytest.fixture(autouse=True)
def _poisoned_allocator():
    """Best effort output poisoning: outputs come from PyTorch's caching allocator, so fill the
    blocks it will hand out next with 0xFF bytes (NaN in bf16, fp16 and fp32) before each
    test. An element a kernel forgets to write then reads back as NaN and fails the comparison."""
    torch.manual_seed(0)
    blocks = [torch.full((n,), 0xFF, dtype=torch.uint8, device=DEVICE) for n in (64 << 20, *(256 << 10,) * 8)]
    del blocks
    yield


# Row layouts of the inputs: contiguous; "strided": a slice of a wider buffer whose rows start
# 16-byte aligned when the row stride allows (the vectorized path); "misaligned": a slice
# starting 3 elements in (rows not 16-byte aligned: the kernels' scalar fallback).
LAYOUTS = ["contiguous", "strided", "misaligned"]
_PADDING = {"strided": (16, 16), "misaligned": (3, 5)}  # elements before / after each row


def rand(shape, dtype, layout="contiguous", scale=1.0, shift=0.0, requires_grad=False):
    """Random normal values (times scale, plus shift) in `dtype`, in one of LAYOUTS."""
    shape = tuple(shape)
    if layout == "contiguous":
        t = (torch.randn(shape, device=DEVICE) * scale + shift).to(dtype)
    else:
        front, back = _PADDING[layout]
        wide = torch.randn((*shape[:-1], front + shape[-1] + back), device=DEVICE) * scale + shift
        t = wide.to(dtype)[..., front : front + shape[-1]]
        assert t.stride(-1) == 1 and (t.dim() == 1 or t.stride(-2) != shape[-1])
    return t.detach().requires_grad_(requires_grad)


def leaf64(t: torch.Tensor) -> torch.Tensor:
    """The same values as a float64 leaf tensor that records gradients."""
    return t.detach().double().requires_grad_(True)


# Absolute floor of every comparison: the kernels compute in fp32 on O(1) quantities, so a
# result that is exactly 0 in float64 (e.g. every gradient of a one-class cross-entropy) may
# come out as a few fp32 ulps of 1 (1 - 0.9 - 0.1 != 0 in fp32).
ABSOLUTE_FLOOR = 1e-7


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str, atol=None, scale=None):
    """Elementwise |actual - expected| <= tol |expected| + atol and normwise
    ||actual - expected||_2 <= tol ||expected||_2 (+ slack), with tol the budget of the output dtype.

    `scale` is the magnitude of the terms the result is computed from when that exceeds the
    result itself (a gradient formed by cancellation): errors are then relative to it, per
    element (atol = tol * scale) and normwise (slack tol * scale * sqrt(numel)). By default
    atol = tol * max|expected| and there is no normwise slack. ABSOLUTE_FLOOR applies always."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    tol = TOLERANCE[dtype]
    a, e = actual.detach().double(), expected.detach().double()
    count = max(e.numel(), 1)
    largest = float(e.abs().max()) if e.numel() else 0.0
    if atol is None:
        atol = tol * (largest if scale is None else max(scale, largest))
    atol = max(atol, ABSOLUTE_FLOOR)
    torch.testing.assert_close(a, e, rtol=tol, atol=atol, msg=lambda m: f"{what}: {m}")
    error, norm = float(torch.linalg.vector_norm(a - e)), float(torch.linalg.vector_norm(e))
    slack = 0.0 if scale is None else tol * scale * math.sqrt(count)
    bound = tol * norm + slack + ABSOLUTE_FLOOR * math.sqrt(count)
    assert error <= bound, f"{what}: normwise error {error:.3g} > {bound:.3g} (||expected|| = {norm:.3g})"


def norm_gradient_scale(x64: torch.Tensor, w64: torch.Tensor, dy: torch.Tensor, centered: bool) -> float:
    """max |rstd * w * dy|: the size of the terms dx of RMSNorm / LayerNorm is formed from.
    dx itself can be orders of magnitude smaller (one column: dx ~ eps for RMSNorm, 0 for
    LayerNorm) after cancellation that no float32 kernel can resolve exactly."""
    x64 = x64.detach()
    centered_x = x64 - x64.mean(-1, keepdim=True) if centered else x64
    eps = 1e-5 if centered else 0.0
    rstd = torch.rsqrt(centered_x.pow(2).mean(-1, keepdim=True) + eps)
    return float((rstd * w64.detach() * dy.double()).abs().max())


def without_label_columns(dlogits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """dlogits with each row's label entry (about -1, which dominates every max and norm) set
    to 0, so the comparison also sees the small softmax entries."""
    return dlogits.detach().double().scatter(-1, labels.clamp(min=0).unsqueeze(-1), 0.0)


# ------------------------------------------------------------------------------------------
# RMSNorm
# ------------------------------------------------------------------------------------------


def rms_norm_reference(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cols,rows", SHAPES, ids=SHAPE_IDS)
def test_rms_norm(cols, rows, dtype, layout):
    eps = 1e-6
    x = rand((rows, cols), dtype, layout, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).to(dtype).requires_grad_(True)
    y = tilekit.rms_norm(x, (cols,), w, eps)
    assert y.dtype == dtype and y.shape == x.shape
    dy = rand((rows, cols), dtype)
    y.backward(dy)

    x64, w64 = leaf64(x), leaf64(w)
    y64 = rms_norm_reference(x64, w64, eps)
    y64.backward(dy.double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "dx", scale=norm_gradient_scale(x64, w64, dy, centered=False))
    assert_close(w.grad, w64.grad, dtype, "dweight")


@pytest.mark.parametrize("cols", [7, 4097])
def test_rms_norm_fp32_weight_and_default_eps(cols):
    """bf16 activations with a float32 weight (kept in float32, gradient in float32)."""
    dtype = torch.bfloat16
    x = rand((3, cols), dtype, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).requires_grad_(True)
    y = tilekit.rms_norm(x, [cols], w)  # eps None: torch.finfo(bf16).eps, as F.rms_norm
    assert y.dtype == dtype
    dy = rand((3, cols), dtype)
    y.backward(dy)
    assert w.grad.dtype == torch.float32

    x64, w64 = leaf64(x), leaf64(w)
    y64 = rms_norm_reference(x64, w64, torch.finfo(dtype).eps)
    y64.backward(dy.double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "dx")
    assert_close(w.grad, w64.grad, dtype, "dweight")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("cols", [7, 1000, 4097])
def test_rms_norm_residual(cols, dtype):
    """Fused residual add on a 3-D strided input: (y, h = x + r); gradients reach x and r
    through both y and h (h feeds the next block of a residual stream)."""
    eps = 1e-5
    shape = (2, 3, cols)
    x = rand(shape, dtype, "misaligned", requires_grad=True)
    r = rand(shape, dtype, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).to(dtype).requires_grad_(True)
    y, h = tilekit.rms_norm(x, cols, w, eps, residual=r)
    # h is x + r rounded once to the dtype, exactly what PyTorch's own add produces.
    torch.testing.assert_close(h, x.detach() + r.detach(), rtol=0, atol=0)
    dy, dh = rand(shape, dtype), rand(shape, dtype)
    torch.autograd.backward([y, h], [dy, dh])

    # Reference as a function of the rounded h (what the kernel normalizes): d/dx = d/dr = d/dh.
    h64, w64 = leaf64(h), leaf64(w)
    y64 = rms_norm_reference(h64, w64, eps)
    torch.autograd.backward([y64, h64], [dy.double(), dh.double()])
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, h64.grad, dtype, "dx")
    assert_close(r.grad, h64.grad, dtype, "dresidual")
    assert_close(w.grad, w64.grad, dtype, "dweight")


def test_rms_norm_multidim_normalized_shape():
    """normalized_shape over two trailing dimensions: merged into one row of 4 * 250."""
    dtype = torch.float32
    x = rand((3, 4, 250), dtype, requires_grad=True)
    w = rand((4, 250), dtype, requires_grad=True)
    y = tilekit.rms_norm(x, (4, 250), w, 1e-6)
    dy = rand(y.shape, dtype)
    y.backward(dy)
    x64, w64 = leaf64(x), leaf64(w)
    y64 = F.rms_norm(x64, (4, 250), w64, 1e-6)
    y64.backward(dy.double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "dx")
    assert_close(w.grad, w64.grad, dtype, "dweight")


# ------------------------------------------------------------------------------------------
# LayerNorm
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cols,rows", SHAPES, ids=SHAPE_IDS)
def test_layer_norm(cols, rows, dtype, layout):
    eps = 1e-5
    # A mean far from zero checks the two-pass variance (a one-pass sum of squares would lose it).
    x = rand((rows, cols), dtype, layout, scale=2.0, shift=4.0, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).to(dtype).requires_grad_(True)
    b = rand((cols,), dtype, requires_grad=True)
    y = tilekit.layer_norm(x, (cols,), w, b, eps)
    dy = rand((rows, cols), dtype)
    y.backward(dy)

    x64, w64, b64 = leaf64(x), leaf64(w), leaf64(b)
    y64 = F.layer_norm(x64, (cols,), w64, b64, eps)
    y64.backward(dy.double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "dx", scale=norm_gradient_scale(x64, w64, dy, centered=True))
    assert_close(w.grad, w64.grad, dtype, "dweight")
    assert_close(b.grad, b64.grad, dtype, "dbias")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("cols", [7, 4097])
def test_layer_norm_residual_no_bias(cols, dtype):
    """No bias, fp32 weight, fused residual; only the weight is trainable."""
    eps = 1e-5
    shape = (4, cols)
    x = rand(shape, dtype, "misaligned", requires_grad=True)
    r = rand(shape, dtype, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).requires_grad_(True)
    y, h = tilekit.layer_norm(x, (cols,), w, None, eps, residual=r)
    torch.testing.assert_close(h, x.detach() + r.detach(), rtol=0, atol=0)
    dy, dh = rand(shape, dtype), rand(shape, dtype)
    torch.autograd.backward([y, h], [dy, dh])

    h64, w64 = leaf64(h), leaf64(w)
    y64 = F.layer_norm(h64, (cols,), w64, None, eps)
    torch.autograd.backward([y64, h64], [dy.double(), dh.double()])
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, h64.grad, dtype, "dx")
    assert_close(r.grad, h64.grad, dtype, "dresidual")
    assert_close(w.grad, w64.grad, dtype, "dweight")


def test_layer_norm_defaults_match_torch():
    """weight = bias = None and the default eps, against F.layer_norm on the same call."""
    x = rand((5, 3, 1000), torch.float32, requires_grad=True)
    y = tilekit.layer_norm(x, (1000,))
    dy = rand(y.shape, torch.float32)
    y.backward(dy)
    x64 = leaf64(x)
    y64 = F.layer_norm(x64, (1000,))
    y64.backward(dy.double())
    assert_close(y, y64, torch.float32, "y")
    assert_close(x.grad, x64.grad, torch.float32, "dx")


# ------------------------------------------------------------------------------------------
# Softmax
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cols,rows", SHAPES, ids=SHAPE_IDS)
def test_softmax(cols, rows, dtype, layout):
    x = rand((rows, cols), dtype, layout, scale=3.0, requires_grad=True)
    y = tilekit.softmax(x, -1)
    dy = rand((rows, cols), dtype)
    y.backward(dy)

    x64 = leaf64(x)
    y64 = torch.softmax(x64, -1)
    y64.backward(dy.double())
    # Probabilities span many orders of magnitude: relative per element (down to the dtype's
    # smallest normal number, below which fp16 itself is only absolutely accurate).
    assert_close(y, y64, dtype, "y", atol=torch.finfo(dtype).tiny)
    assert_close(x.grad, x64.grad, dtype, "dx")


def test_softmax_other_dim():
    """dim != -1 goes through a transpose; gradients flow back through it."""
    dtype = torch.float32
    x = rand((37, 4, 9), dtype, scale=3.0, requires_grad=True)
    y = tilekit.softmax(x, dim=0)
    dy = rand(y.shape, dtype)
    y.backward(dy)
    x64 = leaf64(x)
    y64 = torch.softmax(x64, 0)
    y64.backward(dy.double())
    assert_close(y, y64, dtype, "y")
    assert_close(x.grad, x64.grad, dtype, "dx")


# ------------------------------------------------------------------------------------------
# Cross-entropy
# ------------------------------------------------------------------------------------------

IGNORE_INDEX = -100


def make_labels(rows, vocab, ignore_every=3):
    labels = torch.randint(0, vocab, (rows,), device=DEVICE)
    if rows > 1:
        labels[::ignore_every] = IGNORE_INDEX  # some ignored rows (not all)
    return labels


def cross_entropy_reference(logits64, labels, reduction, label_smoothing, z_loss, ignore_index=IGNORE_INDEX):
    """F.cross_entropy in float64 plus the z-loss z * lse^2 on non-ignored rows."""
    per_row = F.cross_entropy(
        logits64, labels, ignore_index=ignore_index, reduction="none", label_smoothing=label_smoothing
    )
    valid = labels != ignore_index
    if z_loss:
        per_row = per_row + z_loss * torch.logsumexp(logits64, -1).pow(2) * valid
    if reduction == "none":
        return per_row
    if reduction == "sum":
        return per_row.sum()
    return per_row.sum() / valid.sum()


CE_OPTIONS = [("none", 0.0, 0.0), ("mean", 0.0, 0.0), ("sum", 0.1, 0.0), ("mean", 0.1, 1e-3), ("none", 0.0, 1e-2)]
CE_OPTION_IDS = [f"{r}-ls{ls}-z{z}" for r, ls, z in CE_OPTIONS]
CE_SHAPES = [(1, 4), (7, 5), (1000, 6), (4097, 3), (65543, 2), (262144, 1)]


@pytest.mark.parametrize("reduction,label_smoothing,z_loss", CE_OPTIONS, ids=CE_OPTION_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("vocab,rows", CE_SHAPES, ids=[f"V{v}xM{r}" for v, r in CE_SHAPES])
def test_cross_entropy(vocab, rows, dtype, reduction, label_smoothing, z_loss):
    logits = rand((rows, vocab), dtype, "strided" if vocab % 2 else "misaligned", scale=2.0, requires_grad=True)
    labels = make_labels(rows, vocab)
    loss = tilekit.cross_entropy(logits, labels, IGNORE_INDEX, reduction, label_smoothing, z_loss)
    assert loss.dtype == dtype
    grad = rand(loss.shape, torch.float32).to(dtype) if reduction == "none" else None
    loss.backward(grad)

    logits64 = leaf64(logits)
    loss64 = cross_entropy_reference(logits64, labels, reduction, label_smoothing, z_loss)
    loss64.backward(None if grad is None else grad.double())
    # Each row's loss is lse - x_label (plus smoothing terms): a difference of values of size
    # |lse| that cancels completely for V = 1, so its fp32 error scales with |lse|, summed over
    # the rows for reduction="sum".
    lse_scale = float(torch.logsumexp(logits64.detach(), dim=-1).abs().max())
    loss_scale = lse_scale * (rows if reduction == "sum" else 1)
    assert_close(loss, loss64, dtype, "loss", scale=loss_scale)
    assert_close(logits.grad, logits64.grad, dtype, "dlogits")
    assert_close(
        without_label_columns(logits.grad, labels),
        without_label_columns(logits64.grad, labels),
        dtype,
        "dlogits off the label",
    )


def test_cross_entropy_fp16_and_custom_ignore_index():
    dtype, vocab, rows = torch.float16, 5000, 6
    logits = rand((rows, vocab), dtype, scale=2.0, requires_grad=True)
    labels = torch.randint(0, vocab, (rows,), device=DEVICE)
    labels[1] = 17  # ignore_index=17 is a valid class id: that row must count as ignored
    loss = tilekit.cross_entropy(logits, labels, ignore_index=17, label_smoothing=0.05)
    loss.backward()
    logits64 = leaf64(logits)
    loss64 = cross_entropy_reference(logits64, labels, "mean", 0.05, 0.0, ignore_index=17)
    loss64.backward()
    assert_close(loss, loss64, dtype, "loss")
    assert_close(logits.grad, logits64.grad, dtype, "dlogits")
    assert float(logits.grad[1].abs().max()) == 0.0


def test_cross_entropy_class_dim_1():
    """PyTorch's [N, C, d] layout with target [N, d]."""
    dtype = torch.float32
    logits = rand((3, 11, 4), dtype, requires_grad=True)
    labels = torch.randint(0, 11, (3, 4), device=DEVICE)
    labels[0, 1] = IGNORE_INDEX
    loss = tilekit.cross_entropy(logits, labels, reduction="none")
    assert loss.shape == labels.shape
    dloss = rand(loss.shape, dtype)
    loss.backward(dloss)
    logits64 = leaf64(logits)
    loss64 = F.cross_entropy(logits64, labels, reduction="none")
    loss64.backward(dloss.double())
    assert_close(loss, loss64, dtype, "loss")
    assert_close(logits.grad, logits64.grad, dtype, "dlogits")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("vocab", [7, 4097, 65543])
def test_cross_entropy_forward_backward(vocab, reduction):
    """The fused forward's dlogits (one read of the logits) against autograd's."""
    dtype, rows = torch.bfloat16, 4
    logits = rand((rows, vocab), dtype, "strided", scale=2.0)
    labels = make_labels(rows, vocab)
    grad_output = rand((rows,) if reduction == "none" else (), torch.float32)
    loss, dlogits = tilekit.cross_entropy_forward_backward(
        logits, labels, IGNORE_INDEX, reduction, 0.1, 1e-3, grad_output=grad_output
    )
    assert dlogits.shape == logits.shape and dlogits.dtype == dtype

    logits64 = leaf64(logits)
    loss64 = cross_entropy_reference(logits64, labels, reduction, 0.1, 1e-3)
    loss64.backward(grad_output.double())
    assert_close(loss, loss64, dtype, "loss")
    assert_close(dlogits, logits64.grad, dtype, "dlogits")
    assert_close(
        without_label_columns(dlogits, labels), without_label_columns(logits64.grad, labels), dtype, "dlogits off the label"
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_cross_entropy_reduce(dtype):
    """cross_entropy_reduce against float64 sums, its gradient scale, and the cases PyTorch defines:
    a mean over no counted rows is NaN with zero gradients, a sum of no rows is 0."""
    rows = 300001  # several CTAs of the reduction's cluster
    loss = torch.rand(rows, device=DEVICE) * 12
    labels = torch.randint(0, 1000, (rows,), device=DEVICE)
    labels[::4] = IGNORE_INDEX
    loss[::4] = 0  # what the forward writes for ignored rows
    count = int((labels != IGNORE_INDEX).sum())
    total = loss.double().sum()
    for mean in (False, True):
        out, row_gradient = ops.cross_entropy_reduce(loss, labels, IGNORE_INDEX, mean, dtype)
        assert out.shape == () and out.dtype == dtype and row_gradient.dtype == torch.float32
        want = total / count if mean else total
        assert_close(out, want, dtype, "reduced loss")
        assert float(row_gradient) == (float(torch.tensor(1.0 / count, dtype=torch.float32)) if mean else 1.0)
        again, _ = ops.cross_entropy_reduce(loss, labels, IGNORE_INDEX, mean, dtype)
        assert torch.equal(again, out), "two runs differ"
    _, inverse_count = ops.cross_entropy_reduce(None, labels, IGNORE_INDEX, True, dtype)
    assert float(inverse_count) == float(torch.tensor(1.0 / count, dtype=torch.float32))

    # Every row ignored: NaN like F.cross_entropy, and zero gradients (also like PyTorch).
    logits = rand((5, 100), dtype, requires_grad=True)
    ignored = torch.full((5,), IGNORE_INDEX, device=DEVICE)
    got = tilekit.cross_entropy(logits, ignored)
    assert torch.isnan(got) and torch.isnan(F.cross_entropy(logits.detach().double(), ignored))
    got.backward()
    assert torch.count_nonzero(logits.grad) == 0
    empty_sum = tilekit.cross_entropy(rand((0, 100), dtype), torch.zeros(0, dtype=torch.long, device=DEVICE),
                                      reduction="sum")
    assert float(empty_sum) == 0.0


def test_cross_entropy_mean_launches():
    """reduction='mean' through autograd: the forward is the row kernel and one reduction launch,
    the backward a scale and the backward kernel (no per-row vector, no torch reductions)."""
    from torch.profiler import ProfilerActivity, profile

    logits = rand((64, 4097), torch.bfloat16, requires_grad=True)
    labels = make_labels(64, 4097)
    tilekit.cross_entropy(logits, labels).backward()  # warm-up (caching allocator, lazy loads)
    torch.cuda.synchronize()

    def kernels_of(fn):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]

    forward_kernels = kernels_of(lambda: tilekit.cross_entropy(logits, labels))
    assert len(forward_kernels) == 2, forward_kernels
    loss = tilekit.cross_entropy(logits, labels)
    logits.grad = None  # no accumulation kernel into the warm-up's gradient
    # backward(): the ones of the upstream gradient, grad * (1 / count) and the backward kernel;
    # no reduction over the rows, no zeros for the gradient scale's (unused) gradient.
    backward_kernels = kernels_of(lambda: loss.backward())
    assert len(backward_kernels) == 3, backward_kernels
    assert sum("tilekit" in name for name in backward_kernels) == 1, backward_kernels
    assert not any("reduce_kernel" in name for name in backward_kernels), backward_kernels


def test_cross_entropy_strided_upstream_gradients():
    """grad_per_row as an expanded scalar (stride 0) or a strided view (stride 2) reaches the kernels
    without a copy and gives the gradients of the same values made contiguous."""
    x = rand((9, 1000), torch.bfloat16)
    labels = make_labels(9, 1000)
    _, lse, _ = ops.cross_entropy_fwd(x, labels, IGNORE_INDEX, 0.1, 0.0, False, None, 1.0)
    scalar = torch.rand((), device=DEVICE) + 0.5
    every_other = torch.rand(18, device=DEVICE)[::2]
    for g in (scalar.expand(9), every_other):
        for fused in (False, True):
            if fused:
                got = ops.cross_entropy_fwd(x, labels, IGNORE_INDEX, 0.1, 0.0, True, g, 0.5)[2]
                want = ops.cross_entropy_fwd(x, labels, IGNORE_INDEX, 0.1, 0.0, True, g.contiguous(), 0.5)[2]
            else:
                got = ops.cross_entropy_bwd(x, labels, lse, g, 0.5, IGNORE_INDEX, 0.1, 0.0)
                want = ops.cross_entropy_bwd(x, labels, lse, g.contiguous(), 0.5, IGNORE_INDEX, 0.1, 0.0)
            assert torch.equal(got, want)


# ------------------------------------------------------------------------------------------
# torch.compile, fake implementations, CUDA graphs, errors
# ------------------------------------------------------------------------------------------


def _norm_problem(dtype=torch.bfloat16, rows=8, cols=4097):
    x = rand((rows, cols), dtype, requires_grad=True)
    w = (1 + 0.5 * rand((cols,), torch.float32)).to(dtype).requires_grad_(True)
    b = rand((cols,), dtype, requires_grad=True)
    return x, w, b


def _compile_case(name):
    """(function of tensors returning a scalar loss, its tensor inputs that need gradients)."""
    x, w, b = _norm_problem()
    cols = x.shape[-1]
    if name == "rms_norm":
        r = rand(x.shape, x.dtype, requires_grad=True)

        def fn(x, w, r):
            y, h = tilekit.rms_norm(x, (cols,), w, 1e-6, residual=r)
            return (y.float() * torch.arange(cols, device=DEVICE)).mean() + h.float().square().mean()

        return fn, (x, w, r)
    if name == "layer_norm":

        def fn(x, w, b):
            return tilekit.layer_norm(x, (cols,), w, b).float().square().mean()

        return fn, (x, w, b)
    if name == "softmax":

        def fn(x):
            return (tilekit.softmax(x).float() * torch.linspace(-1, 1, cols, device=DEVICE)).sum()

        return fn, (x,)
    labels = make_labels(x.shape[0], cols)

    def fn(x):
        return tilekit.cross_entropy(x, labels, label_smoothing=0.1, z_loss=1e-4).float()

    return fn, (x,)


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm", "softmax", "cross_entropy"])
def test_torch_compile_fullgraph(name):
    """Traces through the fake implementations and the autograd formulas (no graph breaks)."""
    torch._dynamo.reset()
    fn, inputs = _compile_case(name)
    eager_loss = fn(*inputs)
    eager_grads = torch.autograd.grad(eager_loss, inputs)
    compiled = torch.compile(fn, fullgraph=True, dynamic=False)
    loss = compiled(*inputs)
    grads = torch.autograd.grad(loss, inputs)
    assert_close(loss, eager_loss, torch.bfloat16, "loss")
    for i, (g, e) in enumerate(zip(grads, eager_grads)):
        assert_close(g, e, torch.bfloat16, f"grad {i}")


def _opcheck_cases():
    x, w, b = (t.detach() for t in _norm_problem(torch.bfloat16, rows=6, cols=1000))
    xs = rand((2, 3, 1000), torch.bfloat16, "strided")
    dy = rand(x.shape, x.dtype)
    rstd = torch.rand(x.shape[:-1], device=DEVICE) + 0.5
    mean = torch.randn(x.shape[:-1], device=DEVICE)
    labels = make_labels(x.shape[0], x.shape[1])
    lse = torch.logsumexp(x.float(), -1)
    grad_rows = torch.rand(x.shape[0], device=DEVICE)
    return {
        "rms_norm_fwd": (ops.rms_norm_fwd.default, (xs, w, rand(xs.shape, xs.dtype), 1e-6)),
        "rms_norm_bwd": (ops.rms_norm_bwd.default, (dy, x, w, rstd, rand(x.shape, x.dtype), True)),
        "layer_norm_fwd": (ops.layer_norm_fwd.default, (x, w, b, None, 1e-5)),
        "layer_norm_bwd": (ops.layer_norm_bwd.default, (dy, x, w, mean, rstd, None, True, False)),
        "softmax_fwd": (ops.softmax_fwd.default, (xs,)),
        "softmax_bwd": (ops.softmax_bwd.default, (dy, x)),
        "cross_entropy_fwd": (ops.cross_entropy_fwd.default, (x, labels, IGNORE_INDEX, 0.1, 1e-3, True, grad_rows, 0.5)),
        "cross_entropy_bwd": (ops.cross_entropy_bwd.default, (x, labels, lse, None, 2.0, IGNORE_INDEX, 0.0, 0.0)),
        "cross_entropy_reduce": (ops.cross_entropy_reduce.default, (lse, labels, IGNORE_INDEX, True, torch.bfloat16)),
        "cross_entropy_reduce_count": (ops.cross_entropy_reduce.default, (None, labels, IGNORE_INDEX, True, x.dtype)),
    }


OPERATORS = [
    "rms_norm_fwd",
    "rms_norm_bwd",
    "layer_norm_fwd",
    "layer_norm_bwd",
    "softmax_fwd",
    "softmax_bwd",
    "cross_entropy_fwd",
    "cross_entropy_bwd",
    "cross_entropy_reduce",
    "cross_entropy_reduce_count",
]


@pytest.mark.parametrize("name", OPERATORS)
def test_opcheck(name):
    """Schema (no hidden mutation or aliasing) and fake implementation (shapes, strides, dtypes
    identical to the CUDA implementation's) of every operator."""
    op, args = _opcheck_cases()[name]
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


def test_cuda_graph_capture():
    """Every operator captured in one CUDA graph (no synchronization, no allocation outside the
    caching allocator, all work on the capturing stream), then replayed on new inputs."""
    dtype, rows, cols = torch.bfloat16, 16, 4097
    x = rand((rows, cols), dtype)
    dy = rand((rows, cols), dtype)
    w = (1 + 0.5 * rand((cols,), torch.float32)).to(dtype)
    b = rand((cols,), dtype)
    labels = make_labels(rows, cols)

    def step():
        y, _, rstd = ops.rms_norm_fwd(x, w, None, 1e-6)
        dx, dw = ops.rms_norm_bwd(dy, x, w, rstd, None, True)
        ln, _, mean, lrstd = ops.layer_norm_fwd(x, w, b, None, 1e-5)
        ldx, ldw, ldb = ops.layer_norm_bwd(dy, x, w, mean, lrstd, dy, True, True)
        s = tilekit.softmax(x)
        ds = ops.softmax_bwd(dy, s)
        loss, lse, _ = ops.cross_entropy_fwd(x, labels, IGNORE_INDEX, 0.1, 1e-3, False, None, 1.0)
        dlogits = ops.cross_entropy_bwd(x, labels, lse, None, 1.0, IGNORE_INDEX, 0.1, 1e-3)
        mean_loss, fused_dlogits = tilekit.cross_entropy_forward_backward(x, labels)
        return [y, dx, dw, ln, ldx, ldw, ldb, s, ds, loss, dlogits, mean_loss, fused_dlogits]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()

    x.copy_(rand((rows, cols), dtype))
    dy.copy_(rand((rows, cols), dtype))
    graph.replay()
    torch.cuda.synchronize()
    expected = step()
    for i, (got, want) in enumerate(zip(captured, expected)):
        assert_close(got, want, dtype, f"output {i} of the replayed graph")


def test_errors():
    """Clear errors naming the argument. The bindings raise c10::ValueError / TypeError (Python
    ValueError / TypeError); RuntimeError is accepted too, the message is what matters."""
    x = rand((4, 64), torch.bfloat16)
    with pytest.raises(RuntimeError, match="CUDA"):
        tilekit.rms_norm(x.cpu(), (64,))
    with pytest.raises((ValueError, RuntimeError), match="eps"):
        tilekit.rms_norm(x, (64,), eps=0.0)
    with pytest.raises((TypeError, RuntimeError), match="bfloat16, float16 or float32"):
        tilekit.softmax(x.double())
    with pytest.raises((ValueError, RuntimeError), match="cols"):
        tilekit.layer_norm(rand((1, (1 << 18) + 1), torch.bfloat16), ((1 << 18) + 1,))
    with pytest.raises(ValueError, match="normalized_shape"):
        tilekit.rms_norm(x, (32,))
    with pytest.raises(IndexError):
        tilekit.softmax(x, dim=2)
    with pytest.raises(ValueError, match="reduction"):
        tilekit.cross_entropy(x, make_labels(4, 64), reduction="avg")
    with pytest.raises((ValueError, RuntimeError), match="label_smoothing"):
        tilekit.cross_entropy(x, make_labels(4, 64), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="labels"):
        ops.cross_entropy_fwd(x, make_labels(3, 64), IGNORE_INDEX, 0.0, 0.0, False, None, 1.0)
