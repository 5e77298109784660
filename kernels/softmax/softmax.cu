// Softmax forward and backward along the last dimension (see softmax.h for the contract and
// common/row_kernel.cuh for how rows are streamed and mapped onto warps, CTAs and clusters).
//
// Forward, per row, one read of x and one write of y:
//   1. load this thread's columns into registers (padding = -inf, which exp maps to 0);
//   2. m = max over the warp (shuffles); e_j = exp(x_j - m) in place (computed in base 2:
//      2^(x_j log2 e - b), b = m log2 e rounded); s = warp sum of e_j (warp_exp_sum);
//   3. one reduction of the warps' pairs (b, s) with the online-softmax combine (exp2_sum_op):
//      (B, S) = (row base, sum_j 2^(x_j log2 e - B));
//   4. y_j = e_j * 2^(b - B) / S, stored.
// 16-bit rows of 32K columns and more (wide_row_table): 64 columns per thread, so a row
// needs half the cluster and half the cluster reductions per byte; the row stays in registers
// as packed pairs (32 registers), steps 2-3 sum the exponentials without keeping them, and
// step 4 recomputes them as y_j = 2^(x_j log2 e - (B + log2 S)) (one FFMA and one MUFU.EX2);
// from 64K columns on, one row later (deferred rows, see deferred_rows below).
// Backward, per row, one read of y and dy and one write of dx:
//   dot = sum_j y_j * dy_j (one sum reduction), dx_j = y_j * (dy_j - dot).
#include "softmax/softmax.h"

#include "common/arg_checks.h"
#include "common/row_kernel.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"

namespace tilekit::kernels {

namespace detail {
namespace {

struct softmax_forward_params {
  void* y;
  const void* x;
  int64_t rows;
  int cols;
  int64_t x_row_stride;
  int64_t y_row_stride;
};

struct softmax_backward_params {
  void* dx;
  const void* dy;
  const void* y;
  int64_t rows;
  int cols;
  int64_t dx_row_stride;
  int64_t dy_row_stride;
  int64_t y_row_stride;
};

// Softmax forward as a row op (common/row_kernel.cuh runs it over the rows).
template <class T>
struct softmax_forward_op : row_op_defaults {
  using element = T;
  using reduce_value = exp2_sum;
  using params = softmax_forward_params;
  static constexpr int inputs = 1;
  // 16-bit rows: from 32K columns on, 64 columns per thread held as packed pairs (clusters of 1,
  // 2, 4, 8 CTAs instead of 2, 4, 8, 16 for rows of 32K, 64K, 128K, 256K): the cluster
  // reduction of a row is not overlapped with anything, and half the cluster halves its share.
  // (Rows of 64K in one CTA instead, read as two segments of 64 columns per thread and held in
  // 64 registers of pairs until the row's total is in, measured the same as the cluster of 2:
  // 0.865-0.872 against 0.874-0.876x copy, with a posted or a CTA-barrier reduction; H200,
  // 2026-12-01. What 64K loses against 32K, 0.94, is not the cluster.)
  static constexpr const row_table& table = is_16bit_float<T> ? wide_row_table : default_row_table;
  // Clusters claim their items (row_item_order, "published"). bf16, H200, 2026-12-01, same-binary
  // A/B static -> claimed: 64K (2 CTAs) 0.867 -> 0.903x copy (deferred; undeferred 0.879 ->
  // 0.883), 128K (4) 0.870 -> 0.901, 256K (8) 0.888 -> 0.898.
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas <= 8 ? item_order::claimed : item_order::fixed;
  }
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int) {
    return {static_cast<const T*>(p.x), p.x_row_stride};
  }

