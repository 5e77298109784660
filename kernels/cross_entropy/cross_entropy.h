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
// Reduction convention: the forward produces PER-ROW losses. cross_entropy_reduce (below)
// folds them into PyTorch's reduction='sum' or 'mean' (the mean over the non-ignored rows) in
// one more launch, deterministically, and writes the matching upstream gradient of every row
// (1 / count, or 1) as a device scalar, which the forward's fused gradient or the backward take
// through `grad_per_row` with `grad_per_row_stride` 0: no per-row vector is materialized.
//
// Upstream gradient of row r: g_r = grad_scale * (grad_per_row ? grad_per_row[r * grad_per_row_stride] : 1),
// and dlogits[r, :] = g_r * dloss[r] / dlogits[r, :].
//
// Two ways to get dlogits:
//   * cross_entropy_forward with `dlogits` set: one read of the logits produces loss, lse and
//     dlogits (training step where the upstream gradient is known up front, e.g. a mean
//     reduction: grad_scale = 1 / non_ignored_rows).
//   * cross_entropy_backward from the forward's lse: one read of the logits and one write of
//     dlogits, no reduction (every element is independent once lse is known).
//
// Logits and dlogits: bf16, fp16 or fp32 (the same type), last dimension contiguous, row
// strides in elements (>= vocab); arithmetic in fp32. For 16-bit rows of more than 32768
// columns, dlogits (and the statistics of a forward that writes them) take their exponents as
// x log2 e - lse log2 e, one FFMA: p to ~2e-5 relative at lse ~ 500, far below a 16-bit dlogit's
// rounding, and valid while |lse| < 2.3e38 (bf16 logits below 70% of the largest float).
// loss, lse: fp32 [rows], contiguous; grad_per_row: fp32, row r's at r * grad_per_row_stride (0:
// one value for every row). Any vocab from 1 to cross_entropy_max_vocab, rows from 1 to 2^27 - 1.
// dlogits may alias logits exactly (same pointer, same stride): each row is read into shared
// memory before any of it is written. Only that exact case is checked; a partial overlap is not
// detected.
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
  int64_t grad_per_row_stride = 1;      // elements between rows' gradients; 0: grad_per_row[0] for every row
  float grad_scale = 1.f;               // multiplies every row's upstream gradient
};

struct cross_entropy_backward_args {
  void* dlogits = nullptr;              // [rows, vocab] output
  const void* logits = nullptr;         // [rows, vocab]
  const int64_t* labels = nullptr;      // [rows]
  const float* lse = nullptr;           // [rows] log-sum-exp written by the forward
  const float* grad_per_row = nullptr;  // [rows] upstream gradient of each row's loss, or nullptr (= 1)
  int64_t grad_per_row_stride = 1;      // elements between rows' gradients; 0: grad_per_row[0] for every row
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

// The reduction of the per-row losses (PyTorch's reduction='sum' / 'mean'), one launch of one
// cluster (kernels/cross_entropy/cross_entropy_reduce.cu):
//
//   sum:  out = sum_r loss[r]                       row_gradient = 1
//   mean: out = sum_r loss[r] / count               row_gradient = 1 / count
//         count = #{r : labels[r] != ignore_index}   (0 rows counted: out NaN, row_gradient inf,
//                                                     as PyTorch; ignored rows get gradient 0 anyway)
//
// row_gradient is d out / d loss[r] of every non-ignored row: pass it as grad_per_row with
// grad_per_row_stride 0 to the backward (times the upstream gradient of `out`), or, for a mean,
// to a fused forward run AFTER a count-only call (loss = nullptr: only row_gradient).
// The sum is accumulated in fp64 in a fixed order that depends on `rows` alone (every run gives
// the same bits), then rounded to fp32 and from there to out_type (for a 16-bit out_type, two
// roundings). Ignored rows' losses are 0 (the forward's
// contract) and are summed like any other.
enum class cross_entropy_reduction { sum, mean };

struct cross_entropy_reduce_args {
  const float* loss = nullptr;      // [rows] fp32 per-row losses, or nullptr: count only (no `out`)
  const int64_t* labels = nullptr;  // [rows]; needed for mean (the count), unused for sum
  int64_t rows = 0;                 // 0 to 2^27 - 1 (0 rows: sum 0, mean NaN)
  int64_t ignore_index = cross_entropy_default_ignore_index;
  cross_entropy_reduction reduction = cross_entropy_reduction::mean;
  void* out = nullptr;              // scalar of out_type (bf16, fp16, fp32); required iff loss is given
                                    // (with rows 0 it may come alone: sum 0, mean NaN)
  dtype out_type = dtype::fp32;
  float* row_gradient = nullptr;    // optional fp32 scalar: d out / d loss[r] (see above)
};

// Throw tilekit::invalid_argument for the first invalid field (no CUDA call).
void validate(const cross_entropy_forward_args& args);
void validate(const cross_entropy_backward_args& args);
void validate(const cross_entropy_reduce_args& args);

void cross_entropy_forward(const cross_entropy_forward_args& args, cudaStream_t stream);
void cross_entropy_backward(const cross_entropy_backward_args& args, cudaStream_t stream);
void cross_entropy_reduce(const cross_entropy_reduce_args& args, cudaStream_t stream);

}  // namespace tilekit::kernels
