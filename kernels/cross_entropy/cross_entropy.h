#pragma once
// Cross-entropy over logits [rows, vocab] with int64 class labels [rows] (host API).
//
// Per row r with label t = labels[r], p = softmax(logits[r, :]), lse = log sum_c exp(logits[r, c]):
//
//   loss[r] = (1 - eps) * (lse - logits[r, t])          label smoothing eps = label_smoothing
//           + eps * (lse - mean_c logits[r, c])          (uniform target mass eps / vocab)
//           + z * lse^2                                  z-loss, z = z_loss_weight
//
//   dloss[r] / dlogits[r, c] = p_c * (1 + 2 z lse) - (1 - eps) * [c == t] - eps / vocab
//
//   rows with t == ignore_index: loss 0, dlogits 0 (lse is still written).
//   rows with t outside [0, vocab) and != ignore_index: loss NaN and dlogits NaN (the labels
//   live on the device, so the host cannot check them without synchronizing).
//
// Reduction convention: the kernels produce PER-ROW losses. A mean over the non-ignored rows
// (PyTorch's reduction='mean') is the caller's: divide the sum of `loss` by the number of
// non-ignored rows, and pass the matching upstream gradient (1 / count, or a per-row vector)
// through `grad_scale` / `grad_per_row` below.
//
// Upstream gradient of row r: g_r = grad_scale * (grad_per_row ? grad_per_row[r] : 1), and
// dlogits[r, :] = g_r * dloss[r] / dlogits[r, :].
//
// Two ways to get dlogits:
//   * cross_entropy_forward with `dlogits` set: one read of the logits produces loss, lse and
//     dlogits (training step where the upstream gradient is known up front, e.g. a mean
//     reduction: grad_scale = 1 / non_ignored_rows).
//   * cross_entropy_backward from the forward's lse: one read of the logits and one write of
//     dlogits, no reduction (every element is independent once lse is known).
//
// Logits and dlogits: bf16, fp16 or fp32 (the same type), last dimension contiguous, row
// strides in elements (>= vocab); arithmetic in fp32. loss, lse, grad_per_row: fp32 [rows],
// contiguous. Any vocab from 1 to cross_entropy_max_vocab. dlogits may alias logits (same
// stride): each element is read before it is written by the same thread.
//
// The functions validate every argument first (tilekit::invalid_argument naming the field),
// then enqueue one kernel on `stream`; no synchronization, no allocation (graph-capture safe).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tilekit/core/dtypes.cuh"

namespace tilekit::kernels {

inline constexpr int64_t cross_entropy_max_vocab = int64_t(1) << 18;  // 262144
// PyTorch's default ignore_index.
inline constexpr int64_t cross_entropy_default_ignore_index = -100;

struct cross_entropy_forward_args {
  const void* logits = nullptr;     // [rows, vocab]
  const int64_t* labels = nullptr;  // [rows]
  float* loss = nullptr;            // [rows] output, required
  float* lse = nullptr;             // [rows] output log-sum-exp; may be nullptr (not written)
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t logits_row_stride = 0;  // elements (>= vocab)
  dtype type = dtype::bf16;       // element type of logits (and dlogits)
  int64_t ignore_index = cross_entropy_default_ignore_index;
  float label_smoothing = 0.f;  // in [0, 1]
  float z_loss_weight = 0.f;    // >= 0; 0 disables the z-loss term

  // Optional fused gradient: when dlogits != nullptr the forward also writes dlogits.
  void* dlogits = nullptr;              // [rows, vocab]
  int64_t dlogits_row_stride = 0;       // elements (>= vocab); used only with dlogits
  const float* grad_per_row = nullptr;  // [rows] upstream gradient per row, or nullptr (= 1)
  float grad_scale = 1.f;               // multiplies every row's upstream gradient
};

struct cross_entropy_backward_args {
  void* dlogits = nullptr;              // [rows, vocab] output
  const void* logits = nullptr;         // [rows, vocab]
  const int64_t* labels = nullptr;      // [rows]
  const float* lse = nullptr;           // [rows] log-sum-exp written by the forward
  const float* grad_per_row = nullptr;  // [rows] upstream gradient of each row's loss, or nullptr (= 1)
  float grad_scale = 1.f;               // multiplies every row's upstream gradient
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t logits_row_stride = 0;
  int64_t dlogits_row_stride = 0;
  dtype type = dtype::bf16;
  int64_t ignore_index = cross_entropy_default_ignore_index;
  float label_smoothing = 0.f;
  float z_loss_weight = 0.f;
};

// Throw tilekit::invalid_argument for the first invalid field (no CUDA call).
void validate(const cross_entropy_forward_args& args);
void validate(const cross_entropy_backward_args& args);

void cross_entropy_forward(const cross_entropy_forward_args& args, cudaStream_t stream);
void cross_entropy_backward(const cross_entropy_backward_args& args, cudaStream_t stream);

}  // namespace tilekit::kernels