  // Rows held as packed pairs over clusters (64K columns and up) are deferred rows
  // (row_kernel.cuh): each warp posts its (base, sum), keeps its pairs and goes on with the
  // next row; the row's y is written one row later, so no warp or CTA of a row waits for the
  // others. Measured on the H200 (2026-11-30, same-run A/B): 128K 0.80 -> 0.87x copy, 256K
  // 0.79 -> 0.87x; but 32K (one CTA) 0.94 -> 0.91, which stays undeferred. 64K (2 CTAs) lost
  // too in the static order (0.88 -> 0.87) and was left undeferred until the clusters claimed
  // their items: claimed, deferred 0.903 against 0.877 undeferred (2026-12-01, 05:10 UTC).
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(row_config c) {
    return is_16bit_float<T> && c.pairs && c.cluster_ctas >= 2;
  }
  // The deferred rows take two stages of 64 KiB, not the three that fit. Measured (bf16, H200,
  // 2026-12-04, same-run A/B, two rounds, x copy): 64K / 128K / 256K 0.902 / 0.902-0.903 / 0.899
  // -> 0.907 / 0.903 / 0.907-0.908 (+0.5 / +0.1 / +0.9-1.0%). (The cross-entropy forward's
  // deferred and streamed rows, 8K-256K, lost 1.7-3% with two stages instead of three, the same
  // run; the LayerNorm forward at 256K lost 2.2% with three stages instead of two.)
  TILEKIT_HOST_DEVICE static constexpr int max_stages(row_config c) {
    return deferred_rows(c) ? 2 : max_stream_stages;
  }
  template <class S>
  struct pending {
    packed_t<T> pairs[S::layout::elements / 2];  // this thread's columns of x
  };
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE exp2_sum partial(const params& p, const row_place& at, int64_t, row_scalars,
                                                 const stage_row<S> (&in)[1], pending<S>& held) {
    load_row_pairs_aligned<typename S::layout>(held.pairs, in[0], at.cols, at.thread, convert<T>(-infinity));
    return warp_exp_sum(held.pairs);
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE exp2_sum total(const params&, const exp2_sum* partials, uint32_t count) const {
    return reduce_slots(partials, count, exp2_sum_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(const params& p, const row_place& at, int64_t row, const pending<S>& held,
                                            const exp2_sum& total) {
    write_from_pairs<S>(p, at, row, held.pairs, total);
  }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, row_scalars,
                                         const stage_row<S> (&in)[1], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = at.cols;
    T* out = static_cast<T*>(p.y) + row * p.y_row_stride + at.col0;
    if constexpr (packed_rows<S>) {
      packed_t<T> pairs[layout::elements / 2];
      load_row_pairs_aligned<layout>(pairs, in[0], cols, at.thread, convert<T>(-infinity));
      write_from_pairs<S>(p, at, row, pairs, ctx.reduce_warps(warp_exp_sum(pairs), exp2_sum_op{}));
      return;
    }
    float values[layout::elements];
    load_row_aligned<layout>(values, in[0], cols, at.thread, -infinity);
    // values := exp(x - warp max) in base 2; only the warps' (base, sum) pairs take the online
    // combine.
    const exp2_sum warp = warp_exp_sum(values);
    const exp2_sum total = ctx.reduce_warps(warp, exp2_sum_op{});
    // 2^(warp base - row base) rescales this warp's exponentials to the row's base, as the
    // reduction rescaled its sum (0 when the warp holds only padding).
    const float scale = exp2_fast(warp.base - total.base) / total.sum;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) values[j] *= scale;
    store_row<layout, cache_policy::streaming, S::shifted>(out, values, cols, at.thread);
  }

 private:
  // y from the row's pairs and its total (B, S).
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE static void write_from_pairs(const params& p, const row_place& at, int64_t row,
                                                             const packed_t<T> (&pairs)[S::layout::elements / 2],
                                                             const exp2_sum& total) {
    using layout = typename S::layout;
    // y = 2^(x log2 e - B) / S = 2^(x log2 e - shift): one rounding of B + log2 S, relative
    // error ~ulp(B) in y (~1e-5 at logits ~ 500), far below a 16-bit output's.
    const float shift = total.base + log2_fast(total.sum);
    // Computed and stored in blocks of groups (store_row_from_pairs): deferred rows, which hold
    // the next row's pairs meanwhile, one 16-byte group at a time (H200, 2026-12-01, same-run
    // A/B: 128K / 256K 0.866 / 0.876 -> 0.875 / 0.889x copy); the others the whole row at once,
    // which measured faster for them (32K: 0.936 against 0.910 by groups).
    store_row_from_pairs<layout, S::defers ? 1 : layout::groups, cache_policy::streaming, S::shifted>(
        static_cast<T*>(p.y) + row * p.y_row_stride + at.col0, pairs,
        [shift](float x) { return exp2_fast(fmaf(x, log2e, -shift)); }, at.cols, at.thread);
  }
};

template <class T>
struct softmax_backward_op : row_op_defaults {
  using element = T;
  using reduce_value = float;
  using params = softmax_backward_params;
  static constexpr int inputs = 2;  // y, dy
  // Clusters of up to 8 CTAs claim their items (as the forward). bf16, H200, 2026-12-01, static
  // -> claimed: 32K (2 CTAs) 0.934 -> 0.985x copy, 64K (4) 0.952 -> 0.990, 128K (8) 0.965 ->
  // 0.990; 256K (16) even, 0.990 either way.
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas <= 8 ? item_order::claimed : item_order::fixed;
  }
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int i) {
    return i == 0 ? row_source<T>{static_cast<const T*>(p.y), p.y_row_stride}
                  : row_source<T>{static_cast<const T*>(p.dy), p.dy_row_stride};
  }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, row_scalars,
                                         const stage_row<S> (&in)[2], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = at.cols;
    float y[layout::elements], dy[layout::elements];
    load_row_aligned<layout>(y, in[0], cols, at.thread, 0.f);
    load_row_aligned<layout>(dy, in[1], cols, at.thread, 0.f);
    float my_dot = 0.f;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) my_dot = fmaf(y[j], dy[j], my_dot);
    const float dot = ctx.reduce(my_dot, sum_op{});
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) y[j] *= dy[j] - dot;
    store_row<layout, cache_policy::streaming, S::shifted>(static_cast<T*>(p.dx) + row * p.dx_row_stride + at.col0, y,
                                                           cols, at.thread);
  }
};

