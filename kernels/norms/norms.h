#pragma once
// RMSNorm and LayerNorm, forward and backward, over the last dimension of a [rows, cols] matrix.
//
//   RMSNorm:   y = x * rstd * w               rstd = 1 / sqrt(mean(x^2) + eps)
//   LayerNorm: y = (x - mean) * rstd * w + b  rstd = 1 / sqrt(mean((x - mean)^2) + eps)
//
// Every tensor is row-major with a row stride in ELEMENTS (the last dimension is contiguous);
// strides may exceed cols (views into wider buffers). x, residual, residual_out (h), y, dy, dx
// and dresidual_out all have dtype `x_dtype` (bf16, fp16 or fp32); the weight / bias (and their
// gradients) have `weight_dtype`, which is x_dtype or fp32. Statistics (rstd, mean) are fp32
// [rows] vectors. Arithmetic is fp32. Any cols from 1 to max_norm_cols, rows from 1 to 2^27 - 1.
// Outputs must not overlap inputs (not checked). Rows that are not 16-byte aligned are correct,
// only slower: unaligned streamed inputs (x, dy and the 16-bit residual) are streamed shifted
// and realigned in registers, other unaligned operands and outputs are accessed element by
// element (outputs realigned on shifted launches).
//
// LayerNorm statistics are two-pass (a mean, then the sum of squared deviations from it), never
// E[x^2] - E[x]^2, and the partial moments of a row's pieces are combined exactly around one
// piece's mean, with the correction term of the corrected two-pass algorithm. 16-bit rows of 4
// warps or more (4K columns and up): each thread makes both passes over its own columns, one
// butterfly combines a warp's threads, and the warps' (m, M2, n) are folded (norm_kernels.cuh,
// warp_statistics, fold_moments; over clusters of 2 and 16 CTAs each CTA's warps first,
// combine_moments). fp32 rows and narrower 16-bit rows: both passes over the row, reduced over
// its threads; a row wider than one CTA (more than 16K columns at 32 per thread) is split over a
// cluster, and the CTAs' moments are folded in one exchange (layer_fold). The backward without
// saved statistics recomputes them with two reductions: the row's mean, then its deviations.
//
// Fused residual add (forward): when `residual` is given, h = x + residual is rounded to
// x_dtype, written to `residual_out`, and h (the rounded value, exactly what a separate add
// would produce) is normalized. The backward then takes h as its `x`. Because h = x + residual,
// dL/dx = dL/dresidual = dL/dh: the backward writes that gradient once, into `dx`; use it as
// the residual gradient too. When h also feeds the next layer (a transformer's residual
// stream), pass the gradient arriving there as `dresidual_out`: it is added into dx.
//
// Backward: dw (and db) are reduced over rows DETERMINISTICALLY: each row group of each worker
// (a CTA, or a cluster for wide rows; several row groups per CTA for narrow rows) sums its rows
// into an fp32 partial row in `workspace`, then a second small kernel adds the partials in a
// fixed order. The number of workers depends on (rows, cols) and on how many workers fit on the
// device at once (at most 132 CTAs), never on scheduling: the bits of dw are the same in every
// run on a given GPU model. Query the workspace size with
// *_backward_workspace_bytes(rows, cols) (a function of the shape only, no device needed) and
// pass a device buffer at least that large.
//
// The functions validate every argument and throw tilekit::invalid_argument (before touching
// the device) with a message naming the offending field. They never synchronize: safe under
// CUDA graph capture. Errors of the launch itself throw tilekit::cuda_error.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tilekit/core/dtypes.cuh"

