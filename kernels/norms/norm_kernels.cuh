#pragma once
// Device code and launch plumbing shared by the RMSNorm / LayerNorm forward and backward
// (internal to kernels/norms; the public API is norms.h).
//
// Plan: every input byte is read once from HBM. Rows stream through shared memory and are
// spread over a warp, a group of warps, a CTA or a cluster of CTAs by the row kernel
// (common/row_kernel.cuh: size classes, persistent workers, bulk-copy prefetch, reduction
// ladder); this file holds only the math of one row, as row ops. Register layouts come from
// tilekit/ops/row_io.cuh and depend only on column indices, so x, w, b, dy and the outputs of a
// row line up in the same registers whatever their dtypes and alignments.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/arg_checks.h"
#include "common/row_kernel.cuh"
#include "norms/norms.h"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit::kernels::norms_detail {
using namespace ::tilekit::kernels::detail;  // the row kernel: row_config, row_place, run_rows, ...

enum class norm_kind { rms, layer };

// ---------------------------------------------------------------------------------------------
// Kernel parameters (one struct for both norms; unused fields are null).
// ---------------------------------------------------------------------------------------------
struct forward_params {
  void* y;
  int64_t y_stride;
  const void* x;
  int64_t x_stride;
  const void* weight;
  const void* bias;
  const void* residual;
  int64_t residual_stride;
  void* residual_out;
  int64_t residual_out_stride;
  float* mean;
  float* rstd;
  int64_t rows;
  int cols;
  float eps;
};

struct backward_params {
  void* dx;
  int64_t dx_stride;
  const void* dy;
  int64_t dy_stride;
  const void* x;
  int64_t x_stride;
  const void* weight;
  const float* mean;
  const float* rstd;
  const void* dresidual_out;
  int64_t dresidual_out_stride;
  float* dweight_partials;  // [partials, cols] or null: one row per (worker, row group)
  float* dbias_partials;    // [partials, cols] or null
  int64_t rows;
  int cols;
  float eps;
};

// ---------------------------------------------------------------------------------------------
// Host-side validation helpers (throw before any CUDA call).
// ---------------------------------------------------------------------------------------------
inline bool is_input_dtype(dtype t) { return t == dtype::bf16 || t == dtype::fp16 || t == dtype::fp32; }

inline void check_shape(int64_t rows, int64_t cols) {
  TILEKIT_CHECK_ARG(rows >= 1, "rows must be >= 1, got ", rows);
  TILEKIT_CHECK_ARG(cols >= 1 && cols <= max_norm_cols, "cols must be in [1, ", max_norm_cols, "], got ", cols);
  // The softmax's and cross-entropy's bound (an API bound: common/arg_checks.h).
  TILEKIT_CHECK_ARG(rows <= max_rows, "rows must be <= ", max_rows, ", got ", rows);
}
inline void check_dtypes(dtype x_dtype, dtype weight_dtype) {
  TILEKIT_CHECK_ARG(is_input_dtype(x_dtype), "x_dtype must be bf16, fp16 or fp32, got ", dtype_name(x_dtype));
  TILEKIT_CHECK_ARG(weight_dtype == x_dtype || weight_dtype == dtype::fp32,
                    "weight_dtype must be x_dtype (", dtype_name(x_dtype), ") or fp32, got ",
                    dtype_name(weight_dtype));
}
// A [rows, cols] matrix: stride >= cols, pointer aligned to its element (rows that are not
// 16-byte aligned: streamed inputs take the shifted stream, common/row_kernel.cuh, "Unaligned
// matrices"; other operands and outputs are accessed element by element, or realigned).
inline void check_matrix(const void* p, int64_t stride, int64_t cols, dtype t, const char* name, bool required) {
  if (!required && p == nullptr) return;
  TILEKIT_CHECK_ARG(p != nullptr, name, " must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(p) % uintptr_t(dtype_bytes(t)) == 0, name, " must be aligned to its ",
                    dtype_bytes(t), "-byte elements");
  TILEKIT_CHECK_ARG(stride >= cols, name, " row stride must be >= cols (", cols, "), got ", stride);
}
inline void check_vector(const void* p, dtype t, const char* name, bool required) {
  if (!required && p == nullptr) return;
  TILEKIT_CHECK_ARG(p != nullptr, name, " must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(p) % uintptr_t(dtype_bytes(t)) == 0, name, " must be aligned to its ",
                    dtype_bytes(t), "-byte elements");
}
inline void check_eps(float eps) {
  TILEKIT_CHECK_ARG(eps > 0.0f && eps < infinity, "eps must be positive and finite, got ", eps);
}

// Partial rows of one reduced gradient: one per row group of every worker (the worker count of a
// launch is at most max_row_workers: one per SM, fewer for few rows).
inline int64_t max_backward_partials(int64_t rows, int64_t cols) {
  return detail::max_row_workers(rows, cols) * detail::row_groups(cols);
}
// Bytes of fp32 partials: one [max partials, cols] array per reduced gradient.
inline size_t backward_workspace_bytes(int64_t rows, int64_t cols, int gradients) {
  check_shape(rows, cols);
  return size_t(gradients) * size_t(max_backward_partials(rows, cols)) * size_t(cols) * sizeof(float);
}

// Call f.template operator()<T, W>() for the run-time dtypes (validated before).
// TILEKIT_DEV_BF16_ONLY: bf16 / bf16 only, for quick benchmark builds (kernels/README.md).
template <class F>
void dispatch_dtypes(dtype x_dtype, dtype weight_dtype, F&& f) {
  const bool fp32_weight = weight_dtype == dtype::fp32;
#if TILEKIT_DEV_BF16_ONLY
  TILEKIT_CHECK_ARG(x_dtype == dtype::bf16 && !fp32_weight, "this build has bf16 norms only");
  f.template operator()<bf16, bf16>();
#else
  switch (x_dtype) {
    case dtype::bf16: fp32_weight ? f.template operator()<bf16, float>() : f.template operator()<bf16, bf16>(); break;
    case dtype::fp16: fp32_weight ? f.template operator()<fp16, float>() : f.template operator()<fp16, fp16>(); break;
    default: f.template operator()<float, float>(); break;
  }
#endif
}
#if defined(__CUDACC__)

// Sum of two floats at once (LayerNorm backward reduces sum(g) and sum(g * xhat) together).
struct sum2_op {
  TILEKIT_DEVICE TILEKIT_INLINE float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
  TILEKIT_HOST_DEVICE static constexpr float2 identity() { return float2{0.0f, 0.0f}; }
};

