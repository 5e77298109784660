// RMSNorm / LayerNorm backward: argument validation, workspace layout and dispatch (device code
// in norm_kernels.cuh).
//
// Workspace layout (fp32): [max partials, cols] dw partials, then (LayerNorm) [max partials, cols]
// db partials; max partials = max_backward_partials(rows, cols): one per row group of each
// worker (the launch uses at most that many).

#include "norms/norm_kernels.cuh"
#include "norms/norms.h"

namespace tilekit::kernels {
namespace {
using namespace norms_detail;

constexpr int rms_gradients = 1;    // dw
constexpr int layer_gradients = 2;  // dw, db

// Runs the backward row op, then sums the per-worker partials of dw (and db). `params` holds
// the partial arrays' bases; db's lies max_backward_partials(rows, cols) rows after dw's.
template <norm_kind Kind>
void launch_backward(const backward_params& params, void* dweight, void* dbias, dtype x_dtype, dtype weight_dtype,
                     cudaStream_t stream) {
  dispatch_dtypes(x_dtype, weight_dtype, [&]<class T, class W>() {
    // Plans and runs Op; false (nothing launched) for an aligned-only Op whose rows are not
    // aligned.
    auto run = [&]<class Op>() {
      const detail::row_launch plan = detail::plan_rows<Op>(params);
      if (Op::aligned_only && !plan.aligned) return false;
      detail::launch_rows<Op>(params, plan, stream);
      TILEKIT_CHECK_LAUNCH(Kind == norm_kind::rms ? "rms_norm_backward" : "layer_norm_backward");
      const int64_t partials = plan.workers * detail::row_groups(params.cols);
      if (dweight) launch_sum_partials<W>(dweight, params.dweight_partials, partials, params.cols, stream);
      if (dbias) launch_sum_partials<W>(dbias, params.dbias_partials, partials, params.cols, stream);
      return true;
    };
    // The LayerNorm's aligned 16-bit rows with saved statistics of 16K-64K columns: deferred
    // rows (norm_backward_op<..., Deferred = true>, aligned only, its own table of those classes).
    if constexpr (Kind == norm_kind::layer && is_16bit_float<T>) {
      if (params.rstd != nullptr && in_layer_deferred_classes(params.cols) &&
          (params.dresidual_out ? run.template operator()<norm_backward_op<Kind, T, W, true, true>>()
                                : run.template operator()<norm_backward_op<Kind, T, W, false, true>>()))
        return;
    }
    if (params.dresidual_out) run.template operator()<norm_backward_op<Kind, T, W, true>>();
    else run.template operator()<norm_backward_op<Kind, T, W, false>>();
  });
}

template <class Args>
void check_backward_common(const Args& a, int gradients, bool any_gradient) {
  check_shape(a.rows, a.cols);
  check_dtypes(a.x_dtype, a.weight_dtype);
  check_matrix(a.dx, a.dx_row_stride, a.cols, a.x_dtype, "dx", true);
  check_matrix(a.dy, a.dy_row_stride, a.cols, a.x_dtype, "dy", true);
  check_matrix(a.x, a.x_row_stride, a.cols, a.x_dtype, "x", true);
  check_vector(a.weight, a.weight_dtype, "weight", true);
  check_matrix(a.dresidual_out, a.dresidual_out_row_stride, a.cols, a.x_dtype, "dresidual_out", false);
  if (a.rstd == nullptr) check_eps(a.eps);  // eps only matters when rstd is recomputed
  if (any_gradient) {
    const size_t needed = backward_workspace_bytes(a.rows, a.cols, gradients);
    TILEKIT_CHECK_ARG(a.workspace != nullptr, "workspace must not be null when a weight/bias gradient is requested (",
                      needed, " bytes)");
    TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(a.workspace) % alignof(float) == 0,
                      "workspace must be aligned to 4 bytes");
    TILEKIT_CHECK_ARG(a.workspace_bytes >= needed, "workspace_bytes must be >= ", needed, " for rows = ", a.rows,
                      ", cols = ", a.cols, ", got ", a.workspace_bytes);
  }
}
}  // namespace

size_t rms_norm_backward_workspace_bytes(int64_t rows, int64_t cols) {
  return backward_workspace_bytes(rows, cols, rms_gradients);
}
size_t layer_norm_backward_workspace_bytes(int64_t rows, int64_t cols) {
  return backward_workspace_bytes(rows, cols, layer_gradients);
}

void rms_norm_backward(const rms_norm_backward_args& a, cudaStream_t stream) {
  check_backward_common(a, rms_gradients, a.dweight != nullptr);
  check_vector(a.dweight, a.weight_dtype, "dweight", false);
  float* partials = static_cast<float*>(a.workspace);
  const backward_params params{a.dx,     a.dx_row_stride, a.dy,   a.dy_row_stride, a.x,
                               a.x_row_stride, a.weight,  nullptr, a.rstd,         a.dresidual_out,
                               a.dresidual_out_row_stride, a.dweight ? partials : nullptr, nullptr,
                               a.rows, int(a.cols),     a.eps};
  launch_backward<norm_kind::rms>(params, a.dweight, nullptr, a.x_dtype, a.weight_dtype, stream);
}

void layer_norm_backward(const layer_norm_backward_args& a, cudaStream_t stream) {
  check_backward_common(a, layer_gradients, a.dweight != nullptr || a.dbias != nullptr);
  check_vector(a.dweight, a.weight_dtype, "dweight", false);
  check_vector(a.dbias, a.weight_dtype, "dbias", false);
  TILEKIT_CHECK_ARG((a.mean == nullptr) == (a.rstd == nullptr),
                    "mean and rstd must be given together (or both null to recompute them)");
  float* partials = static_cast<float*>(a.workspace);
  const size_t partial_count = size_t(max_backward_partials(a.rows, a.cols)) * size_t(a.cols);
  const backward_params params{a.dx,     a.dx_row_stride, a.dy,   a.dy_row_stride, a.x,
                               a.x_row_stride, a.weight,  a.mean,  a.rstd,         a.dresidual_out,
                               a.dresidual_out_row_stride, a.dweight ? partials : nullptr,
                               a.dbias ? partials + partial_count : nullptr,
                               a.rows, int(a.cols),     a.eps};
  launch_backward<norm_kind::layer>(params, a.dweight, a.dbias, a.x_dtype, a.weight_dtype, stream);
}

}  // namespace tilekit::kernels
