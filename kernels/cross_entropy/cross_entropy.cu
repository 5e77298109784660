// Cross-entropy forward (optionally with dlogits) and backward (see cross_entropy.h for the
// contract, softmax/row_schedule.cuh for how rows map onto warps, CTAs and clusters).
//
// Forward, per row, one read of the logits (and with the fused gradient one write of dlogits):
//   1. load this thread's columns into registers (padding = -inf);
//   2. thread-local statistics: m = max, s = sum exp(x - m) (the exponentials stay in the
//      registers), the sum of the logits (label smoothing only), and the label's logit (one
//      scalar load by the row's leader thread);
//   3. ONE reduction of these four numbers (ce_stats_op: an online-softmax combine for
//      (m, s), plain sums for the others), so the row needs a single CTA/cluster exchange;
//   4. lse = M + log S; the leader writes loss and lse; with the fused gradient every thread
//      turns its exponentials into dlogits = g * (p * (1 + 2 z lse) - eps / V - (1 - eps) [c == t]).
// Backward: every element is independent once lse is known, so it is a streaming map over
// [rows, vocab] blocks (no reduction): read logits, write dlogits.
#include "cross_entropy/cross_entropy.h"

#include <algorithm>
#include <limits>

#include "softmax/arg_checks.h"
#include "softmax/row_schedule.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"

namespace tilekit::kernels {

namespace detail {
namespace {

// Written as the loss (and gradient) of rows whose label is neither ignore_index nor in [0, vocab).
constexpr float invalid_label_marker = std::numeric_limits<float>::quiet_NaN();

// The per-row statistics of the forward, reduced together (16 bytes: one st.async per CTA at
// the cluster level).
struct ce_stats {
  float max;          // max of the logits
  float sum_exp;      // sum of exp(logit - max)
  float sum_logits;   // sum of the logits (only with label smoothing, else 0)
  float label_logit;  // the label's logit (contributed by one thread, 0 elsewhere)
};

struct ce_stats_op {
  TILEKIT_HOST_DEVICE static constexpr ce_stats identity() { return {-infinity, 0.f, 0.f, 0.f}; }
  TILEKIT_DEVICE TILEKIT_INLINE ce_stats operator()(ce_stats a, ce_stats b) const {
    const max_sum m = max_sum_op{}(max_sum{a.max, a.sum_exp}, max_sum{b.max, b.sum_exp});
    return {m.max, m.sum, a.sum_logits + b.sum_logits, a.label_logit + b.label_logit};
  }
};

struct ce_forward_params {
  const void* logits;
  const int64_t* labels;
  float* loss;
  float* lse;
  void* dlogits;
  const float* grad_per_row;
  int64_t rows;
  int vocab;
  int64_t logits_row_stride;
  int64_t dlogits_row_stride;
  int64_t ignore_index;
  float label_smoothing;
  float z_loss_weight;
  float grad_scale;
};

struct ce_backward_params {
  void* dlogits;
  const void* logits;
  const int64_t* labels;
  const float* lse;
  const float* grad_per_row;
  int64_t rows;
  int vocab;
  int64_t logits_row_stride;
  int64_t dlogits_row_stride;
  int64_t ignore_index;
  float label_smoothing;
  float z_loss_weight;
  float grad_scale;
};

// Upstream gradient of a row: 0 for ignored rows, NaN for invalid labels.
TILEKIT_DEVICE TILEKIT_INLINE float row_gradient(const float* grad_per_row, float grad_scale, int64_t row, bool ignored,
                                                 bool label_in_range) {
  if (ignored) return 0.f;
  if (!label_in_range) return invalid_label_marker;
  return grad_per_row ? grad_scale * grad_per_row[row] : grad_scale;
}

// The register (0..Layout::elements-1) of `thread` that holds column `column` of the chunk, or
// -1 when another thread holds it (or column < 0). The output loops then compare a constant
// register index with one integer instead of recomputing every register's column.
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE int register_of_column(int column, int thread) {
  if (column < 0) return -1;
  const int group = column / Layout::group_elements;
  const int group_in_thread = group / Layout::threads;
  if (group % Layout::threads != thread || group_in_thread >= Layout::groups) return -1;
  return group_in_thread * Layout::group_elements + column % Layout::group_elements;
}

template <int ConfigIndex, class T, bool WriteGradient>
__global__ void __launch_bounds__(row_schedule<ConfigIndex, T>::cta_threads)
    cross_entropy_forward_kernel(const ce_forward_params p) {
  using schedule = row_schedule<ConfigIndex, T>;
  using layout = typename schedule::layout;
  __shared__ typename schedule::template reduce_storage<ce_stats> storage;
  schedule::begin(storage);
  const auto at = schedule::locate();
  if (at.row < p.rows) {
    const int64_t label = p.labels[at.row];
    const bool ignored = label == p.ignore_index;
    const bool label_in_range = label >= 0 && label < p.vocab;
    const int chunk_cols = p.vocab - at.chunk_start;
    const T* logits_row = static_cast<const T*>(p.logits) + at.row * p.logits_row_stride;

    // One thread fetches the label's logit (its line is in L2 a moment later anyway) and feeds
    // it to the reduction; everyone else contributes 0.
    float label_logit = 0.f;
    if (at.leader && label_in_range && !ignored) label_logit = convert<float>(logits_row[label]);

    float values[layout::elements];
    load_row<layout, cache_policy::streaming>(values, logits_row + at.chunk_start, chunk_cols, at.thread, -infinity);
    float my_sum_logits = 0.f;
    if (p.label_smoothing != 0.f) {
#pragma unroll
      for (int j = 0; j < layout::elements; ++j)
        if (layout::column(at.thread, j) < chunk_cols) my_sum_logits += values[j];
    }
    float my_max = -infinity;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) my_max = fmaxf(my_max, values[j]);
    float my_sum_exp = 0.f;
    if (my_max != -infinity) {
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) {
        values[j] = exp2_fast((values[j] - my_max) * log2e);
        my_sum_exp += values[j];
      }
    } else {
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) values[j] = 0.f;  // see softmax.cu
    }

