// PyTorch custom operators over tilekit's memory-bound kernels (the plain C++ host APIs in
// kernels/<family>/<family>.h). Built as the Python extension `tilekit._C` (python/setup.py);
// importing it runs the TORCH_LIBRARY registrations below, which create torch.ops.tilekit.*.
// Fake (meta) implementations and autograd formulas are registered in Python
// (python/tilekit/<family>.py), next to the public functions that use them.
//
// Conventions shared by every operator:
//   * The kernels work on [rows, cols] matrices whose last dimension is contiguous, with a row
//     stride in elements. A tensor of any rank is viewed as [prod(leading dims), last dim]
//     WITHOUT a copy whenever its leading dimensions collapse into one stride (slices of a wider
//     tensor, contiguous tensors); otherwise (last dimension not contiguous, overlapping rows,
//     non-collapsible leading dims) it is copied with .contiguous() first (as_rows below).
//   * Outputs are freshly allocated (at::empty), contiguous, with the shape of the input
//     (per-row statistics: the input's leading shape); the fake implementations in Python
//     mirror exactly these shapes. Outputs an operator was not asked for are empty tensors
//     of shape [0] (the schema returns a fixed number of tensors).
//   * Work is enqueued on the current CUDA stream of the input's device; nothing synchronizes
//     and nothing allocates outside PyTorch's caching allocator, so every operator can be
//     captured in a CUDA graph. Scratch memory (the norm backward's dweight/dbias partials)
//     comes from at::empty on the same stream.
//   * tilekit::invalid_argument becomes a c10::ValueError (Python ValueError) and any other
//     tilekit::error (a CUDA launch error) a c10::Error (Python RuntimeError), both carrying
//     the kernel library's message, which names the offending argument.

#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>

#include "cross_entropy/cross_entropy.h"
#include "norms/norms.h"
#include "softmax/softmax.h"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"

namespace {

namespace tk = tilekit::kernels;
using tensor_pair = std::tuple<at::Tensor, at::Tensor>;
using tensor_triple = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using tensor_quad = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// ---------------------------------------------------------------------------------------------
// Argument helpers
// ---------------------------------------------------------------------------------------------

// The kernels' element types; everything else is rejected here with the tensor's name.
bool is_kernel_float_type(at::ScalarType type) {
  return type == at::kBFloat16 || type == at::kHalf || type == at::kFloat;
}

tilekit::dtype kernel_dtype(at::ScalarType type, const char* name) {
  TORCH_CHECK_TYPE(is_kernel_float_type(type), "tilekit: ", name, " must be bfloat16, float16 or float32, got ", type);
  switch (type) {
    case at::kBFloat16: return tilekit::dtype::bf16;
    case at::kHalf: return tilekit::dtype::fp16;
    default: return tilekit::dtype::fp32;
  }
}
tilekit::dtype kernel_dtype(const at::Tensor& t, const char* name) { return kernel_dtype(t.scalar_type(), name); }

// `t` lives on the CUDA device of `reference` (the operator's main input).
void check_device(const at::Tensor& t, const char* name, const at::Tensor& reference) {
  TORCH_CHECK(t.is_cuda(), "tilekit: ", name, " must be a CUDA tensor, got device ", t.device());
  TORCH_CHECK(t.device() == reference.device(), "tilekit: ", name, " is on ", t.device(),
              " but the operator's input is on ", reference.device());
}

// The operator's main input: a CUDA tensor with at least one dimension and a non-empty last
// dimension (the normalized / softmax / class dimension).
void check_matrix_input(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "tilekit: ", name, " must be a CUDA tensor, got device ", t.device());
  TORCH_CHECK(t.dim() >= 1, "tilekit: ", name, " must have at least one dimension");
  TORCH_CHECK(t.size(-1) >= 1, "tilekit: ", name, "'s last dimension must not be empty");
}

// A second [.., cols] operand: same device, shape and dtype as the main input.
void check_like(const at::Tensor& t, const char* name, const at::Tensor& reference, const char* reference_name) {
  check_device(t, name, reference);
  TORCH_CHECK(t.sizes() == reference.sizes(), "tilekit: ", name, " must have the shape of ", reference_name, " ",
              reference.sizes(), ", got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == reference.scalar_type(), "tilekit: ", name, " must have the dtype of ",
              reference_name, " (", reference.scalar_type(), "), got ", t.scalar_type());
}