// LayerNorm moments of a row from partials of its slices (the CTAs of a cluster, or the warps
// of a deferred row), in ONE exchange (two would each wait for the slowest slice; measured on
// the H200, those waits, not bytes or math, are what wide rows lose). Each slice makes both
// passes over its own columns: its mean m_i, then the sums of d = x - m_i and d^2 (s_i, q_i;
// s_i is not 0 but the rounding error of m_i, which the fold corrects: the corrected two-pass
// algorithm), and sends the partial (m_i, s_i, q_i, n_i). The fold takes K = m_0 (the first
// slice's mean) as the shift, e_i = m_i - K, and sums exactly what the row's sums around K are:
//   S = sum_i (n_i e_i + s_i)                      = sum(x - K)
//   Q = sum_i (q_i + e_i (2 s_i + n_i e_i))        = sum((x - K)^2)
//   mean = K + S / n,   M2 = Q - S^2 / n
// No term is large: e_i and s_i are deviations, and K is within sqrt(n / n_0) standard
// deviations of the mean (Cauchy-Schwarz on slice 0), so Q <= (1 + n / n_0) M2 and the
// subtraction loses at most log2(1 + n / n_0) bits against the ~1e-7 relative error of Q: 4
// for 16 CTAs (8 if the 256 warps of a 256K row were folded at once and its first 1024
// columns alone held all of its variance, ~1.5e-5 relative in M2; deferred rows fold each
// CTA's warps first, combine_moments below); rows of one distribution lose ~nothing. A first
// pass for a better shift (K = sum(n_i m_i + s_i) / n) measured 4-13% slower at 32K-256K
// columns (every warp of a deferred row reads its 16 x CTAs partials once more; H200,
// 2026-11-30).
// Every thread folds the same partials in the same order (reduce_slots): the same bits in every
// lane, warp and CTA.
struct layer_partial_op {  // CTA reduction of (m_c, s, q, n_c): m_c and n_c are CTA-uniform
  TILEKIT_DEVICE TILEKIT_INLINE float4 operator()(float4 a, float4 b) const {
    return make_float4(a.x, a.y + b.y, a.z + b.z, a.w);
  }
};
// A partial's (sum(x - shift), sum((x - shift)^2)) over its slice: e = m_i - shift,
// (n_i e + s_i, q_i + e (2 s_i + n_i e)).
TILEKIT_DEVICE TILEKIT_INLINE float2 recentred(const float4& part, float shift) {
  const float e = part.x - shift;
  return make_float2(fmaf(part.w, e, part.y), part.z + e * fmaf(part.w, e, 2.0f * part.y));
}
// (mean, M2 / n) of the row from `count` partials (m_i, s_i, q_i, n_i).
TILEKIT_DEVICE TILEKIT_INLINE float2 fold_moments(const float4* partials, uint32_t count, float inv_cols) {
  const float shift = partials[0].x;
  // (S, Q): each lane re-centres its partials, a butterfly sums them (reduce_slots).
  const float2 sums =
      reduce_slots(partials, count, sum2_op{}, [shift](const float4& part) { return recentred(part, shift); });
  const float d = sums.x * inv_cols;
  return make_float2(shift + d, fmaxf(fmaf(-d, sums.x, sums.y), 0.0f) * inv_cols);
}
// The partial of the union of `count` slices, in the same form: (K, S, Q, n) with K =
// partials[0].x, S and Q the union's sums around K and n its columns; for fold_moments, S is
// then the whole deviation sum, not a rounding error, which the fold takes exactly. A CTA's
// partial from its warps' (deferred rows over clusters, norm_forward_op::combine): no division,
// and the exactness argument above applies twice, over the CTA's warps (K = its warp 0's
// mean; warp 0 holds the CTA's first 256 columns of every 4096, so n_c / n_0 <= 16 unless the
// slice is cut short, and then n_0 = n_c below 256 columns) and over the CTAs.
struct moments_sum_op {  // (S, Q, n) summed
  TILEKIT_DEVICE TILEKIT_INLINE float4 operator()(float4 a, float4 b) const {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, 0.0f);
  }
};
TILEKIT_DEVICE TILEKIT_INLINE float4 combine_moments(const float4* partials, uint32_t count) {
  const float shift = partials[0].x;
  const float4 sums = reduce_slots(partials, count, moments_sum_op{}, [shift](const float4& part) {
    const float2 r = recentred(part, shift);
    return make_float4(r.x, r.y, part.w, 0.0f);
  });
  return make_float4(shift, sums.x, sums.y, sums.z);
}
struct layer_fold {  // the cluster's fold (reduce_fold): returns M2 / n, stores the mean
  float inv_cols;
  float* mean;
  TILEKIT_DEVICE TILEKIT_INLINE float operator()(const float4* partials, uint32_t ctas) const {
    const float2 moments = fold_moments(partials, ctas, inv_cols);
    *mean = moments.x;
    return moments.y;
  }
};

// Sums over this thread's values, delivered one 16-byte group at a time by `group(k, x)` (x[0
// .. group_elements) = registers k * group_elements .. of Layout; columns >= cols_here hold 0),
// so a caller can read them from registers, from packed pairs or straight from the staged row.
// Every sum runs in two independent chains (even / odd elements): a row's warps all wait for
// the slowest at its reduction, so the latency of one dependent chain of 32 adds (~4 cycles
// each) is on the critical path of every row.
template <class Layout, class Group, class Accumulate>
TILEKIT_DEVICE TILEKIT_INLINE float thread_fold(Group group, Accumulate accumulate) {
  constexpr int V = Layout::group_elements;
  float sums[2] = {0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < Layout::groups; ++k) {
    float x[V];
    group(k, x);
#pragma unroll
    for (int i = 0; i < V; ++i) sums[i % 2] = accumulate(sums[i % 2], x[i]);
  }
  return sums[0] + sums[1];
}
template <class Layout, class Group>
TILEKIT_DEVICE TILEKIT_INLINE float thread_sum(Group group) {
  return thread_fold<Layout>(group, [](float sum, float x) { return sum + x; });
}
template <class Layout, class Group>
TILEKIT_DEVICE TILEKIT_INLINE float thread_sum_of_squares(Group group) {
  return thread_fold<Layout>(group, [](float sum, float x) { return fmaf(x, x, sum); });
}
// (sum(x - center), sum((x - center)^2)) over this thread's columns < cols_here.
template <class Layout, class Group>
TILEKIT_DEVICE TILEKIT_INLINE float2 thread_deviations(Group group, float center, int cols_here, int thread) {
  constexpr int V = Layout::group_elements;
  auto sums = [&]<bool Full>() {  // Full: no padding in this thread, so no column tests
    float sum_d[2] = {0.0f, 0.0f}, sum_sq[2] = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < Layout::groups; ++k) {
      float x[V];
      group(k, x);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float d = Full || Layout::column(thread, k * V + i) < cols_here ? x[i] - center : 0.0f;
        sum_d[i % 2] += d;
        sum_sq[i % 2] = fmaf(d, d, sum_sq[i % 2]);
      }
    }
    return make_float2(sum_d[0] + sum_d[1], sum_sq[0] + sum_sq[1]);
  };
  return Layout::full(thread, cols_here) ? sums.template operator()<true>() : sums.template operator()<false>();
}
// Columns < cols among the registers of warp `warp` of Layout (warp-uniform).
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE int warp_columns(int warp, int cols) {
  constexpr int warp_span = warp_threads * Layout::group_elements;  // a warp's columns per group
  int n = 0;
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g) n += min(max(cols - Layout::group_column(warp * warp_threads, g), 0), warp_span);
  return n;
}