    const ce_stats row =
        schedule::reduce(ce_stats{my_max, my_sum_exp, my_sum_logits, label_logit}, ce_stats_op{}, storage);
    const float lse = row.max + logf(row.sum_exp);
    const float smoothing = p.label_smoothing;
    if (at.leader) {
      if (p.lse) p.lse[at.row] = lse;
      float loss = 0.f;
      if (!ignored) {
        loss = label_in_range ? lse - (1.f - smoothing) * row.label_logit -
                                    smoothing * (row.sum_logits / float(p.vocab)) + p.z_loss_weight * lse * lse
                              : invalid_label_marker;
      }
      p.loss[at.row] = loss;
    }

    if constexpr (WriteGradient) {
      const float g = row_gradient(p.grad_per_row, p.grad_scale, at.row, ignored, label_in_range);
      // p_j = values[j] * exp(my_max - M) / S; d/dx_j of z lse^2 = 2 z lse p_j.
      const float probability_scale =
          exp2_fast((my_max - row.max) * log2e) / row.sum_exp * (g * (1.f + 2.f * p.z_loss_weight * lse));
      const float uniform_target = g * smoothing / float(p.vocab);
      const float label_target = g * (1.f - smoothing);
      // The label's column inside this CTA's chunk (-1 when elsewhere, ignored or invalid).
      const int64_t label_in_chunk = label - at.chunk_start;
      const int label_column =
          label_in_range && !ignored && label_in_chunk >= 0 && label_in_chunk < schedule::chunk_columns
              ? int(label_in_chunk)
              : -1;
      const int label_register = register_of_column<layout>(label_column, at.thread);
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) {
        const float target = j == label_register ? label_target + uniform_target : uniform_target;
        values[j] = fmaf(values[j], probability_scale, -target);
      }
      T* dlogits_row = static_cast<T*>(p.dlogits) + at.row * p.dlogits_row_stride + at.chunk_start;
      store_row<layout, cache_policy::streaming>(dlogits_row, values, chunk_cols, at.thread);
    }
  }
  schedule::end();
}