// A per-column parameter (weight, bias): `cols` elements, contiguous after the call.
at::Tensor column_vector(const at::Tensor& t, const char* name, int64_t cols, const at::Tensor& x) {
  check_device(t, name, x);
  TORCH_CHECK(t.numel() == cols, "tilekit: ", name, " must have ", cols, " elements (the last dimension of the input), got ",
              t.numel());
  kernel_dtype(t, name);
  return t.contiguous();
}

// A per-row fp32 vector (statistics, upstream gradients): `rows` float32 elements on x's device.
void check_row_vector(const at::Tensor& t, const char* name, int64_t rows, const at::Tensor& x) {
  check_device(t, name, x);
  TORCH_CHECK(t.scalar_type() == at::kFloat, "tilekit: ", name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.numel() == rows, "tilekit: ", name, " must have ", rows, " elements (one per row), got ", t.numel());
}

// check_row_vector, contiguous after the call.
at::Tensor row_vector(const at::Tensor& t, const char* name, int64_t rows, const at::Tensor& x) {
  check_row_vector(t, name, rows, x);
  return t.contiguous();
}

// Upstream gradients of the rows (fp32, `rows` elements) as a base and a stride in elements:
// an expanded scalar (a reduction's d out / d loss, e.g. a mean's 1 / count) keeps stride 0, a
// strided 1-D view its stride, anything else is made contiguous (stride 1). No copy of a scalar
// into a [rows] vector.
struct row_gradients {
  at::Tensor tensor;
  int64_t stride = 1;
};

row_gradients upstream_gradients(const at::Tensor& t, const char* name, int64_t rows, const at::Tensor& x) {
  check_row_vector(t, name, rows, x);
  at::Tensor flat = t.reshape({rows});  // a view where one exists (an expanded scalar has stride 0)
  if (rows > 1) return {flat, flat.stride(0)};
  return {flat.contiguous(), 1};
}

// A tensor seen as a [rows, cols] matrix with contiguous rows and a row stride in elements.
// `tensor` is either a view of the caller's tensor or, when no such view exists, a contiguous
// copy; it must stay alive while the kernel is enqueued (it does: the caching allocator only
// reuses its memory after the stream has passed the kernel).
struct row_matrix {
  at::Tensor tensor;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
};

row_matrix as_rows(const at::Tensor& t) {
  const int64_t cols = t.size(-1);
  const int64_t rows = t.numel() / cols;
  at::Tensor m = t.reshape({rows, cols});  // a view when the leading dimensions collapse
  // With one column (or one row) the column (row) stride is never used, whatever it is.
  const bool contiguous_rows = cols == 1 || m.stride(1) == 1;
  const bool disjoint_rows = rows <= 1 || m.stride(0) >= cols;
  if (!contiguous_rows || !disjoint_rows) m = m.contiguous();
  return {m, rows, cols, rows > 1 ? m.stride(0) : cols};
}

// Per-row statistics have the input's leading shape ([] for a 1-D input: one row).
at::Tensor empty_row_stats(const at::Tensor& x) {
  return at::empty(x.sizes().slice(0, x.dim() - 1), x.options().dtype(at::kFloat));
}

// The placeholder returned for an output the caller did not ask for.
at::Tensor not_requested(const at::Tensor& like) { return at::empty({0}, like.options()); }

cudaStream_t current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

// Runs one kernel-library call, translating its exceptions into PyTorch errors.
template <class Launch>
void launch(const char* op, Launch&& run) {
  try {
    run();
  } catch (const tilekit::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, "tilekit.", op, ": ", e.what());
  } catch (const tilekit::error& e) {
    TORCH_CHECK(false, "tilekit.", op, ": ", e.what());
  }
}

// Workspace of the norm backward (fp32 partial sums of dweight / dbias), on the current stream.
at::Tensor norm_workspace(const char* op, size_t (*bytes_for)(int64_t, int64_t), int64_t rows, int64_t cols,
                          const at::Tensor& x) {
  size_t bytes = 0;
  launch(op, [&] { bytes = bytes_for(rows, cols); });
  return at::empty({static_cast<int64_t>(bytes)}, x.options().dtype(at::kByte));
}