// Mean and rstd of a row, from this thread's values delivered by `group` (see thread_sum).
// LayerNorm: two passes, mean first, then the mean of squared deviations (no E[x^2] - E[x]^2
// cancellation); rows split over a cluster make both passes per CTA and combine the slices in
// one exchange (fold_moments above) when the op's reductions take float4 (the forward's), else
// in two. RMSNorm: mean = 0.
template <norm_kind Kind, class Layout, class Ctx, class Group>
TILEKIT_DEVICE TILEKIT_INLINE void row_statistics(Group group, int cols, int cols_here, int thread, float eps,
                                                  const Ctx& ctx, float& mean, float& rstd) {
  const float inv_cols = 1.0f / float(cols);
  if constexpr (Kind == norm_kind::rms) {
    mean = 0.0f;
    rstd = rsqrtf(ctx.reduce(thread_sum_of_squares<Layout>(group), sum_op{}) * inv_cols + eps);
  } else {
    const float sum = thread_sum<Layout>(group);
    if constexpr (Ctx::cluster && Ctx::template reduces<float4>) {
      const int n = max(min(cols_here, Layout::columns), 0);  // columns of this CTA's slice
      const float slice_sum = ctx.reduce_cta(sum, sum_op{});
      const float slice_mean = n > 0 ? slice_sum / float(n) : 0.0f;
      const float2 dev = thread_deviations<Layout>(group, slice_mean, cols_here, thread);
      const float var = ctx.reduce_fold(make_float4(slice_mean, dev.x, dev.y, float(n)), layer_partial_op{},
                                        layer_fold{inv_cols, &mean});
      rstd = rsqrtf(var + eps);
    } else {
      // Divided, not multiplied by 1 / cols: a constant row's mean is then exact (its sum is),
      // and its variance 0 (with the rounded 1 / cols, (x - mean)^2 summed to ~(ulp mean)^2,
      // which against eps = 1e-5 moved rstd by 2e-4 for rows at 1000).
      mean = ctx.reduce(sum, sum_op{}) / float(cols);
      rstd = rsqrtf(ctx.reduce(thread_deviations<Layout>(group, mean, cols_here, thread).y, sum_op{}) * inv_cols + eps);
    }
  }
}
// Columns < cols among the registers of `thread` of Layout.
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE int thread_columns(int thread, int cols) {
  constexpr int V = Layout::group_elements;
  if (Layout::full(thread, cols)) return Layout::elements;
  int n = 0;
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g) n += min(max(cols - Layout::group_column(thread, g), 0), V);
  return n;
}
// A warp's partial of a deferred row (row_kernel.cuh, "Deferred rows") of 16-bit values:
// RMSNorm the warp's sum of squares, LayerNorm its (m_w, 0, M2_w, n_w) for fold_moments; every
// lane gets it.
// LayerNorm: two passes per THREAD (its mean m_t, then q_t = sum (x - m_t)^2 over its columns),
// then ONE butterfly of the thread partials re-centred on lane 0's mean K (lane 0 holds the
// warp's first columns of every group, so it has columns whenever the warp has any):
//   S = sum_t n_t (m_t - K),   Q = sum_t (q_t + n_t (m_t - K)^2)      (= sum (x - K), sum (x - K)^2)
//   m_w = K + S / n_w,         M2_w = Q - S^2 / n_w
// Before (2026-12-02), a warp butterfly for the mean, then the deviations and a second
// butterfly. This saves one butterfly's latency and the deviation sum: ncu, SASS per warp and
// row of 1024 columns, 694 -> 677 at 16K, 820 -> 790 at 256K (FADD 157 -> 121, SHFL 23 -> 18).
// Measured (bf16, H200, same-run A/B, two rounds, x copy): 32K / 64K / 128K /
// 256K 0.861 / 0.817 / 0.808 / 0.708 -> 0.867 / 0.830 / 0.821 / 0.739; 4K-16K 0.924-0.932 ->
// 0.921-0.925 (-0.5 .. -0.8%), 1K (not deferred) equal. Registers: every class within 128
// without spills (ptxas -v), except the LayerNorm with the residual at 4K (126 -> 128
// registers, 20-24 bytes of spills; not benchmarked).
// Exactness: Q <= (1 + n_w / n_0) M2_w (Cauchy-Schwarz on lane 0's n_0 columns, as for
// fold_moments), so the subtraction loses at most log2(33) = 5 bits at 32 columns per thread
// when all of the warp's variance sits in lane 0's columns, ~nothing for rows of one
// distribution. The rounding errors of m_t and m_w (the s terms of fold_moments) are left out:
// the sums of a thread's 16-bit values (8 or 11 significant bits each) are exact or nearly so in
// fp32, so those errors are below fp32's own rounding of the moments (test
// LayerForwardBf16OffsetRows: rows at 1000 and -300, means within 1e-6 relative).
template <norm_kind Kind, class Layout, class Group>
TILEKIT_DEVICE TILEKIT_INLINE auto warp_statistics(Group group, int cols_here, int thread) {
  if constexpr (Kind == norm_kind::rms) {
    return warp_reduce(thread_sum_of_squares<Layout>(group), sum_op{});
  } else {
    static_assert((Layout::elements & (Layout::elements - 1)) == 0, "a full thread's mean is its sum times 2^-k");
    const int n_t = thread_columns<Layout>(thread, cols_here);
    const float sum = thread_sum<Layout>(group);  // padding holds 0
    const float m_t = n_t == Layout::elements ? sum * (1.0f / float(Layout::elements))
                      : n_t > 0               ? sum / float(n_t)
                                              : 0.0f;
    const float q_t = thread_deviations<Layout>(group, m_t, cols_here, thread).y;
    const float shift = __shfl_sync(0xffffffffu, m_t, 0);
    const float ne = float(n_t) * (m_t - shift);
    const float2 sums = warp_reduce(make_float2(ne, fmaf(ne, m_t - shift, q_t)), sum2_op{});
    const int n_w = warp_columns<Layout>(thread / warp_threads, cols_here);
    const float d = n_w > 0 ? sums.x / float(n_w) : 0.0f;
    return make_float4(shift + d, 0.0f, fmaxf(fmaf(-d, sums.x, sums.y), 0.0f), float(n_w));
  }
}
// The same from registers holding the whole row.
template <norm_kind Kind, class Layout, class Ctx>
TILEKIT_DEVICE TILEKIT_INLINE void row_statistics(const float (&v)[Layout::elements], int cols, int cols_here,
                                                  int thread, float eps, const Ctx& ctx, float& mean, float& rstd) {
  constexpr int V = Layout::group_elements;
  auto group = [&](int k, float (&x)[V]) {
#pragma unroll
    for (int i = 0; i < V; ++i) x[i] = v[k * V + i];
  };
  row_statistics<Kind, Layout>(group, cols, cols_here, thread, eps, ctx, mean, rstd);
}
#endif  // __CUDACC__

// ---------------------------------------------------------------------------------------------
// Per-thread vectors in shared memory: the `E` values of every thread of the CTA (a weight, a
// bias), stored as Element (float, or a 16-bit type for 16-bit weights: half the bytes) so that
// thread t's values j .. j + P - 1 (P = 16 / sizeof(Element) per slot, j % P == 0) are one
// 16-byte slot and consecutive threads' slots are consecutive (conflict-free 16-byte reads):
// what an op needs on every row but cannot afford to keep in registers.
// ---------------------------------------------------------------------------------------------
template <class Element = float>
inline constexpr size_t thread_vector_bytes(row_config c) {
  return size_t(row_cta_threads) * size_t(c.elements_per_thread) * sizeof(Element);
}

#if defined(__CUDACC__)
template <class Element = float>
struct thread_vector {
  static_assert(std::is_same_v<Element, float> || is_16bit_float<Element>, "thread vectors of float, bf16 or fp16");
  static constexpr int per_slot = 16 / int(sizeof(Element));
  Element* base;
  TILEKIT_DEVICE TILEKIT_INLINE static int slot(int j) {
    return ((j / per_slot) * row_cta_threads + int(threadIdx.x)) * per_slot;
  }
  // This thread stores its E values (before the row loop's first barrier), rounded to Element.
  template <int E>
  TILEKIT_DEVICE TILEKIT_INLINE void store(const float (&v)[E]) const {
    static_assert(E % per_slot == 0, "thread vectors hold whole 16-byte slots");
#pragma unroll
    for (int j = 0; j < E; j += per_slot) {
      Element e[per_slot];
#pragma unroll
      for (int i = 0; i < per_slot; ++i) e[i] = convert<Element>(v[j + i]);
      uint4 word;
      memcpy(&word, e, sizeof(word));
      *reinterpret_cast<uint4*>(base + slot(j)) = word;
    }
  }
  // This thread's values j0 .. j0 + N - 1 (j0 and N multiples of per_slot).
  template <int N>
  TILEKIT_DEVICE TILEKIT_INLINE void load(float (&v)[N], int j0) const {
    static_assert(N % per_slot == 0, "thread vectors are read in whole 16-byte slots");
#pragma unroll
    for (int q = 0; q < N; q += per_slot)
      tilekit::detail::unpack_word<Element>(*reinterpret_cast<const uint4*>(base + slot(j0 + q)), v + q);
  }
};

// The n-th 16-byte piece of a row chunk held in registers: registers [n * V, (n + 1) * V) are
// those of row_piece<Layout> (tilekit/ops/row_io.cuh) applied to the chunk shifted by
// piece_columns<Layout> * n columns.
template <class Layout>
inline constexpr int piece_columns = Layout::group_stride;
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE float (&piece_of(float (&v)[Layout::elements], int n))[Layout::group_elements] {
  return *reinterpret_cast<float (*)[Layout::group_elements]>(v + n * Layout::group_elements);
}
#endif

// ---------------------------------------------------------------------------------------------
// Forward: y = (h - mean) * rstd * w (+ b), h = x (+ residual, rounded to T and written out).
// The weight (and bias) are loaded once per thread into thread_vectors in shared memory by
// begin() (a persistent worker reuses them for every row); the row is held in registers between
// its statistics and its output.
// 16-bit LayerNorm rows of 4 warps or more (4K columns and up; RMSNorm: see deferred_rows) are
// deferred rows (row_kernel.cuh): each warp computes its own statistics (warp_statistics: for
// LayerNorm each thread's two-pass mean and squared deviations, combined in one butterfly),
// keeps h as packed pairs (16 registers for 32 columns) and goes on with the next row; the
// row's y is written one row later, when every warp's partial is in (fold_moments), so no warp
// or CTA of a row waits for the others. The other classes, and fp32 rows (32 more registers to
// hold), reduce and write at once (row()).
// ---------------------------------------------------------------------------------------------
// RMSNorm forward of 16-bit rows and weights (norm_forward_op::wide_rms): default_row_table,
// but rows of 16K-32K columns in one CTA with 64 columns per thread (packed pairs) instead of a
// cluster of 2 CTAs with 32.
inline constexpr row_table rms_row_table = with_classes(default_row_table, 6, {{32768, 512, 1, 1, 64, true}});
static_assert(rms_row_table.well_formed(), "rms_row_table: a well-formed size-class table");