// Calls f.template operator()<T>() for the element type `type` (validated before).
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

}  // namespace
}  // namespace detail

void validate(const softmax_forward_args& a) {
  detail::check_type(a.type, "type");
  const int bytes = dtype_bytes(a.type);
  detail::check_pointer(a.y, "y", bytes);
  detail::check_pointer(a.x, "x", bytes);
  detail::check_rows(a.rows);
  detail::check_cols(a.cols, softmax_max_cols, "cols");
  detail::check_row_stride(a.x_row_stride, a.rows, a.cols, "x_row_stride");
  detail::check_row_stride(a.y_row_stride, a.rows, a.cols, "y_row_stride");
  detail::check_alias(a.y, a.y_row_stride, a.x, a.x_row_stride, "y");
}

void validate(const softmax_backward_args& a) {
  detail::check_type(a.type, "type");
  const int bytes = dtype_bytes(a.type);
  detail::check_pointer(a.dx, "dx", bytes);
  detail::check_pointer(a.dy, "dy", bytes);
  detail::check_pointer(a.y, "y", bytes);
  detail::check_rows(a.rows);
  detail::check_cols(a.cols, softmax_max_cols, "cols");
  detail::check_row_stride(a.dx_row_stride, a.rows, a.cols, "dx_row_stride");
  detail::check_row_stride(a.dy_row_stride, a.rows, a.cols, "dy_row_stride");
  detail::check_row_stride(a.y_row_stride, a.rows, a.cols, "y_row_stride");
  detail::check_alias(a.dx, a.dx_row_stride, a.dy, a.dy_row_stride, "dx");
  detail::check_alias(a.dx, a.dx_row_stride, a.y, a.y_row_stride, "dx");
}

void softmax_forward(const softmax_forward_args& a, cudaStream_t stream) {
  validate(a);
  const detail::softmax_forward_params params{a.y, a.x, a.rows, int(a.cols), a.x_row_stride, a.y_row_stride};
  detail::dispatch_type(a.type, [&]<class T>() {
    detail::run_rows<detail::softmax_forward_op<T>>(params, stream);
  });
}

void softmax_backward(const softmax_backward_args& a, cudaStream_t stream) {
  validate(a);
  const detail::softmax_backward_params params{
      a.dx, a.dy, a.y, a.rows, int(a.cols), a.dx_row_stride, a.dy_row_stride, a.y_row_stride};
  detail::dispatch_type(a.type, [&]<class T>() {
    detail::run_rows<detail::softmax_backward_op<T>>(params, stream);
  });
}

}  // namespace tilekit::kernels
