// RMSNorm / LayerNorm forward: argument validation and dispatch (device code in norm_kernels.cuh).

#include "norms/norm_kernels.cuh"
#include "norms/norms.h"

namespace tilekit::kernels {
namespace {
using namespace norms_detail;

template <norm_kind Kind>
void launch_forward(const forward_params& params, dtype x_dtype, dtype weight_dtype, cudaStream_t stream) {
  dispatch_dtypes(x_dtype, weight_dtype, [&]<class T, class W>() {
    if (params.residual) detail::run_rows<norm_forward_op<Kind, T, W, true>>(params, stream);
    else detail::run_rows<norm_forward_op<Kind, T, W, false>>(params, stream);
  });
  TILEKIT_CHECK_LAUNCH(Kind == norm_kind::rms ? "rms_norm_forward" : "layer_norm_forward");
}

// Checks shared by both norms; `residual_out` is required exactly when `residual` is given.
template <class Args>
void check_forward_common(const Args& a) {
  check_shape(a.rows, a.cols);
  check_dtypes(a.x_dtype, a.weight_dtype);
  check_eps(a.eps);
  check_matrix(a.x, a.x_row_stride, a.cols, a.x_dtype, "x", true);
  check_matrix(a.y, a.y_row_stride, a.cols, a.x_dtype, "y", true);
  check_vector(a.weight, a.weight_dtype, "weight", true);
  check_matrix(a.residual, a.residual_row_stride, a.cols, a.x_dtype, "residual", false);
  TILEKIT_CHECK_ARG((a.residual == nullptr) == (a.residual_out == nullptr),
                    "residual and residual_out must be given together (h = x + residual is written to residual_out)");
  check_matrix(a.residual_out, a.residual_out_row_stride, a.cols, a.x_dtype, "residual_out", false);
}
}  // namespace

void rms_norm_forward(const rms_norm_forward_args& a, cudaStream_t stream) {
  check_forward_common(a);
  const forward_params params{a.y,        a.y_row_stride, a.x,         a.x_row_stride, a.weight, nullptr,
                              a.residual, a.residual_row_stride, a.residual_out, a.residual_out_row_stride,
                              nullptr,    a.rstd,         a.rows, int(a.cols),    a.eps};
  launch_forward<norm_kind::rms>(params, a.x_dtype, a.weight_dtype, stream);
}

void layer_norm_forward(const layer_norm_forward_args& a, cudaStream_t stream) {
  check_forward_common(a);
  check_vector(a.bias, a.weight_dtype, "bias", false);
  const forward_params params{a.y,        a.y_row_stride, a.x,         a.x_row_stride, a.weight, a.bias,
                              a.residual, a.residual_row_stride, a.residual_out, a.residual_out_row_stride,
                              a.mean,     a.rstd,         a.rows, int(a.cols),    a.eps};
  launch_forward<norm_kind::layer>(params, a.x_dtype, a.weight_dtype, stream);
}

}  // namespace tilekit::kernels