template <norm_kind Kind, class T, class W, bool Residual>
struct norm_forward_op : row_op_defaults {
  using element = T;
  // LayerNorm: float4 partials of the rows split over clusters (row_statistics).
  using reduce_value = std::conditional_t<Kind == norm_kind::layer, float4, float>;
  using params = forward_params;
  // x is streamed, and so is the residual, except for 4-byte elements, whose two 64 KiB row
  // chunks would not fit next to the LayerNorm's weight and bias: then the residual is read
  // from global memory piece by piece.
  static constexpr bool stream_residual = Residual && sizeof(T) == 2;
  static constexpr int inputs = stream_residual ? 2 : 1;
  static constexpr bool is_layer = Kind == norm_kind::layer;
  // Claimed cluster items (row_item_order, "published"): RMSNorm rows over clusters of 2-4 CTAs
  // only. bf16, H200, 2026-12-01, same-binary A/B static -> claimed: 64K (4 CTAs) 0.886 -> 0.933x
  // copy, 128K (8) 0.912 -> 0.905, 256K (16) 0.923 -> 0.781. The LayerNorm forward keeps the
  // static order: claimed, 32K / 64K / 128K (2 / 4 / 8 CTAs) 0.867 / 0.831 / 0.818 -> 0.827 /
  // 0.757 / 0.717 (05:07 UTC).
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas == 1 || (!is_layer && c.cluster_ctas <= 4) ? item_order::claimed : item_order::fixed;
  }
  // RMSNorm of 16-bit rows with a 16-bit weight and no residual: rows of 16K-32K columns in one
  // CTA, 64 columns per thread held as packed pairs (rms_row_table), instead of a cluster of 2.
  static constexpr bool wide_rms = !is_layer && is_16bit_float<T> && is_16bit_float<W> && !Residual;
  static constexpr const row_table& table = wide_rms ? rms_row_table : default_row_table;
  // The weight (and bias): thread_vectors in shared memory, as floats, except for the packed
  // classes (wide_rms: in W, 64 KiB for 64 columns per thread). (The LayerNorm's two take 128
  // KiB, which with the posted partials of deferred rows leaves two 32 KiB stages from 32K
  // columns on. Keeping them in the weight's 16-bit dtype instead, for four stages, measured
  // 1-5% slower at 4K-16K and 128K-256K, even at 64K, 2% faster only at 32K: H200,
  // 2026-11-30, same-run A/B. Not keeping them at all, but reading them from global memory (L2)
  // in each row's output pass, to free the shared memory for stages and for 64 columns per
  // thread: LayerNorm forward 0.92 -> 0.53x copy at 4K-16K, 0.72 -> 0.41-0.49 at 256K, RMSNorm
  // 0.92 -> 0.71-0.87: 2026-12-01.)
  template <class S>
  using vector_t = thread_vector<std::conditional_t<S::config.pairs, W, float>>;
  TILEKIT_HOST_DEVICE static constexpr size_t shared_bytes(row_config c) {
    return (is_layer ? 2 : 1) * (c.pairs ? thread_vector_bytes<W>(c) : thread_vector_bytes<float>(c));
  }
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int i) {
    return i == 0 ? row_source<T>{static_cast<const T*>(p.x), p.x_stride}
                  : row_source<T>{static_cast<const T*>(p.residual), p.residual_stride};
  }