namespace tilekit::kernels {

// Widest row: 16 CTAs (the largest cluster) x 16384 columns each.
inline constexpr int64_t max_norm_cols = 262144;

struct rms_norm_forward_args {
  void* y = nullptr;                      // [rows, cols] x_dtype, output
  int64_t y_row_stride = 0;
  const void* x = nullptr;                // [rows, cols] x_dtype
  int64_t x_row_stride = 0;
  const void* weight = nullptr;           // [cols] weight_dtype
  const void* residual = nullptr;         // optional [rows, cols] x_dtype: normalize h = x + residual
  int64_t residual_row_stride = 0;
  void* residual_out = nullptr;           // [rows, cols] x_dtype, h; required iff residual is given
  int64_t residual_out_row_stride = 0;
  float* rstd = nullptr;                  // optional [rows] fp32 output, for the backward
  int64_t rows = 0;
  int64_t cols = 0;
  dtype x_dtype = dtype::bf16;
  dtype weight_dtype = dtype::bf16;
  float eps = 1e-6f;
};

struct layer_norm_forward_args {
  void* y = nullptr;
  int64_t y_row_stride = 0;
  const void* x = nullptr;
  int64_t x_row_stride = 0;
  const void* weight = nullptr;           // [cols] weight_dtype
  const void* bias = nullptr;             // optional [cols] weight_dtype
  const void* residual = nullptr;         // optional, as in rms_norm_forward_args
  int64_t residual_row_stride = 0;
  void* residual_out = nullptr;
  int64_t residual_out_row_stride = 0;
  float* mean = nullptr;                  // optional [rows] fp32 output
  float* rstd = nullptr;                  // optional [rows] fp32 output
  int64_t rows = 0;
  int64_t cols = 0;
  dtype x_dtype = dtype::bf16;
  dtype weight_dtype = dtype::bf16;
  float eps = 1e-5f;
};

struct rms_norm_backward_args {
  void* dx = nullptr;                     // [rows, cols] x_dtype, output (also the residual's gradient)
  int64_t dx_row_stride = 0;
  void* dweight = nullptr;                // optional [cols] weight_dtype output (needs workspace)
  const void* dy = nullptr;               // [rows, cols] x_dtype
  int64_t dy_row_stride = 0;
  const void* x = nullptr;                // [rows, cols] x_dtype: the forward's input (h when fused)
  int64_t x_row_stride = 0;
  const void* weight = nullptr;           // [cols] weight_dtype
  const float* rstd = nullptr;            // optional [rows] from the forward; recomputed when null
  const void* dresidual_out = nullptr;    // optional [rows, cols] x_dtype: gradient arriving at h, added to dx
  int64_t dresidual_out_row_stride = 0;
  void* workspace = nullptr;              // device memory, rms_norm_backward_workspace_bytes(rows, cols)
  size_t workspace_bytes = 0;             // size of `workspace` (checked)
  int64_t rows = 0;
  int64_t cols = 0;
  dtype x_dtype = dtype::bf16;
  dtype weight_dtype = dtype::bf16;
  float eps = 1e-6f;                      // only used when rstd is recomputed
};

struct layer_norm_backward_args {
  void* dx = nullptr;
  int64_t dx_row_stride = 0;
  void* dweight = nullptr;                // optional [cols] weight_dtype output
  void* dbias = nullptr;                  // optional [cols] weight_dtype output
  const void* dy = nullptr;
  int64_t dy_row_stride = 0;
  const void* x = nullptr;
  int64_t x_row_stride = 0;
  const void* weight = nullptr;
  const float* mean = nullptr;            // optional, together with rstd; recomputed when both are null
  const float* rstd = nullptr;
  const void* dresidual_out = nullptr;
  int64_t dresidual_out_row_stride = 0;
  void* workspace = nullptr;              // layer_norm_backward_workspace_bytes(rows, cols)
  size_t workspace_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  dtype x_dtype = dtype::bf16;
  dtype weight_dtype = dtype::bf16;
  float eps = 1e-5f;
};

void rms_norm_forward(const rms_norm_forward_args& args, cudaStream_t stream);
void layer_norm_forward(const layer_norm_forward_args& args, cudaStream_t stream);

// Bytes of workspace the backward needs (fp32 partial sums of dw, and db for LayerNorm); 0
// never happens for valid shapes. Throws tilekit::invalid_argument for invalid rows / cols.
size_t rms_norm_backward_workspace_bytes(int64_t rows, int64_t cols);
size_t layer_norm_backward_workspace_bytes(int64_t rows, int64_t cols);

void rms_norm_backward(const rms_norm_backward_args& args, cudaStream_t stream);
void layer_norm_backward(const layer_norm_backward_args& args, cudaStream_t stream);

}  // namespace tilekit::kernels