// Backward: a [rows, vocab] map. CTA (blockIdx.x, blockIdx.y) handles the column chunk
// blockIdx.x of rows blockIdx.y, blockIdx.y + gridDim.y, ... (gridDim.y <= 65535).
constexpr int backward_threads = 256;
constexpr int backward_groups_per_thread = 2;  // 2 x 16-byte loads in flight per thread
constexpr int64_t max_grid_y = 65535;

template <class T>
using backward_layout = row_layout<backward_threads, backward_groups_per_thread, vector_elements<T>>;

template <class T>
__global__ void __launch_bounds__(backward_threads) cross_entropy_backward_kernel(const ce_backward_params p) {
  using layout = backward_layout<T>;
  const int chunk_start = int(blockIdx.x) * layout::columns;
  const int chunk_cols = p.vocab - chunk_start;
  const float smoothing = p.label_smoothing;
  for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
    const int64_t label = p.labels[row];
    const bool ignored = label == p.ignore_index;
    const bool label_in_range = label >= 0 && label < p.vocab;
    const float lse = p.lse[row];
    const float g = row_gradient(p.grad_per_row, p.grad_scale, row, ignored, label_in_range);
    const float probability_scale = g * (1.f + 2.f * p.z_loss_weight * lse);
    const float uniform_target = g * smoothing / float(p.vocab);
    const float label_target = g * (1.f - smoothing);
    const int64_t label_in_chunk = label - chunk_start;
    const int label_column = label_in_range && !ignored && label_in_chunk >= 0 && label_in_chunk < layout::columns
                                 ? int(label_in_chunk)
                                 : -1;

    const int label_register = register_of_column<layout>(label_column, int(threadIdx.x));

    float values[layout::elements];
    const T* logits_row = static_cast<const T*>(p.logits) + row * p.logits_row_stride + chunk_start;
    load_row<layout, cache_policy::streaming>(values, logits_row, chunk_cols, int(threadIdx.x), 0.f);
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) {
      const float probability = exp2_fast((values[j] - lse) * log2e);
      const float target = j == label_register ? label_target + uniform_target : uniform_target;
      values[j] = fmaf(probability, probability_scale, -target);
    }
    T* dlogits_row = static_cast<T*>(p.dlogits) + row * p.dlogits_row_stride + chunk_start;
    store_row<layout, cache_policy::streaming>(dlogits_row, values, chunk_cols, int(threadIdx.x));
  }
}

template <class F>
void dispatch_type(dtype type, F&& f) {
  switch (type) {
    case dtype::bf16:
      f.template operator()<bf16>();
      break;
    case dtype::fp16:
      f.template operator()<fp16>();
      break;
    default:
      f.template operator()<float>();
      break;
  }
}

void check_loss_options(float label_smoothing, float z_loss_weight) {
  check_finite(label_smoothing, "label_smoothing");
  TILEKIT_CHECK_ARG(label_smoothing >= 0.f && label_smoothing <= 1.f, "label_smoothing: must be in [0, 1], got ",
                    label_smoothing);
  check_finite(z_loss_weight, "z_loss_weight");
  TILEKIT_CHECK_ARG(z_loss_weight >= 0.f, "z_loss_weight: must be >= 0, got ", z_loss_weight);
}

void check_upstream_gradient(const float* grad_per_row, float grad_scale) {
  if (grad_per_row) check_pointer(grad_per_row, "grad_per_row", sizeof(float));
  check_finite(grad_scale, "grad_scale");
}

}  // namespace
}  // namespace detail