#if defined(__CUDACC__)
  void* vectors;  // the weight's thread vector, then the bias's (vector_t<S>)
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE vector_t<S> weight() const {
    return {static_cast<decltype(vector_t<S>::base)>(vectors)};
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE vector_t<S> bias() const {
    return {weight<S>().base + row_cta_threads * S::layout::elements};
  }

  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void begin(const params& p, const row_place& at, void* shared) {
    using layout = typename S::layout;
    constexpr int E = layout::elements;
    vectors = shared;
    float w[E];
    load_row<layout>(w, static_cast<const W*>(p.weight) + at.col0, at.cols, at.thread);
    weight<S>().store(w);
    if constexpr (is_layer) {
      if (p.bias) {
        load_row<layout>(w, static_cast<const W*>(p.bias) + at.col0, at.cols, at.thread);
      } else {
#pragma unroll
        for (int j = 0; j < E; ++j) w[j] = 0.0f;
      }
      bias<S>().store(w);
    }
  }
  // Deferred rows: partial() posts the warp's statistics and keeps h, finish() writes y. For
  // RMSNorm only where that measured faster: rows over clusters of 2-8 CTAs (32K-128K columns:
  // +1%; 4K-16K -0.3%, 256K -2%, where its fifth stage no longer fits; H200, 2026-11-30).
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(row_config c) {
    return is_16bit_float<T> && (is_layer || (c.cluster_ctas >= 2 && c.cluster_ctas <= 8));
  }
  // LayerNorm clusters of 2 and 16 CTAs: each CTA's last warp combines the CTA's warp partials
  // (combine below) and only those travel, so the fold of a 256K row takes 16 partials instead
  // of 256 (16 warps x 16 CTAs: 8 loads and re-centerings per lane, ~60 of ~790 instructions
  // per warp and row in ncu's count; "CTA partials first", tilekit/ops/reduce.cuh). Measured
  // (bf16, H200, 2026-12-02, same-run A/B, two rounds each, x copy), every warp's partial to
  // every CTA -> CTA partials first: 32K (2 CTAs) 0.865-0.867 -> 0.883, 256K (16) 0.740-0.743
  // -> 0.747-0.748, but 64K (4) 0.828-0.831 -> 0.800 and 128K (8) 0.822-0.823 -> 0.791: those
  // keep the one-level post. (The smaller scratch also fits a third 32 KiB stage at 32K-128K;
  // neither it alone nor CTA partials first alone measured the 32K gain: the two variants are
  // in docs/performance_log.md, "LayerNorm forward, 2026-12-02".)
  TILEKIT_HOST_DEVICE static constexpr bool combines_ctas_first(row_config c) {
    return is_layer && (c.cluster_ctas == 2 || c.cluster_ctas == 16);
  }
  // LayerNorm: each warp leaves a row's stage once partial() has read it (row_kernel.cuh, "Early
  // release"), not after finishing the previous row, so the stage's refill (two stages of 32 KiB
  // from 32K columns on, next to the 128 KiB of weight and bias) gets about half a row more
  // lead. ncu before (256K, 2026-12-04): the stage-full wait held 11% of the warps' stall
  // samples. Measured (bf16, H200, 2026-12-04, same-run A/B, two rounds, x copy): 32K / 64K /
  // 128K / 256K 0.870 / 0.842 / 0.837 / 0.778 -> 0.900 / 0.898 / 0.884 / 0.784 (+3.4 / +6.6 /
  // +5.6 / +0.8%), 1K-16K within 0.3%. Where the release goes (row_kernel.cuh): leaving before
  // the post at 2 and 16 CTAs, whose CTAs combine their partials first, gave +2.3% at 32K and
  // -4% at 256K; leaving after it at 4 and 8 CTAs, +5.5 / +4.8% at 64K / 128K. RMSNorm: no
  // gain (64K -0.4%). Later the same day, with the release compiled at one site where every
  // item has its row (16K and up, row_kernel.cuh): 16K / 64K / 128K / 256K 0.911-0.920 / 0.892-
  // 0.893 / 0.872-0.873 / 0.775-0.777 -> 0.932 / 0.897-0.898 / 0.885 / 0.801-0.802; 32K even.
  TILEKIT_HOST_DEVICE static constexpr bool releases_early(row_config) { return is_layer; }
  template <class S>
  struct pending {
    packed_t<T> h[S::layout::elements / 2];  // this thread's columns of h, as pairs
  };

  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE reduce_value partial(const params& p, const row_place& at, int64_t row, row_scalars,
                                                     const stage_row<S> (&in)[inputs], pending<S>& held) {
    using layout = typename S::layout;
    using piece = row_piece<layout>;
    constexpr int E = layout::elements, V = layout::group_elements;
    const int cols_here = at.cols;
    if constexpr (Residual) {
      // h = x + residual rounded to T (see row()), written out and kept as pairs.
      T* h_row = static_cast<T*>(p.residual_out) + row * p.residual_out_stride + at.col0;
#pragma unroll
      for (int n = 0; n < E / V; ++n) {
        const int offset = n * piece_columns<layout>;
        float x[V], r[V];
        load_row_aligned<piece>(x, in[0] + offset, cols_here - offset, at.thread);
        load_row_aligned<piece>(r, in[1] + offset, cols_here - offset, at.thread);
#pragma unroll
        for (int i = 0; i < V; i += 2)
          held.h[(n * V + i) / 2] = make_pair<T>(convert<T>(x[i] + r[i]), convert<T>(x[i + 1] + r[i + 1]));
      }
#pragma unroll
      for (int n = 0; n < E / V; ++n) {
        const int offset = n * piece_columns<layout>;
        float h[V];
#pragma unroll
        for (int i = 0; i < V; i += 2) {
          const float2 pair = unpack_pair(held.h[(n * V + i) / 2]);
          h[i] = pair.x, h[i + 1] = pair.y;
        }
        store_row<piece, cache_policy::streaming, S::shifted>(h_row + offset, h, cols_here - offset, at.thread);
      }
    } else {
      load_row_pairs_aligned<layout>(held.h, in[0], cols_here, at.thread, convert<T>(0.0f));  // padding: 0
    }
    // h unpacked once for both passes of the statistics (finish() unpacks the pairs again). (In
    // the source: ptxas still unpacks the pairs for each pass, ncu counts 104 -> 110 LOP3 and
    // IMAD.U32 per warp and row at 16K; no registers to hold 32 floats more, it seems.)
    float h[E];
#pragma unroll
    for (int j = 0; j < E / 2; ++j) {
      const float2 pair = unpack_pair(held.h[j]);
      h[2 * j] = pair.x, h[2 * j + 1] = pair.y;
    }
    auto group = [&](int k, float (&x)[V]) {
#pragma unroll
      for (int i = 0; i < V; ++i) x[i] = h[k * V + i];
    };
    return warp_statistics<Kind, layout>(group, cols_here, at.thread);
  }
  // A CTA's partial from its warps' (combines_ctas_first: LayerNorm only).
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE reduce_value combine(const params&, const reduce_value* partials, uint32_t warps) const {
    static_assert(is_layer && sizeof(S) > 0, "norm_forward_op::combine: LayerNorm's moments only");
    return combine_moments(partials, warps);
  }
  // The row's statistics from its warps' (or CTAs') partials: RMSNorm (0, sum x^2 / n),
  // LayerNorm (mean, M2 / n).
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE float2 total(const params& p, const reduce_value* partials, uint32_t count) const {
    const float inv_cols = 1.0f / float(p.cols);
    if constexpr (is_layer) return fold_moments(partials, count, inv_cols);
    else return make_float2(0.0f, reduce_slots(partials, count, sum_op{}) * inv_cols);
  }
  // finish() unpacks the whole row, then writes it like row() does. (Unpacking, computing and
  // storing one 16-byte group at a time, which gained in the softmax and CE forwards, measured
  // 3-5% slower here: LayerNorm forward 4K 0.928 -> 0.897, 16K 0.929 -> 0.875, 256K 0.720 ->
  // 0.689; RMSNorm equal. H200, 2026-12-01.)
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(const params& p, const row_place& at, int64_t row, const pending<S>& held,
                                            float2 moments) {
    using layout = typename S::layout;
    constexpr int E = layout::elements;
    float v[E];
#pragma unroll
    for (int j = 0; j < E / 2; ++j) {
      const float2 h = unpack_pair(held.h[j]);
      v[2 * j] = h.x, v[2 * j + 1] = h.y;
    }
    write_output<S>(p, at, row, v, moments.x, rsqrtf(moments.y + p.eps));
  }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, row_scalars scalars,
                                         const stage_row<S> (&in)[inputs], const Ctx& ctx) {
    if constexpr (packed_rows<S>) {  // wide_rms: both halves of a deferred row at once
      static_assert(!is_layer, "packed classes are RMSNorm's only");
      pending<S> held;
      const float sum_sq = ctx.reduce_warps(partial<S>(p, at, row, scalars, in, held), sum_op{});
      finish<S>(p, at, row, held, make_float2(0.0f, sum_sq / float(p.cols)));
      return;
    }
    using layout = typename S::layout;
    using piece = row_piece<layout>;
    constexpr int E = layout::elements, V = layout::group_elements;
    const int cols_here = at.cols;
    float v[E];
    if constexpr (Residual) {
      // h = x + residual, one 16-byte piece at a time (the residual never occupies more than a
      // piece of registers). h is rounded to T before normalizing: the same values a separate
      // add would produce and that the backward will read back.
      T* h_row = static_cast<T*>(p.residual_out) + row * p.residual_out_stride + at.col0;
#pragma unroll
      for (int n = 0; n < E / V; ++n) {
        const int offset = n * piece_columns<layout>;
        float r[V];
        load_row_aligned<piece>(piece_of<layout>(v, n), in[0] + offset, cols_here - offset, at.thread);
        if constexpr (stream_residual)
          load_row_aligned<piece>(r, in[1] + offset, cols_here - offset, at.thread);
        else
          load_row<piece, cache_policy::streaming>(
              r, static_cast<const T*>(p.residual) + row * p.residual_stride + at.col0 + offset, cols_here - offset,
              at.thread);
#pragma unroll
        for (int i = 0; i < V; ++i) v[n * V + i] = convert<float>(convert<T>(v[n * V + i] + r[i]));
        store_row<piece, cache_policy::streaming, S::shifted>(h_row + offset, piece_of<layout>(v, n),
                                                              cols_here - offset, at.thread);
      }
    } else {
      load_row_aligned<layout>(v, in[0], cols_here, at.thread);
    }
    float mean, rstd;
    row_statistics<Kind, layout>(v, p.cols, cols_here, at.thread, p.eps, ctx, mean, rstd);
    write_output<S>(p, at, row, v, mean, rstd);
  }

 private:
  // y = (h - mean) * rstd * w (+ b) from this thread's columns of h (v, overwritten), and the
  // row's statistics.
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void write_output(const params& p, const row_place& at, int64_t row,
                                                  float (&v)[S::layout::elements], float mean, float rstd) const {
    using layout = typename S::layout;
    constexpr int E = layout::elements, V = layout::group_elements;
    const int cols_here = at.cols;
#pragma unroll
    for (int n = 0; n < E / V; ++n) {
      float w[V], b[V];
      weight<S>().load(w, n * V);
      if constexpr (is_layer) bias<S>().load(b, n * V);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int j = n * V + i;
        v[j] = (v[j] - mean) * rstd * w[i];
        if constexpr (is_layer) v[j] += b[i];
      }
    }
    store_row<layout, cache_policy::streaming, S::shifted>(static_cast<T*>(p.y) + row * p.y_stride + at.col0, v,
                                                           cols_here, at.thread);
    if (at.leader()) {
      if (p.rstd) p.rstd[row] = rstd;
      if constexpr (is_layer)
        if (p.mean) p.mean[row] = mean;
    }
  }
#endif
};

// ---------------------------------------------------------------------------------------------
// Backward:
//   xhat = (x - mean) * rstd, g = dy * w
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw += dy * xhat, db += dy   (per thread, in registers; one fp32 partial per worker at the end)
// The weight is a thread_vector in shared memory, dw / db live in registers, and the row is
// read in 16-byte pieces in two passes (sums, then outputs), so the registers hold dw, db and
// one piece of x and dy at a time; except RMSNorm rows of 16-bit x and dy over clusters
// (deferred rows) or shifted over 2-16 warps (held_row), and the LayerNorm's deferred rows
// (Deferred = true), which hold x and dy as packed pairs.
// ---------------------------------------------------------------------------------------------

// The LayerNorm backward's deferred classes (norm_backward_op<..., Deferred = true>): those of
// default_row_table from 16K to 64K columns (one CTA of 16 warps, clusters of 2 and 4), where
// they measured faster (see deferred_rows).
inline constexpr int layer_deferred_first = 5, layer_deferred_last = 7;
inline constexpr row_table layer_deferred_table =
    classes_between(default_row_table, layer_deferred_first, layer_deferred_last);
static_assert(layer_deferred_first >= 1 && layer_deferred_last < default_row_table.count,
              "layer_deferred_table: classes inside the default table");
// Whether rows of `cols` columns fall into layer_deferred_table's classes.
constexpr bool in_layer_deferred_classes(int64_t cols) {
  return cols > default_row_table.configs[layer_deferred_first - 1].max_cols &&
         cols <= default_row_table.configs[layer_deferred_last].max_cols;
}