// ---------------------------------------------------------------------------------------------
// RMSNorm
// ---------------------------------------------------------------------------------------------

// -> (y, h = x + residual (or empty), rstd [leading shape])
tensor_triple rms_norm_fwd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& residual,
                           double eps) {
  check_matrix_input(x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const row_matrix xm = as_rows(x);
  const at::Tensor w = column_vector(weight, "weight", xm.cols, x);
  at::Tensor y = at::empty(x.sizes(), x.options());
  at::Tensor h = residual ? at::empty(x.sizes(), x.options()) : not_requested(x);
  at::Tensor rstd = empty_row_stats(x);
  if (xm.rows == 0) return {y, h, rstd};

  tk::rms_norm_forward_args a;
  a.y = y.data_ptr();
  a.y_row_stride = xm.cols;
  a.x = xm.tensor.data_ptr();
  a.x_row_stride = xm.row_stride;
  a.weight = w.data_ptr();
  row_matrix rm;
  if (residual) {
    check_like(*residual, "residual", x, "x");
    rm = as_rows(*residual);
    a.residual = rm.tensor.data_ptr();
    a.residual_row_stride = rm.row_stride;
    a.residual_out = h.data_ptr();
    a.residual_out_row_stride = xm.cols;
  }
  a.rstd = rstd.data_ptr<float>();
  a.rows = xm.rows;
  a.cols = xm.cols;
  a.x_dtype = kernel_dtype(x, "x");
  a.weight_dtype = kernel_dtype(w, "weight");
  a.eps = static_cast<float>(eps);
  launch("rms_norm_fwd", [&] { tk::rms_norm_forward(a, current_stream()); });
  return {y, h, rstd};
}

// x is the forward's normalized input (h when the residual add was fused). dresidual_out, the
// gradient arriving at h from elsewhere, is added into dx. -> (dx, dweight (or empty))
tensor_pair rms_norm_bwd(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd,
                         const std::optional<at::Tensor>& dresidual_out, bool compute_dweight) {
  check_matrix_input(x, "x");
  check_like(dy, "dy", x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const row_matrix xm = as_rows(x);
  const row_matrix dym = as_rows(dy);
  const at::Tensor w = column_vector(weight, "weight", xm.cols, x);
  const at::Tensor r = row_vector(rstd, "rstd", xm.rows, x);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  at::Tensor dweight = compute_dweight ? at::empty(w.sizes(), w.options()) : not_requested(w);
  if (xm.rows == 0) {
    if (compute_dweight) dweight.zero_();
    return {dx, dweight};
  }

  tk::rms_norm_backward_args a;
  a.dx = dx.data_ptr();
  a.dx_row_stride = xm.cols;
  a.dy = dym.tensor.data_ptr();
  a.dy_row_stride = dym.row_stride;
  a.x = xm.tensor.data_ptr();
  a.x_row_stride = xm.row_stride;
  a.weight = w.data_ptr();
  a.rstd = r.data_ptr<float>();
  row_matrix drm;
  if (dresidual_out) {
    check_like(*dresidual_out, "dresidual_out", x, "x");
    drm = as_rows(*dresidual_out);
    a.dresidual_out = drm.tensor.data_ptr();
    a.dresidual_out_row_stride = drm.row_stride;
  }
  at::Tensor workspace;
  if (compute_dweight) {
    workspace = norm_workspace("rms_norm_bwd", tk::rms_norm_backward_workspace_bytes, xm.rows, xm.cols, x);
    a.dweight = dweight.data_ptr();
    a.workspace = workspace.data_ptr();
    a.workspace_bytes = static_cast<size_t>(workspace.numel());
  }
  a.rows = xm.rows;
  a.cols = xm.cols;
  a.x_dtype = kernel_dtype(x, "x");
  a.weight_dtype = kernel_dtype(w, "weight");
  launch("rms_norm_bwd", [&] { tk::rms_norm_backward(a, current_stream()); });
  return {dx, dweight};
}

// ---------------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------------

// -> (y, h = x + residual (or empty), mean, rstd)
tensor_quad layer_norm_fwd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           const std::optional<at::Tensor>& residual, double eps) {
  check_matrix_input(x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const row_matrix xm = as_rows(x);
  const at::Tensor w = column_vector(weight, "weight", xm.cols, x);
  at::Tensor b;
  if (bias) {
    b = column_vector(*bias, "bias", xm.cols, x);
    TORCH_CHECK(b.scalar_type() == w.scalar_type(), "tilekit: bias must have the dtype of weight (",
                w.scalar_type(), "), got ", b.scalar_type());
  }
  at::Tensor y = at::empty(x.sizes(), x.options());
  at::Tensor h = residual ? at::empty(x.sizes(), x.options()) : not_requested(x);
  at::Tensor mean = empty_row_stats(x);
  at::Tensor rstd = empty_row_stats(x);
  if (xm.rows == 0) return {y, h, mean, rstd};

  tk::layer_norm_forward_args a;
  a.y = y.data_ptr();
  a.y_row_stride = xm.cols;
  a.x = xm.tensor.data_ptr();
  a.x_row_stride = xm.row_stride;
  a.weight = w.data_ptr();
  a.bias = bias ? b.data_ptr() : nullptr;
  row_matrix rm;
  if (residual) {
    check_like(*residual, "residual", x, "x");
    rm = as_rows(*residual);
    a.residual = rm.tensor.data_ptr();
    a.residual_row_stride = rm.row_stride;
    a.residual_out = h.data_ptr();
    a.residual_out_row_stride = xm.cols;
  }
  a.mean = mean.data_ptr<float>();
  a.rstd = rstd.data_ptr<float>();
  a.rows = xm.rows;
  a.cols = xm.cols;
  a.x_dtype = kernel_dtype(x, "x");
  a.weight_dtype = kernel_dtype(w, "weight");
  a.eps = static_cast<float>(eps);
  launch("layer_norm_fwd", [&] { tk::layer_norm_forward(a, current_stream()); });
  return {y, h, mean, rstd};
}

// -> (dx, dweight (or empty), dbias (or empty))
tensor_triple layer_norm_bwd(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& mean,
                             const at::Tensor& rstd, const std::optional<at::Tensor>& dresidual_out, bool compute_dweight,
                             bool compute_dbias) {
  check_matrix_input(x, "x");
  check_like(dy, "dy", x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const row_matrix xm = as_rows(x);
  const row_matrix dym = as_rows(dy);
  const at::Tensor w = column_vector(weight, "weight", xm.cols, x);
  const at::Tensor mu = row_vector(mean, "mean", xm.rows, x);
  const at::Tensor r = row_vector(rstd, "rstd", xm.rows, x);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  at::Tensor dweight = compute_dweight ? at::empty(w.sizes(), w.options()) : not_requested(w);
  at::Tensor dbias = compute_dbias ? at::empty(w.sizes(), w.options()) : not_requested(w);
  if (xm.rows == 0) {
    if (compute_dweight) dweight.zero_();
    if (compute_dbias) dbias.zero_();
    return {dx, dweight, dbias};
  }

  tk::layer_norm_backward_args a;
  a.dx = dx.data_ptr();
  a.dx_row_stride = xm.cols;
  a.dy = dym.tensor.data_ptr();
  a.dy_row_stride = dym.row_stride;
  a.x = xm.tensor.data_ptr();
  a.x_row_stride = xm.row_stride;
  a.weight = w.data_ptr();
  a.mean = mu.data_ptr<float>();
  a.rstd = r.data_ptr<float>();
  row_matrix drm;
  if (dresidual_out) {
    check_like(*dresidual_out, "dresidual_out", x, "x");
    drm = as_rows(*dresidual_out);
    a.dresidual_out = drm.tensor.data_ptr();
    a.dresidual_out_row_stride = drm.row_stride;
  }
  at::Tensor workspace;
  if (compute_dweight || compute_dbias) {
    workspace = norm_workspace("layer_norm_bwd", tk::layer_norm_backward_workspace_bytes, xm.rows, xm.cols, x);
    a.workspace = workspace.data_ptr();
    a.workspace_bytes = static_cast<size_t>(workspace.numel());
  }
  a.dweight = compute_dweight ? dweight.data_ptr() : nullptr;
  a.dbias = compute_dbias ? dbias.data_ptr() : nullptr;
  a.rows = xm.rows;
  a.cols = xm.cols;
  a.x_dtype = kernel_dtype(x, "x");
  a.weight_dtype = kernel_dtype(w, "weight");
  launch("layer_norm_bwd", [&] { tk::layer_norm_backward(a, current_stream()); });
  return {dx, dweight, dbias};
}

// ---------------------------------------------------------------------------------------------
// Softmax (last dimension)
// ---------------------------------------------------------------------------------------------

at::Tensor softmax_fwd(const at::Tensor& x) {
  check_matrix_input(x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const row_matrix xm = as_rows(x);
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (xm.rows == 0) return y;

  tk::softmax_forward_args a;
  a.y = y.data_ptr();
  a.x = xm.tensor.data_ptr();
  a.rows = xm.rows;
  a.cols = xm.cols;
  a.x_row_stride = xm.row_stride;
  a.y_row_stride = xm.cols;
  a.type = kernel_dtype(x, "x");
  launch("softmax_fwd", [&] { tk::softmax_forward(a, current_stream()); });
  return y;
}

// y is the forward's output.
at::Tensor softmax_bwd(const at::Tensor& dy, const at::Tensor& y) {
  check_matrix_input(y, "y");
  check_like(dy, "dy", y, "y");
  const c10::cuda::CUDAGuard device_guard(y.device());
  const row_matrix ym = as_rows(y);
  const row_matrix dym = as_rows(dy);
  at::Tensor dx = at::empty(y.sizes(), y.options());
  if (ym.rows == 0) return dx;

  tk::softmax_backward_args a;
  a.dx = dx.data_ptr();
  a.dy = dym.tensor.data_ptr();
  a.y = ym.tensor.data_ptr();
  a.rows = ym.rows;
  a.cols = ym.cols;
  a.dx_row_stride = ym.cols;
  a.dy_row_stride = dym.row_stride;
  a.y_row_stride = ym.row_stride;
  a.type = kernel_dtype(y, "y");
  launch("softmax_bwd", [&] { tk::softmax_backward(a, current_stream()); });
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy (logits [.., vocab], int64 labels [..])
// ---------------------------------------------------------------------------------------------

// Class labels on `reference`'s device: int64 (their shape is the caller's to check).
void check_label_tensor(const at::Tensor& labels, const at::Tensor& reference) {
  check_device(labels, "labels", reference);
  TORCH_CHECK_TYPE(labels.scalar_type() == at::kLong, "tilekit: labels must be int64, got ", labels.scalar_type());
}

// Labels: int64 with the logits' leading shape, contiguous after the call.
at::Tensor check_labels(const at::Tensor& labels, const at::Tensor& logits) {
  check_label_tensor(labels, logits);
  const auto leading = logits.sizes().slice(0, logits.dim() - 1);
  TORCH_CHECK(labels.sizes() == leading, "tilekit: labels must have the logits' leading shape ", leading, ", got ",
              labels.sizes());
  return labels.contiguous();
}

// Per-row loss and log-sum-exp (fp32, the labels' shape); with compute_dlogits also
// dlogits = d(sum_r g_r loss_r)/dlogits, g_r = grad_scale * (grad_per_row ? grad_per_row[r] : 1).
// -> (loss, lse, dlogits (or empty))
tensor_triple cross_entropy_fwd(const at::Tensor& logits, const at::Tensor& labels, int64_t ignore_index,
                                double label_smoothing, double z_loss, bool compute_dlogits,
                                const std::optional<at::Tensor>& grad_per_row, double grad_scale) {
  check_matrix_input(logits, "logits");
  const c10::cuda::CUDAGuard device_guard(logits.device());
  const row_matrix lm = as_rows(logits);
  const at::Tensor t = check_labels(labels, logits);
  at::Tensor loss = empty_row_stats(logits);
  at::Tensor lse = empty_row_stats(logits);
  at::Tensor dlogits = compute_dlogits ? at::empty(logits.sizes(), logits.options()) : not_requested(logits);
  row_gradients g;
  if (grad_per_row) g = upstream_gradients(*grad_per_row, "grad_per_row", lm.rows, logits);
  if (lm.rows == 0) return {loss, lse, dlogits};

  tk::cross_entropy_forward_args a;
  a.logits = lm.tensor.data_ptr();
  a.labels = t.data_ptr<int64_t>();
  a.loss = loss.data_ptr<float>();
  a.lse = lse.data_ptr<float>();
  a.rows = lm.rows;
  a.vocab = lm.cols;
  a.logits_row_stride = lm.row_stride;
  a.type = kernel_dtype(logits, "logits");
  a.ignore_index = ignore_index;
  a.label_smoothing = static_cast<float>(label_smoothing);
  a.z_loss_weight = static_cast<float>(z_loss);
  if (compute_dlogits) {
    a.dlogits = dlogits.data_ptr();
    a.dlogits_row_stride = lm.cols;
    a.grad_per_row = grad_per_row ? g.tensor.data_ptr<float>() : nullptr;
    a.grad_per_row_stride = g.stride;
    a.grad_scale = static_cast<float>(grad_scale);
  }
  launch("cross_entropy_fwd", [&] { tk::cross_entropy_forward(a, current_stream()); });
  return {loss, lse, dlogits};
}

// dlogits from the forward's lse: d(sum_r g_r loss_r)/dlogits with g_r as in cross_entropy_fwd.
at::Tensor cross_entropy_bwd(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& lse,
                             const std::optional<at::Tensor>& grad_per_row, double grad_scale, int64_t ignore_index,
                             double label_smoothing, double z_loss) {
  check_matrix_input(logits, "logits");
  const c10::cuda::CUDAGuard device_guard(logits.device());
  const row_matrix lm = as_rows(logits);
  const at::Tensor t = check_labels(labels, logits);
  const at::Tensor l = row_vector(lse, "lse", lm.rows, logits);
  row_gradients g;
  if (grad_per_row) g = upstream_gradients(*grad_per_row, "grad_per_row", lm.rows, logits);
  at::Tensor dlogits = at::empty(logits.sizes(), logits.options());
  if (lm.rows == 0) return dlogits;

  tk::cross_entropy_backward_args a;
  a.dlogits = dlogits.data_ptr();
  a.logits = lm.tensor.data_ptr();
  a.labels = t.data_ptr<int64_t>();
  a.lse = l.data_ptr<float>();
  a.grad_per_row = grad_per_row ? g.tensor.data_ptr<float>() : nullptr;
  a.grad_per_row_stride = g.stride;
  a.grad_scale = static_cast<float>(grad_scale);
  a.rows = lm.rows;
  a.vocab = lm.cols;
  a.logits_row_stride = lm.row_stride;
  a.dlogits_row_stride = lm.cols;
  a.type = kernel_dtype(logits, "logits");
  a.ignore_index = ignore_index;
  a.label_smoothing = static_cast<float>(label_smoothing);
  a.z_loss_weight = static_cast<float>(z_loss);
  launch("cross_entropy_bwd", [&] { tk::cross_entropy_backward(a, current_stream()); });
  return dlogits;
}

// PyTorch's reduction='sum' / 'mean' of the per-row losses in one launch (cross_entropy.h,
// cross_entropy_reduce): out = sum (or sum over the non-ignored rows' count) as a 0-d tensor of
// `dtype`, and row_gradient = d out / d loss[r] (1, or 1 / count) as a 0-d float32 tensor. Without
// `loss` only row_gradient is computed (a mean's gradient scale, before a fused forward) and out
// is an empty [0] placeholder.
tensor_pair cross_entropy_reduce(const std::optional<at::Tensor>& loss, const at::Tensor& labels, int64_t ignore_index,
                                 bool mean, at::ScalarType dtype) {
  check_label_tensor(labels, labels);  // (the labels are this operator's main input)
  const tilekit::dtype out_type = kernel_dtype(dtype, "dtype");
  const c10::cuda::CUDAGuard device_guard(labels.device());
  const at::Tensor t = labels.contiguous();
  const int64_t rows = t.numel();
  at::Tensor l;
  if (loss) l = row_vector(*loss, "loss", rows, labels);
  const at::TensorOptions out_options = labels.options().dtype(dtype);
  at::Tensor out = loss ? at::empty({}, out_options) : at::empty({0}, out_options);
  at::Tensor row_gradient = at::empty({}, labels.options().dtype(at::kFloat));

  tk::cross_entropy_reduce_args a;
  a.loss = loss ? l.data_ptr<float>() : nullptr;
  a.labels = t.data_ptr<int64_t>();
  a.rows = rows;
  a.ignore_index = ignore_index;
  a.reduction = mean ? tk::cross_entropy_reduction::mean : tk::cross_entropy_reduction::sum;
  a.out = loss ? out.data_ptr() : nullptr;
  a.out_type = out_type;
  a.row_gradient = row_gradient.data_ptr<float>();
  launch("cross_entropy_reduce", [&] { tk::cross_entropy_reduce(a, current_stream()); });
  return {out, row_gradient};
}

}  // namespace

// Schemas: `float` is a C++ double, `int` an int64_t, `Tensor?` a std::optional<at::Tensor>.
// No operator mutates or aliases its inputs (every output is freshly allocated).
TORCH_LIBRARY(tilekit, m) {
  m.def("rms_norm_fwd(Tensor x, Tensor weight, Tensor? residual, float eps) -> (Tensor, Tensor, Tensor)");
  m.def(
      "rms_norm_bwd(Tensor dy, Tensor x, Tensor weight, Tensor rstd, Tensor? dresidual_out, bool compute_dweight)"
      " -> (Tensor, Tensor)");
  m.def(
      "layer_norm_fwd(Tensor x, Tensor weight, Tensor? bias, Tensor? residual, float eps)"
      " -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "layer_norm_bwd(Tensor dy, Tensor x, Tensor weight, Tensor mean, Tensor rstd, Tensor? dresidual_out,"
      " bool compute_dweight, bool compute_dbias) -> (Tensor, Tensor, Tensor)");
  m.def("softmax_fwd(Tensor x) -> Tensor");
  m.def("softmax_bwd(Tensor dy, Tensor y) -> Tensor");
  m.def(
      "cross_entropy_fwd(Tensor logits, Tensor labels, int ignore_index, float label_smoothing, float z_loss,"
      " bool compute_dlogits, Tensor? grad_per_row, float grad_scale) -> (Tensor, Tensor, Tensor)");
  m.def(
      "cross_entropy_bwd(Tensor logits, Tensor labels, Tensor lse, Tensor? grad_per_row, float grad_scale,"
      " int ignore_index, float label_smoothing, float z_loss) -> Tensor");
  m.def(
      "cross_entropy_reduce(Tensor? loss, Tensor labels, int ignore_index, bool mean, ScalarType dtype)"
      " -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tilekit, CUDA, m) {
  m.impl("rms_norm_fwd", TORCH_FN(rms_norm_fwd));
  m.impl("rms_norm_bwd", TORCH_FN(rms_norm_bwd));
  m.impl("layer_norm_fwd", TORCH_FN(layer_norm_fwd));
  m.impl("layer_norm_bwd", TORCH_FN(layer_norm_bwd));
  m.impl("softmax_fwd", TORCH_FN(softmax_fwd));
  m.impl("softmax_bwd", TORCH_FN(softmax_bwd));
  m.impl("cross_entropy_fwd", TORCH_FN(cross_entropy_fwd));
  m.impl("cross_entropy_bwd", TORCH_FN(cross_entropy_bwd));
  m.impl("cross_entropy_reduce", TORCH_FN(cross_entropy_reduce));
}

// `import tilekit._C` only needs a module object: loading the shared library runs the static
// registrations above. No Python functions are exported (everything goes through torch.ops).
PyMODINIT_FUNC PyInit__C(void) {  // PyMODINIT_FUNC already says extern "C"
  static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "tilekit operators (torch.ops.tilekit)", -1, nullptr,
                                   nullptr, nullptr, nullptr, nullptr};
  return PyModule_Create(&module_def);
}