void validate(const cross_entropy_forward_args& a) {
  detail::check_type(a.type, "type");
  const int bytes = dtype_bytes(a.type);
  detail::check_pointer(a.logits, "logits", bytes);
  detail::check_pointer(a.labels, "labels", sizeof(int64_t));
  detail::check_pointer(a.loss, "loss", sizeof(float));
  if (a.lse) detail::check_pointer(a.lse, "lse", sizeof(float));
  detail::check_rows(a.rows);
  detail::check_cols(a.vocab, cross_entropy_max_vocab, "vocab");
  detail::check_row_stride(a.logits_row_stride, a.rows, a.vocab, "logits_row_stride");
  detail::check_loss_options(a.label_smoothing, a.z_loss_weight);
  if (a.dlogits) {
    detail::check_pointer(a.dlogits, "dlogits", bytes);
    detail::check_row_stride(a.dlogits_row_stride, a.rows, a.vocab, "dlogits_row_stride");
    detail::check_alias(a.dlogits, a.dlogits_row_stride, a.logits, a.logits_row_stride, "dlogits");
    detail::check_upstream_gradient(a.grad_per_row, a.grad_scale);
  }
}

void validate(const cross_entropy_backward_args& a) {
  detail::check_type(a.type, "type");
  const int bytes = dtype_bytes(a.type);
  detail::check_pointer(a.dlogits, "dlogits", bytes);
  detail::check_pointer(a.logits, "logits", bytes);
  detail::check_pointer(a.labels, "labels", sizeof(int64_t));
  detail::check_pointer(a.lse, "lse", sizeof(float));
  detail::check_upstream_gradient(a.grad_per_row, a.grad_scale);
  detail::check_rows(a.rows);
  detail::check_cols(a.vocab, cross_entropy_max_vocab, "vocab");
  detail::check_row_stride(a.logits_row_stride, a.rows, a.vocab, "logits_row_stride");
  detail::check_row_stride(a.dlogits_row_stride, a.rows, a.vocab, "dlogits_row_stride");
  detail::check_alias(a.dlogits, a.dlogits_row_stride, a.logits, a.logits_row_stride, "dlogits");
  detail::check_loss_options(a.label_smoothing, a.z_loss_weight);
}

void cross_entropy_forward(const cross_entropy_forward_args& a, cudaStream_t stream) {
  validate(a);
  const detail::ce_forward_params params{a.logits,
                                         a.labels,
                                         a.loss,
                                         a.lse,
                                         a.dlogits,
                                         a.grad_per_row,
                                         a.rows,
                                         int(a.vocab),
                                         a.logits_row_stride,
                                         a.dlogits_row_stride,
                                         a.ignore_index,
                                         a.label_smoothing,
                                         a.z_loss_weight,
                                         a.grad_scale};
  const bool write_gradient = a.dlogits != nullptr;
  detail::dispatch_type(a.type, [&]<class T>() {
    detail::dispatch_row_config(detail::row_config_index(a.vocab), [&]<int I>() {
      using schedule = detail::row_schedule<I, T>;
      if (write_gradient)
        detail::launch_rows<schedule>(detail::cross_entropy_forward_kernel<I, T, true>, a.rows, stream, params);
      else
        detail::launch_rows<schedule>(detail::cross_entropy_forward_kernel<I, T, false>, a.rows, stream, params);
    });
  });
}

void cross_entropy_backward(const cross_entropy_backward_args& a, cudaStream_t stream) {
  validate(a);
  const detail::ce_backward_params params{a.dlogits,
                                          a.logits,
                                          a.labels,
                                          a.lse,
                                          a.grad_per_row,
                                          a.rows,
                                          int(a.vocab),
                                          a.logits_row_stride,
                                          a.dlogits_row_stride,
                                          a.ignore_index,
                                          a.label_smoothing,
                                          a.z_loss_weight,
                                          a.grad_scale};
  detail::dispatch_type(a.type, [&]<class T>() {
    const unsigned chunks = unsigned(ceil_div(a.vocab, int64_t(detail::backward_layout<T>::columns)));
    const unsigned row_blocks = unsigned(std::min(a.rows, detail::max_grid_y));
    detail::cross_entropy_backward_kernel<T><<<dim3(chunks, row_blocks), detail::backward_threads, 0, stream>>>(params);
    TILEKIT_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

}  // namespace tilekit::kernels