// Deferred: the LayerNorm backward of aligned 16-bit rows with saved statistics, in the size
// classes of layer_deferred_table only (norms_backward.cu launches it there; see deferred_rows).
template <norm_kind Kind, class T, class W, bool DResidual, bool Deferred = false>
struct norm_backward_op : row_op_defaults {
  static_assert(!Deferred || (Kind == norm_kind::layer && is_16bit_float<T>),
                "norm_backward_op: the deferred variant is the LayerNorm's of 16-bit rows");
  using element = T;
  // LayerNorm: {sum g, sum g * d} in row(), {sum g * d, sum g} of deferred rows (d = x - mean);
  // RMSNorm: {sum g * x, sum x^2} of deferred rows and held rows without saved statistics (row()
  // and held rows with them reduce one float).
  using reduce_value = float2;
  using params = backward_params;
  struct row_scalars {
    float mean = 0.0f;
    float rstd = 0.0f;
  };
  // x and dy are streamed; dresidual_out (optional) is read from global memory in the output
  // pass: a third streamed input would leave no room for two stages.
  static constexpr int inputs = 2;
  static constexpr bool per_worker_results = true;
  static constexpr bool is_layer = Kind == norm_kind::layer;
  static constexpr int max_elements = 32;
  // The static order (deterministic dw: every worker's partials sum the same rows in every run),
  // paced with one CTA per worker (row_kernel.cuh, "Paced order"). bf16, H200, 2026-12-01,
  // same-binary A/B static -> paced, x copy: RMSNorm 1K / 4K / 8K / 16K 0.876 / 0.879 / 0.885 /
  // 0.876 -> 0.922 / 0.929 / 0.927 / 0.920; LayerNorm 1K / 4K / 8K 0.746 / 0.848 / 0.843 ->
  // 0.764 / 0.872 / 0.872, but 16K 0.838 -> 0.828; every cluster class lost 9-16% (32K-256K).
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas == 1 && !(is_layer && c.max_cols == 16384) ? item_order::paced : item_order::fixed;
  }
  static constexpr const row_table& table = Deferred ? layer_deferred_table : default_row_table;
  static constexpr bool aligned_only = Deferred;
  TILEKIT_HOST_DEVICE static constexpr size_t shared_bytes(row_config c) { return thread_vector_bytes<>(c); }
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int i) {
    return i == 0 ? row_source<T>{static_cast<const T*>(p.x), p.x_stride}
                  : row_source<T>{static_cast<const T*>(p.dy), p.dy_stride};
  }

