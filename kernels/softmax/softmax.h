#pragma once
// Softmax along the last dimension, forward and backward (host API).
//
//   forward:  y[r, :]  = exp(x[r, :] - max_c x[r, c]) / sum_c exp(x[r, c] - max_c x[r, c])
//   backward: dx[r, :] = y[r, :] * (dy[r, :] - sum_c dy[r, c] * y[r, c])
//
// Tensors are [rows, cols] with the last dimension contiguous and a row stride in elements
// (>= cols), all of one element type (bf16, fp16 or fp32); arithmetic is fp32. Any cols from 1
// to softmax_max_cols, rows from 1 to 2^27 - 1. Rows that are not 16-byte aligned are correct,
// only slower: unaligned inputs are streamed shifted and realigned in registers, an unaligned
// output is stored element by element (realigned on shifted launches; docs/performance.md,
// "Unaligned rows"). Pointers must be aligned to the element size.
//
// The functions validate every argument first (tilekit::invalid_argument naming the field),
// then enqueue one kernel on `stream`. They never synchronize and never allocate, so they
// can be captured in a CUDA graph. Outputs must not overlap inputs, except exactly in place
// with equal row strides (y == x; dx == dy or dx == y): a row is read completely into shared
// memory before any of it is written. Only that exact case is checked; a partial overlap is not
// detected.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tilekit/core/dtypes.cuh"

namespace tilekit::kernels {

// The widest row the softmax kernels accept (one cluster of CTAs holds a row in registers).
inline constexpr int64_t softmax_max_cols = int64_t(1) << 18;  // 262144

struct softmax_forward_args {
  void* y = nullptr;        // [rows, cols] output
  const void* x = nullptr;  // [rows, cols] input
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_row_stride = 0;  // elements between the starts of two rows of x (>= cols)
  int64_t y_row_stride = 0;  // elements between the starts of two rows of y (>= cols)
  dtype type = dtype::bf16;  // element type of x and y
};

struct softmax_backward_args {
  void* dx = nullptr;        // [rows, cols] gradient of the softmax input (output)
  const void* dy = nullptr;  // [rows, cols] gradient of the softmax output
  const void* y = nullptr;   // [rows, cols] softmax output of the forward pass
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t dx_row_stride = 0;
  int64_t dy_row_stride = 0;
  int64_t y_row_stride = 0;
  dtype type = dtype::bf16;  // element type of dx, dy and y
};

// Throw tilekit::invalid_argument for the first invalid field (no CUDA call).
void validate(const softmax_forward_args& args);
void validate(const softmax_backward_args& args);

void softmax_forward(const softmax_forward_args& args, cudaStream_t stream);
void softmax_backward(const softmax_backward_args& args, cudaStream_t stream);

}  // namespace tilekit::kernels