#if defined(__CUDACC__)
  TILEKIT_DEVICE static row_scalars fetch(const params& p, int64_t row) {
    if (p.rstd == nullptr) return {};
    return {is_layer ? p.mean[row] : 0.0f, p.rstd[row]};
  }
  float dw[max_elements];
  float db[is_layer ? max_elements : 1];
  thread_vector<> weight;

  // Deferred rows (row_kernel.cuh) for RMSNorm rows of 16-bit x and dy split over clusters:
  // partial() posts its warp's {sum g * x, sum x^2}, keep() then holds the thread's x and dy as
  // packed pairs (32 registers for 32 columns), so no warp or CTA of a row waits for the others
  // (the stage is released once the previous row is finished); finish() writes dx and adds to dw
  // one row later. sum x^2 gives the rstd where none was saved (rstd = rsqrt(mean x^2 + eps)):
  // one exchange per row either way.
  // 128 registers, no spills. bf16, H200, 2026-12-01 23:05 UTC, same-run A/B against the
  // undeferred rows (two rounds), x copy: 32K / 64K / 128K / 256K 0.888 / 0.877 / 0.852 / 0.769
  // -> 0.923 / 0.896 / 0.884 / 0.797 (16K, unchanged, 0.914 in both). Paced
  // (TILEKIT_ROW_ORDER=paced, which then paced every staged class) they lose: 0.910 / 0.850 /
  // 0.824 / 0.715, so they stay static.
  // LayerNorm (Deferred = true: with saved statistics, 16K columns and up): partial() posts its
  // warp's {sum g, sum g * d} (d = x - mean), keep() holds x and dy as pairs as above, finish()
  // adds to dw and db. Without saved statistics its rows keep row(): a warp's partial would need
  // its mean, M2, sum g and sum g * (x - m_w) (16 bytes and a count), and the pairs next to dw
  // and db already fill the 128 registers: ptxas, bf16, spill stores 80 bytes at the clusters
  // (aligned; row(): 0), 168 at 16K (row(): 4), 336-356 shifted (db's 32 accumulators: without
  // them 122-123 registers, no spills); a first build with the recompute path in the same kernel
  // went from 68 to 152 at the clusters. Measured (bf16, H100, 2026-12-05, same-run A/B against
  // row(), two rounds): aligned 16K / 32K / 64K +0.9-1.1 / +3.8-4.2 / +2.3-2.7%, but 128K / 256K
  // -4.3 / -7.2% and shifted rows -8 to -20% (16383-262143 columns). So aligned rows of 16K-64K
  // only (aligned_only; docs/performance_log.md, "LayerNorm backward deferred rows with saved
  // statistics").
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(row_config c) {
    return Deferred || (!is_layer && is_16bit_float<T> && c.cluster_ctas > 1);
  }
  static constexpr bool keeps_stage = true;  // keep(): the stage is released after it
  template <class S>
  struct pending {
    packed_t<T> x[S::layout::elements / 2];
    packed_t<T> dy[S::layout::elements / 2];
    float rstd;  // RMSNorm: the saved rstd (unused without saved statistics)
  };
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE reduce_value partial(const params& p, const row_place& at, int64_t, row_scalars stats,
                                                     const stage_row<S> (&in)[inputs], pending<S>& held) const {
    using layout = typename S::layout;
    using piece = row_piece<layout>;
    constexpr int E = layout::elements, V = layout::group_elements;
    const int cols_here = at.cols;
    // LayerNorm {sum g * d, sum g}, two chains each (the saved statistics: finish() reads them
    // again); RMSNorm {sum g * x, sum x^2}, one chain each (and the saved rstd, if any).
    constexpr int chains = is_layer ? 2 : 1;
    float sum_a[chains] = {}, sum_b[chains] = {};
    if constexpr (!is_layer) held.rstd = stats.rstd;
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int offset = k * piece_columns<layout>;
      float x[V], dy[V], w[V];
      load_row_aligned<piece>(x, in[0] + offset, cols_here - offset, at.thread);  // padding: 0
      load_row_aligned<piece>(dy, in[1] + offset, cols_here - offset, at.thread);
      weight.load(w, k * V);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float g = dy[i] * w[i];  // padding: g = 0
        if constexpr (is_layer) {
          sum_a[i % chains] = fmaf(g, x[i] - stats.mean, sum_a[i % chains]);
          sum_b[i % chains] += g;
        } else {
          sum_a[0] = fmaf(g, x[i], sum_a[0]);
          sum_b[0] = fmaf(x[i], x[i], sum_b[0]);
        }
      }
    }
    if constexpr (chains == 2) return warp_reduce(make_float2(sum_a[0] + sum_a[1], sum_b[0] + sum_b[1]), sum2_op{});
    else return warp_reduce(make_float2(sum_a[0], sum_b[0]), sum2_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void keep(const params& p, const row_place& at, const stage_row<S> (&in)[inputs],
                                          pending<S>& held) const {
    using layout = typename S::layout;
    const int cols_here = at.cols;
    load_row_pairs_aligned<layout>(held.x, in[0], cols_here, at.thread, convert<T>(0.0f));  // padding: 0
    load_row_pairs_aligned<layout>(held.dy, in[1], cols_here, at.thread, convert<T>(0.0f));
  }
  // The row's means of its warps' partials: RMSNorm {mean g * x, mean x^2}, LayerNorm {mean g * d,
  // mean g}.
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE float2 total(const params& p, const reduce_value* partials, uint32_t count) const {
    const float2 sums = reduce_slots(partials, count, sum2_op{});
    const float inv_cols = 1.0f / float(p.cols);
    return make_float2(sums.x * inv_cols, sums.y * inv_cols);
  }
  //   dx = rstd * (g - mean(g) - xhat * mean(g xhat)) = (dy rstd) w - b - d a,
  //   a = rstd^3 mean(g d), b = rstd mean(g)   (RMSNorm: d = x, b = 0)
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(const params& p, const row_place& at, int64_t row, const pending<S>& held,
                                            float2 means) {
    using layout = typename S::layout;
    using piece = row_piece<layout>;
    constexpr int E = layout::elements, V = layout::group_elements;
    const int cols_here = at.cols;
    // LayerNorm: the saved statistics, read again (an L1 / L2 hit: fetch() read them a row ago)
    // rather than kept in `pending` (ptxas, a first build: 16K 200 -> 152 bytes of spill stores).
    const float rstd = is_layer ? p.rstd[row] : p.rstd != nullptr ? held.rstd : rsqrtf(means.y + p.eps);
    const float mean = is_layer ? p.mean[row] : 0.0f, b = is_layer ? rstd * means.y : 0.0f;
    const float a = rstd * rstd * rstd * means.x;
    T* dx_row = static_cast<T*>(p.dx) + row * p.dx_stride + at.col0;
    // Shifted rows: dx as pairs first, then one store of the row (store_row_pairs): realigned dx
    // rows then chain their groups (pieces once per warp instead of at every group), and no float
    // of dx is live next to the writer's shuffles. Aligned rows store each piece as it is done.
    packed_t<T> dx_pairs[S::shifted ? E / 2 : 1];
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int offset = k * piece_columns<layout>;
      float w[V], dx[V], dres[V];
      weight.load(w, k * V);
      if constexpr (DResidual)
        load_row<piece, cache_policy::streaming>(
            dres, static_cast<const T*>(p.dresidual_out) + row * p.dresidual_out_stride + at.col0 + offset,
            cols_here - offset, at.thread);
#pragma unroll
      for (int i = 0; i < V; i += 2) {
        const float2 x = unpack_pair(held.x[(k * V + i) / 2]), dy = unpack_pair(held.dy[(k * V + i) / 2]);
        const float dys0 = dy.x * rstd, dys1 = dy.y * rstd;  // dy * xhat = (dy rstd) x, as in row()
        const int j = k * V + i;
        if constexpr (is_layer) {
          const float d0 = x.x - mean, d1 = x.y - mean;
          dw[j] = fmaf(dys0, d0, dw[j]);  // padding: dy = 0
          dw[j + 1] = fmaf(dys1, d1, dw[j + 1]);
          db[j] += dy.x, db[j + 1] += dy.y;
          dx[i] = fmaf(-d0, a, fmaf(dys0, w[i], -b));
          dx[i + 1] = fmaf(-d1, a, fmaf(dys1, w[i + 1], -b));
        } else {
          dw[j] = fmaf(dys0, x.x, dw[j]);  // padding: dy = 0
          dw[j + 1] = fmaf(dys1, x.y, dw[j + 1]);
          dx[i] = fmaf(-x.x, a, dys0 * w[i]);
          dx[i + 1] = fmaf(-x.y, a, dys1 * w[i + 1]);
        }
        if constexpr (DResidual) dx[i] += dres[i], dx[i + 1] += dres[i + 1];
        if constexpr (S::shifted) dx_pairs[j / 2] = convert<packed_t<T>>(make_float2(dx[i], dx[i + 1]));
      }
      if constexpr (!S::shifted)
        store_row<piece, cache_policy::streaming>(dx_row + offset, dx, cols_here - offset, at.thread);
    }
    if constexpr (S::shifted) store_row_pairs<layout, cache_policy::streaming, true>(dx_row, dx_pairs, cols_here, at.thread);
  }

  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void begin(const params& p, const row_place& at, void* shared) {
    using layout = typename S::layout;
    constexpr int E = layout::elements;
    static_assert(E <= max_elements, "norm_backward_op: at most 32 elements per thread");
    weight.base = static_cast<float*>(shared);
    float w[E];
    load_row<layout>(w, static_cast<const W*>(p.weight) + at.col0, at.cols, at.thread);
    weight.store(w);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      dw[j] = 0.0f;
      if constexpr (is_layer) db[j] = 0.0f;
    }
  }

  // Shifted RMSNorm rows of 16-bit x and dy that are not deferred (2K-16K columns): a 16-byte
  // group of a shifted stage costs two shared loads and a funnel shift (11 selects and 4 shifts:
  // funnel_bytes) where an aligned one costs one load, and row() reads every group twice (its
  // two passes). ncu, bf16 4095 columns (H200, 2026-12-05): 49.6 instructions per element
  // against 21.6 aligned at 4096, 7 of them selects. So these rows are read once, into packed
  // pairs (32 registers for 32 columns next to dw; LayerNorm's db would not leave room), as the
  // deferred rows' keep() does, and both passes run on the pairs: partial sums here, outputs in
  // finish(). Not for rows of one warp (1K: ptxas spills 348 bytes, where rows of 2-16 warps
  // spill 64) nor with the residual's gradient (320-444 bytes): those keep row().
  template <class S>
  static constexpr bool holds_shifted_row =
      S::shifted && !is_layer && is_16bit_float<T> && !DResidual && S::group_threads > warp_threads;
  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void held_row(const params& p, const row_place& at, int64_t row, row_scalars stats,
                                              const stage_row<S> (&in)[inputs], const Ctx& ctx) {
    using layout = typename S::layout;
    constexpr int E = layout::elements, V = layout::group_elements;
    pending<S> held;
    keep(p, at, in, held);
    held.rstd = stats.rstd;
    // {sum g * x, sum x^2} (the latter only without saved statistics), two chains each.
    auto sums = [&]<bool Squares>() {
      float gx[2] = {0.0f, 0.0f}, xx[2] = {0.0f, 0.0f};
#pragma unroll
      for (int k = 0; k < E / V; ++k) {
        float w[V];
        weight.load(w, k * V);
#pragma unroll
        for (int i = 0; i < V; i += 2) {
          const float2 x = unpack_pair(held.x[(k * V + i) / 2]), dy = unpack_pair(held.dy[(k * V + i) / 2]);
          gx[0] = fmaf(dy.x * w[i], x.x, gx[0]);  // padding: x = dy = 0
          gx[1] = fmaf(dy.y * w[i + 1], x.y, gx[1]);
          if constexpr (Squares) xx[0] = fmaf(x.x, x.x, xx[0]), xx[1] = fmaf(x.y, x.y, xx[1]);
        }
      }
      return make_float2(gx[0] + gx[1], xx[0] + xx[1]);
    };
    const float inv_cols = 1.0f / float(p.cols);
    float2 means;
    if (p.rstd != nullptr) {
      means = make_float2(ctx.reduce(sums.template operator()<false>().x, sum_op{}) * inv_cols, 0.0f);
    } else {
      const float2 s = ctx.reduce(sums.template operator()<true>(), sum2_op{});
      means = make_float2(s.x * inv_cols, s.y * inv_cols);
    }
    finish<S>(p, at, row, held, means);
  }

  // Shifted rows of 16-bit dx that row() stores as pairs after pass 2 (store_row_pairs: a realigned
  // row's pieces once per warp and row instead of once per 16-byte group), where that measured
  // faster. It keeps 16 more registers live through pass 2 next to dw and db: the LayerNorm's
  // spills grow (bf16, ptxas, pairs in every class: 1K 312 -> 324 bytes, 2K-8K 140 -> 252, 16K 120
  // -> 188, clusters 0 -> 100; in the classes that take them, 1K and 64K). H100, bf16, 2026-12-05,
  // same-run A/B against the per-piece stores (2 rounds, x copy; one warp vote per row at 16K and
  // up in both): RMSNorm 1023 +12%, LayerNorm 1023 / 4095 / 16383 / 50257 / 262143 +4.0% / -2.9% /
  // -1.4% / +7.7% / -4.5% (the 64K class gains, the 256K class, same code, loses: why is open). So
  // one-warp rows (measured at 1K; the 256-column class follows them unmeasured) and the 64K class
  // (clusters of 4). The other classes keep the stores per piece: a third A/B (H100, 2026-12-05, 2
  // rounds) of pairs in the 2K, 8K, 32K and 128K classes read 2047 / 8191 / 32767 / 131071 columns
  // -1.9% / 0 / +0.5% / -0.9% (docs/performance_log.md, "Norms backward row(): one vote per row
  // and dx as pairs").
  template <class S>
  static constexpr bool stores_dx_as_pairs =
      S::shifted && is_16bit_float<T> && (S::warp_per_row || S::cluster_ctas == 4);

  // Shifted 16-bit rows of 16 warps or more (16K columns and the clusters) that row() reads
  // (the LayerNorm's; the RMSNorm's with the residual's gradient at 16K) take the warp's vote
  // once for all 16-20 piece loads of the row (voted_row) instead of once per load. H100, bf16
  // LayerNorm, 2026-12-05, same-run A/B against main, x copy, votes once per row at every width:
  // 16383 / 50257 / 262143 columns +0.7 / +4.2 / +4.2%, but 4095 (4 warps) -6.5 to -7% and the
  // RMSNorm's 1023 (one warp) -3.5 to -4%; so the smaller classes keep the vote per load (second
  // A/B, votes from 16 warps: +0.1-0.3 / +4.1 / +3.7-4.1% at 16383 / 50257 / 262143).
  template <class S>
  static constexpr bool votes_once_per_row =
      S::shifted && is_16bit_float<T> && S::group_threads >= row_cta_threads;  // fp32: not measured

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, row_scalars stats,
                                         const stage_row<S> (&in)[inputs], const Ctx& ctx) {
    if constexpr (holds_shifted_row<S>) {
      held_row<S>(p, at, row, stats, in, ctx);
    } else if constexpr (votes_once_per_row<S>) {
      voted_row<T> rows[inputs];
      vote_rows<typename S::layout>(rows, in, at.cols, at.thread);
      row_passes<S>(p, at, row, stats, rows, ctx);
    } else {
      row_passes<S>(p, at, row, stats, in, ctx);
    }
  }

  // row() of the rows that are not held: two passes over the staged row (in: stage rows, or
  // voted ones), piece by piece.
  template <class S, class R, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row_passes(const params& p, const row_place& at, int64_t row, row_scalars stats,
                                                const R (&in)[inputs], const Ctx& ctx) {
    using layout = typename S::layout;
    constexpr int E = layout::elements;
    constexpr int V = layout::group_elements;
    constexpr int piece_width = piece_columns<layout>;  // one 16-byte group per thread
    using piece = row_piece<layout>;
    const int cols_here = at.cols;
    const float inv_cols = 1.0f / float(p.cols);
    if (p.rstd == nullptr) {
      // No saved statistics: recompute them from the staged row, one 16-byte group at a time
      // (a whole row of registers next to dw and db would spill).
      auto group = [&](int k, float (&x)[V]) {
        load_row_aligned<piece>(x, in[0] + k * piece_width, cols_here - k * piece_width, at.thread);
      };
      row_statistics<Kind, layout>(group, p.cols, cols_here, at.thread, p.eps, ctx, stats.mean, stats.rstd);
    }
    const float mean = is_layer ? stats.mean : 0.0f, rstd = stats.rstd;

    // Pass 1: the row sums of g * d, d = x - mean (and of g), in two chains each (a row's
    // warps all wait at its reduction for the slowest, so the chain's latency counts).
    float sum_gd[2] = {0.0f, 0.0f}, sum_g[2] = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int offset = k * piece_width;
      float x[V], dy[V], w[V];
      load_row_aligned<piece>(x, in[0] + offset, cols_here - offset, at.thread);
      load_row_aligned<piece>(dy, in[1] + offset, cols_here - offset, at.thread);
      weight.load(w, k * V);
      // Padding columns hold x = dy = w = 0: their d = -mean is finite and always multiplied
      // by dy or g = 0, so they add nothing and need no column test.
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float g = dy[i] * w[i];
        if constexpr (is_layer) {
          sum_gd[i % 2] = fmaf(g, x[i] - mean, sum_gd[i % 2]);
          sum_g[i % 2] += g;
        } else {
          sum_gd[i % 2] = fmaf(g, x[i], sum_gd[i % 2]);
        }
      }
    }
    // c = mean(g * xhat) = rstd * sum(g d) / n. With a2 = rstd^2 c and b = rstd mean(g):
    //   dx = rstd * (g - mean(g) - xhat * c) = (dy rstd) * w - b - d * a2
    //   dw += dy * xhat = (dy rstd) * d,   db += dy
    // (RMSNorm: d = x, b = 0.) FP32 operations per element over both passes: LayerNorm 10,
    // RMSNorm 6, where xhat formed first took 12 and 10.5 (ncu, 8K, before). Measured (bf16, H200,
    // 2026-12-02, same-run A/B, x copy): RMSNorm 16K 0.917 -> 0.930, 64K-256K +0.4-1.0%;
    // LayerNorm 32K-256K +1-2% (256K 0.648 -> 0.660), 4K-16K even, 1K 0.76 -> 0.74. The
    // kernels are not bound by these operations (about 27 instructions per element in all).
    float c, b = 0.0f;
    if constexpr (is_layer) {
      const float2 sums = ctx.reduce(make_float2(sum_g[0] + sum_g[1], sum_gd[0] + sum_gd[1]), sum2_op{});
      b = rstd * (sums.x * inv_cols);
      c = rstd * (sums.y * inv_cols);
    } else {
      c = rstd * (ctx.reduce(sum_gd[0] + sum_gd[1], sum_op{}) * inv_cols);
    }
    const float a2 = rstd * (rstd * c);

    // Pass 2: dx, and the weight / bias gradients. Shifted rows of some classes (stores_dx_as_pairs)
    // collect dx as pairs and store the row once (store_row_pairs), as finish() does.
    T* dx_row = static_cast<T*>(p.dx) + row * p.dx_stride + at.col0;
    constexpr bool dx_pairs_first = stores_dx_as_pairs<S>;
    packed_t<T> dx_pairs[dx_pairs_first ? E / 2 : 1];
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int offset = k * piece_width;
      float x[V], dy[V], w[V];
      load_row_aligned<piece>(x, in[0] + offset, cols_here - offset, at.thread);
      load_row_aligned<piece>(dy, in[1] + offset, cols_here - offset, at.thread);
      weight.load(w, k * V);
      float dres[V];
      if constexpr (DResidual)
        load_row<piece, cache_policy::streaming>(
            dres, static_cast<const T*>(p.dresidual_out) + row * p.dresidual_out_stride + at.col0 + offset,
            cols_here - offset, at.thread);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int j = k * V + i;
        const float d = is_layer ? x[i] - mean : x[i];  // padding: dy = 0, see pass 1
        const float dys = dy[i] * rstd;
        dw[j] = fmaf(dys, d, dw[j]);
        if constexpr (is_layer) db[j] += dy[i];
        x[i] = fmaf(-d, a2, fmaf(dys, w[i], -b));
        if constexpr (DResidual) x[i] += dres[i];
        if constexpr (dx_pairs_first)
          if (i % 2 == 1) dx_pairs[(j - 1) / 2] = convert<packed_t<T>>(make_float2(x[i - 1], x[i]));
      }
      if constexpr (!dx_pairs_first)
        store_row<piece, cache_policy::streaming, S::shifted>(dx_row + offset, x, cols_here - offset, at.thread);
    }
    if constexpr (dx_pairs_first)
      store_row_pairs<layout, cache_policy::streaming, true>(dx_row, dx_pairs, cols_here, at.thread);
  }

  // One fp32 partial row per (worker, group): partial (worker * groups + group) holds the sums of
  // the rows that group handled (zeros if none); sum_partials_kernel adds them in a fixed order.
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void end(const params& p, const row_place& at, void*) {
    if (p.dweight_partials) write_partials<S>(dw, p.dweight_partials, p, at);
    if constexpr (is_layer)
      if (p.dbias_partials) write_partials<S>(db, p.dbias_partials, p, at);
  }

  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE static void write_partials(const float (&acc)[max_elements], float* partials,
                                                           const params& p, const row_place& at) {
    using layout = typename S::layout;
    float* out = partials + (at.worker * S::groups + at.group) * p.cols;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) {
      const int c = layout::column(at.thread, j);
      if (c < at.cols) out[at.col0 + c] = acc[j];
    }
  }
#endif
};

#if defined(__CUDACC__)
// dw[c] = sum over partials p of partials[p][c], in a fixed order: slice y of the CTA adds
// partials y, y + slices, ... in order, then slice 0 adds the slices in order.
inline constexpr int partial_sum_columns = warp_threads;  // columns per CTA: one 128-byte line of fp32
inline constexpr int partial_sum_slices = 32;             // partial slices per CTA

template <class W>
__global__ void __launch_bounds__(partial_sum_columns* partial_sum_slices)
    sum_partials_kernel(W* out, const float* partials, int64_t workers, int cols) {
  __shared__ float slice_sums[partial_sum_slices][partial_sum_columns];
  const int col = blockIdx.x * partial_sum_columns + threadIdx.x;
  float sum = 0.0f;
  if (col < cols)
    for (int64_t w = threadIdx.y; w < workers; w += partial_sum_slices) sum += partials[w * cols + col];
  slice_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < partial_sum_slices; ++y) total += slice_sums[y][threadIdx.x];
    out[col] = convert<W>(total);
  }
}

template <class W>
void launch_sum_partials(void* out, const float* partials, int64_t workers, int cols, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, partial_sum_columns)));
  const dim3 block(partial_sum_columns, partial_sum_slices);
  sum_partials_kernel<W><<<grid, block, 0, stream>>>(static_cast<W*>(out), partials, workers, cols);
  TILEKIT_CHECK_LAUNCH("sum_partials_kernel");
}

#endif  // __CUDACC__

}  // namespace tilekit::kernels::norms_detail
