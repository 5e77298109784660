// Cross-entropy forward (optionally with dlogits) and backward (see cross_entropy.h for the
// contract, common/row_kernel.cuh for how rows are streamed and mapped onto warps, CTAs and
// clusters).
//
// Forward, per row, one read of the logits (and with the fused gradient one write of dlogits):
//   1. load this thread's columns into registers (padding = -inf): as floats, or, for 16-bit
//      logits, as packed pairs (without dlogits from 1K columns on, packed_row_table; with
//      dlogits, bf16 from 2K on, fused_packed_table, fp16 from 32K on, fused_wide_table);
//      without dlogits, misaligned rows order-free (load_row_pairs_unordered: the statistics
//      need no column order, so no funnel shift; 4K-32K +9-23% on an H100, 2026-12-06);
//   2. per warp: m = max (shuffles), the exponentials exp(x - m) (in place on the float path)
//      and their sum, and the sum of the logits (label smoothing only), both sums reduced over
//      the warp in one butterfly;
//   3. ONE reduction of the warps' partials (ce_stats_op: an online-softmax combine for (m, s),
//      a plain sum for the logits), so the row needs a single CTA/cluster exchange; rows of 32K
//      columns and more without dlogits are streamed: read segment by segment by one group,
//      each thread folding its columns into running statistics, its warp combining them once
//      per row (streamed_partial);
//   4. lse = M + log S; the leader writes lse, the thread holding the label's column (it reads
//      the label's logit from the staged row) writes the loss; with the fused gradient every
//      thread turns its exponentials into dlogits = g * (p * (1 + 2 z lse) - eps / V) (from
//      packed pairs: recomputed, one 16-byte group at a time), and the label's owner then
//      rewrites its one element with the extra -(1 - eps) g (patch_label_dlogit).
// Backward: every element is independent once lse is known (no reduction): read logits, write
// dlogits (the label's element patched the same way). Labels, lse and upstream gradients are
// per-row scalars fetched one item ahead.
#include "cross_entropy/cross_entropy.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "common/arg_checks.h"
#include "common/row_kernel.cuh"
#include "cross_entropy/cross_entropy_tables.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"

namespace tilekit::kernels {

namespace detail {
namespace {

// Written as the loss (and gradient) of rows whose label is neither ignore_index nor in [0, vocab).
constexpr float invalid_label_marker = std::numeric_limits<float>::quiet_NaN();

// The per-row statistics of the forward, reduced together over the warps of the row (16 bytes:
// one st.async per CTA at the cluster level).
struct ce_stats {
  float max;         // max of the logits
  float sum_exp;     // sum of exp(logit - max)
  float sum_logits;  // sum of the logits (only with label smoothing, else 0)
  float unused;      // pads the partial to one 16-byte st.async
};

struct ce_stats_op {
  TILEKIT_DEVICE TILEKIT_INLINE ce_stats operator()(ce_stats a, ce_stats b) const {
    const max_sum m = max_sum_op{}(max_sum{a.max, a.sum_exp}, max_sum{b.max, b.sum_exp});
    return {m.max, m.sum, a.sum_logits + b.sum_logits, 0.f};
  }
};

struct ce_forward_params {
  const void* logits;
  const int64_t* labels;
  float* loss;
  float* lse;
  void* dlogits;
  const float* grad_per_row;
  int64_t grad_stride;  // elements between rows' upstream gradients (0: one for every row)
  int64_t rows;
  int cols;  // vocabulary size
  int64_t logits_row_stride;
  int64_t dlogits_row_stride;
  int64_t ignore_index;
  float label_smoothing;
  float smoothing_per_class;  // label_smoothing / vocab, divided once on the host
  float z_loss_weight;
  float grad_scale;
};

struct ce_backward_params {
  void* dlogits;
  const void* logits;
  const int64_t* labels;
  const float* lse;
  const float* grad_per_row;
  int64_t grad_stride;  // elements between rows' upstream gradients (0: one for every row)
  int64_t rows;
  int cols;  // vocabulary size
  int64_t logits_row_stride;
  int64_t dlogits_row_stride;
  int64_t ignore_index;
  float label_smoothing;
  float smoothing_per_class;  // label_smoothing / vocab, divided once on the host
  float z_loss_weight;
  float grad_scale;
};

// What a row needs besides its logits: its label (and for the backward its lse and upstream
// gradient), fetched one item ahead by the row kernel.
struct ce_row {
  int64_t label = 0;
  float lse = 0.f;
  float grad = 0.f;  // upstream gradient of the row before grad_scale (1 without grad_per_row)
};

template <class P>
TILEKIT_DEVICE TILEKIT_INLINE ce_row fetch_ce_row(const P& p, int64_t row, bool with_lse) {
  ce_row r;
  r.label = p.labels[row];
  r.grad = p.grad_per_row ? p.grad_per_row[row * p.grad_stride] : 1.f;
  if (with_lse) r.lse = p.lse[row];
  return r;
}

// Upstream gradient of a row: 0 for ignored rows, NaN for invalid labels.
TILEKIT_DEVICE TILEKIT_INLINE float row_gradient(const ce_row& r, float grad_scale, bool ignored, bool label_in_range) {
  if (ignored) return 0.f;
  if (!label_in_range) return invalid_label_marker;
  return grad_scale * r.grad;
}

// The label of a row as the row op sees it: whether it is ignored or valid, and whether THIS
// thread holds its column (exactly one thread of the row does when it is valid and not
// ignored). The thread owning the label reads its logit from the staged row in shared memory,
// writes the loss and patches the label's dlogit, so no loop over the registers compares
// columns with the label.
struct ce_label {
  bool ignored;
  bool in_range;
  bool owned;
  int column;  // the label's column in this CTA's chunk (meaningful when owned)
};
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE ce_label locate_label(const ce_row& r, const row_place& at, int64_t ignore_index,
                                                   int vocab) {
  ce_label l;
  l.ignored = r.label == ignore_index;
  l.in_range = r.label >= 0 && r.label < vocab;
  const int64_t column = r.label - at.col0;
  l.column = int(column);
  // Round-robin layouts (aligned rows) spell owner() out: written through owner() or a
  // variable, this expression made nvcc emit other machine code for the 256-column classes,
  // never measured.
  if constexpr (Layout::blocks == 1)
    l.owned = !l.ignored && l.in_range && column >= 0 && column < at.cols &&
              (uint32_t(column) / Layout::group_elements) % Layout::threads == uint32_t(at.thread);
  else
    l.owned = !l.ignored && l.in_range && column >= 0 && column < at.cols &&
              Layout::owner(column) == uint32_t(at.thread);
  return l;
}

// p = exp(x - lse) = 2^((x - lse) log2 e) of a column once the row's lse is known: the
// backward's form, also the forward's packed path, which thus writes the same bits as the
// backward (test FusedForwardWritesTheBackwardsBits). Two forms of the exponent:
//   exact:  (x - lse) log2 e, x - lse first (exact for x near lse): FADD + FMUL;
//   fused:  x log2 e - lse log2 e, one FFMA, lse log2 e rounded once per row. Its exponent is off
//           by at most half an ulp of lse log2 e, of the order of lse's own fp32 rounding (at most
//           ~1.4 times it in natural units): p's relative error below 1e-6 at lse < 22, 2.1e-5
//           at lse ~ 500, far below a 16-bit dlogit's rounding (bf16 2^-9, fp16 2^-12).
// The fused form for 16-bit logits of rows over 32K columns (fused_exponent_above_cols), where it
// measured faster: dlogits this way (here, in both kernels) +1.5 / +1.7 / +1.8% at 64K / 128K /
// 256K in the forward with dlogits, but -0.5 to -0.7% at 32K and -0.6 to +0.2% at 4K-16K (H200,
// 2026-12-04, same-run A/B, bf16, 2 rounds; the backward within +-0.6% everywhere); that
// forward's statistics this way too (warp_statistics, x log2 e - m log2 e with the warp max m)
// another +0.7-1.0 / +1.0-1.2 / +1.2-1.7%. Both forms need lse log2 e (m log2 e) finite: |lse| <
// 2.3e38, i.e. no bf16 logits above 70% of the largest float (softmax.cu's shift has the same
// bound). The forward's and the backward's size classes both end at 32768 columns
// (static_assert below the ops), so both take the same form for any vocabulary.
inline constexpr int fused_exponent_above_cols = 32768;
template <class T, class S>
inline constexpr bool fused_exponent = is_16bit_float<T> && S::config.max_cols > fused_exponent_above_cols;
template <bool Fused>
struct row_probability {
  float lse;
  float lse_log2e;
  TILEKIT_DEVICE TILEKIT_INLINE explicit row_probability(float row_lse) : lse(row_lse), lse_log2e(row_lse * log2e) {}
  TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const {
    if constexpr (Fused) return exp2_fast(fmaf(x, log2e, -lse_log2e));
    else return exp2_fast((x - lse) * log2e);
  }
};
// Whether an op's size classes split at fused_exponent_above_cols (so that a vocabulary's class
// in the forward and in the backward agree on the form).
constexpr bool splits_at_fused_exponent(const row_table& t) {
  return t.configs[t.index(fused_exponent_above_cols)].max_cols == fused_exponent_above_cols;
}

// dlogit of a column from its logit: g * (p (1 + 2 z lse) - eps / V), with probability_scale =
// g (1 + 2 z lse) and uniform_target = g eps / V.
template <bool Fused>
TILEKIT_DEVICE TILEKIT_INLINE float dlogit_from_logit(float x, const row_probability<Fused>& p, float probability_scale,
                                                      float uniform_target) {
  return fmaf(p(x), probability_scale, -uniform_target);
}

// The label's column of a stored dlogits row also has the target's -(1 - eps) g: label_dlogit
// gives its value from the label's exponential e (computed as the row's others were), and
// patch_label_dlogit has the label's owner store it over the column after the row's store
// (`dlogit` is called in the owner only). The row's store wrote that column from
//   aligned rows: the owner itself (each thread stores its own columns): one thread, one address,
//     the two stores stay in program order;
//   realigned rows (store_row's Realign, the shifted schedules): possibly another lane, but always
//     one of the owner's warp (a warp's realigned stores write exactly its lanes' columns:
//     realigned_writer; tests/gpu/test_row_io.cu stores from one warp at a time), so the warp
//     first passes a __syncwarp, which orders every lane's stores before it ahead of the owner's
//     after it (CUDA: "memory ordering among threads participating in the barrier").
// Every lane of the warp calls patch_label_dlogit (rows are warp-uniform). Putting the value into
// the owner's register before the row's one store instead (a select unrolled over the registers)
// was up to 17% slower at the odd widths (docs/performance_log.md, "The label's dlogit").
TILEKIT_DEVICE TILEKIT_INLINE float label_dlogit(float e, float probability_scale, float uniform_target, float g,
                                                 float smoothing) {
  return fmaf(e, probability_scale, -(uniform_target + g * (1.f - smoothing)));
}
template <class S, class T, class F>
TILEKIT_DEVICE TILEKIT_INLINE void patch_label_dlogit(T* out, const ce_label& label, F dlogit) {
  if constexpr (S::shifted) __syncwarp();
  if (label.owned) out[label.column] = convert<T>(dlogit());
}
// The dlogits of a row held as packed pairs (schedule S), one 16-byte group at a time
// (store_row_from_pairs), then the label's column (patch_label_dlogit, `label_value` its
// dlogit): the forward with dlogits and the backward both write their packed rows with this, so
// from the same lse they write the same bits.
template <class S, class T, bool Fused, class F>
TILEKIT_DEVICE TILEKIT_INLINE void store_dlogits_from_pairs(T* out, const packed_t<T> (&pairs)[S::layout::elements / 2],
                                                            const row_probability<Fused>& probability,
                                                            float probability_scale, float uniform_target, int cols,
                                                            int thread, const ce_label& label, F label_value) {
  store_row_from_pairs<typename S::layout, 1, cache_policy::streaming, S::shifted>(
      out, pairs, [&](float x) { return dlogit_from_logit(x, probability, probability_scale, uniform_target); }, cols,
      thread);
  patch_label_dlogit<S>(out, label, label_value);
}

// The sum of a thread's logits, padding (the registers that hold no column: held_columns)
// skipped: over floats, or over packed pairs (register j of the layout = element j % 2 of pair
// j / 2). Four independent chains: one chain of 32 dependent FADDs would be the longest latency
// of a 1K row. `whole`: held_columns::warp_all (no thread of the warp holds padding).
template <class Held, class V, int N>
TILEKIT_DEVICE TILEKIT_INLINE float sum_of_logits(const V (&values)[N], const Held& held, int thread, bool whole) {
  auto element = [&](int j) {
    if constexpr (std::is_same_v<V, float>) return values[j];
    else return j % 2 == 0 ? unpack_pair(values[j / 2]).x : unpack_pair(values[j / 2]).y;
  };
  float sums[4] = {0.f, 0.f, 0.f, 0.f};
  constexpr int elements = std::is_same_v<V, float> ? N : 2 * N;
  if (whole) {
#pragma unroll
    for (int j = 0; j < elements; ++j) sums[j % 4] += element(j);
  } else {  // the warps holding a tail (or, in shifted rows, the lead)
#pragma unroll
    for (int j = 0; j < elements; ++j)
      if (held.holds(thread, j)) sums[j % 4] += element(j);
  }
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

// A warp's partial from its max m and this thread's sums: one butterfly for both sums (their
// shuffles interleave; two butterflies one after the other would add five shuffle latencies
// to every row), or for the exponentials alone without label smoothing (uniform branch).
struct two_sums {
  float exp;
  float logits;
};
struct two_sums_op {
  TILEKIT_DEVICE TILEKIT_INLINE two_sums operator()(two_sums a, two_sums b) const {
    return {a.exp + b.exp, a.logits + b.logits};
  }
};
TILEKIT_DEVICE TILEKIT_INLINE ce_stats warp_partial(float m, float sum_exp, float sum_logits, bool with_logit_sum) {
  if (!with_logit_sum) return {m, warp_reduce(sum_exp, sum_op{}), 0.f, 0.f};
  const two_sums s = warp_reduce(two_sums{sum_exp, sum_logits}, two_sums_op{});
  return {m, s.exp, s.logits, 0.f};
}

// The packed path's warp partial: (max, sum of exp(x - max)) in natural units and, with label
// smoothing, the sum of the logits. A warp without padding takes both sums in one pass (each
// pair unpacked once, one more FADD per element); a warp with padding (-inf: the tail, or in
// shifted rows read order-free the lead; held_columns::warp_all) sums its logits separately,
// register by register. A warp of padding only gives (-inf, 0, 0), one of -inf logits (-inf, 0,
// -inf). Fused: the exponents as x log2 e - m log2 e, one FFMA (see
// row_probability; the max's own term is then 1 only to ~1e-7).
// OnePass (the shifted rows with dlogits): every warp takes the one pass, and a thread holding
// padding then sums its logits again, so that a row's tail warp runs the other warps' code
// instead of code of its own while they wait for it at the row's reduction. With the overread
// loads (row_io.cuh), H100 same-run A/B (2026-12-06), with dlogits 2047 / 4095 / 8191 / 16383 /
// 32767 columns: per-warp choice 1.114 / 1.085 / 1.079 / 1.067 / 1.094x of main, OnePass 1.090 /
// 1.123 / 1.113 / 1.115 / 1.211x. Without the overread loads OnePass gained only ~1%
// (docs/performance_log.md, "The tail warp's loads").
template <bool Fused = false, bool OnePass = false, class Held, class P, int N>
TILEKIT_DEVICE TILEKIT_INLINE ce_stats warp_statistics(const P (&pairs)[N], const Held& held, int thread,
                                                       bool with_logit_sum) {
  const float m = tilekit::detail::warp_max(pairs);
  if (m == -infinity)  // warp-uniform
    return warp_partial(m, 0.f, with_logit_sum ? sum_of_logits(pairs, held, thread, false) : 0.f, with_logit_sum);
  const float m_log2e = m * log2e;
  const auto exponent = [m, m_log2e](float x) {
    if constexpr (Fused) return fmaf(x, log2e, -m_log2e);
    else return (x - m) * log2e;
  };
  float sum_exp = 0.f, sum_logits = 0.f;
  if (with_logit_sum && (OnePass || held.warp_all(thread))) {
    float s0 = 0.f, s1 = 0.f, t0 = 0.f, t1 = 0.f;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float2 x = unpack_pair(pairs[j]);
      s0 += exp2_fast(exponent(x.x));
      s1 += exp2_fast(exponent(x.y));
      t0 += x.x;
      t1 += x.y;
    }
    sum_exp = s0 + s1;
    sum_logits = t0 + t1;
    if (OnePass && !held.all(thread)) sum_logits = sum_of_logits(pairs, held, thread, false);
  } else {
    sum_exp = tilekit::detail::exp2_sum_of(pairs, exponent);
    if (with_logit_sum) sum_logits = sum_of_logits(pairs, held, thread, false);
  }
  return warp_partial(m, sum_exp, sum_logits, with_logit_sum);
}

// Cross-entropy forward as a row op (common/row_kernel.cuh runs it over the rows). Without
// dlogits its rows end in two scalars (loss, lse), so they are deferred rows: partial() gives
// the row's warp statistics, the kernel posts them and finish() writes the loss, for rows of 4
// warps or more one row later, while the next row is computed (no warp or CTA of the row waits
// for the others); narrower rows take row(), which does both at once.
// With dlogits, row() does both and then writes the gradient.
template <class T, bool WriteGradient>
struct ce_forward_op : row_op_defaults {
  using element = T;
  using reduce_value = ce_stats;
  using params = ce_forward_params;
  using row_scalars = ce_row;
  static constexpr int inputs = 1;
  // With dlogits rows are not deferred: keeping the logits' pairs, label and gradient of the
  // row in flight while the next row is read spilled ~100 bytes per thread at the register cap
  // (packed clusters of 4-8 CTAs: 128K 0.767 -> 0.595, 256K 0.757 -> 0.598x copy; H200,
  // 2026-12-01), and deferred without spills (the pairs taken from the stage by keep(), the
  // statistics read from it in blocks) the packed clusters still lost: 64K / 128K / 256K
  // 0.919 / 0.899 / 0.887x of the undeferred kernel (H200, 2026-12-03; docs/performance_log.md,
  // "CE forward + dlogits, 2026-12-03").
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(row_config) { return !WriteGradient; }
  // Item order (row_kernel.cuh, "Item order"): claimed, these kernels measured 2-16% slower, so
  // the static order, but paced with dlogits for one-CTA rows of 2K-32K columns. bf16, H200,
  // 2026-12-01, same-binary A/B static -> paced: with dlogits 4K / 8K / 16K / 32K 0.861 / 0.868
  // / 0.867 / 0.865 -> 0.886 / 0.883 / 0.883 / 0.897x copy (07:11 UTC; 1K 0.857 -> 0.821 and
  // clusters 1-2% slower at 06:11); without dlogits paced lost 1-10% at every width. Claimed
  // over the clusters with dlogits, 64K / 128K / 256K lost 1.4 / 2.3 / 3.0% (2026-12-03).
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return WriteGradient && c.cluster_ctas == 1 && c.max_cols >= 2048 ? item_order::paced : item_order::fixed;
  }
  // 16-bit logits held as packed pairs (packed_rows<S>): without dlogits from 1K columns on
  // (packed_row_table: 32 columns per thread at 1K, whose max takes one HMNMX2 per pair, then
  // 64, which spread the per-row work of this instruction-bound reduction over twice the
  // elements); with dlogits, bf16 from 2K on (fused_packed_table) and fp16 from 32K on
  // (fused_wide_table: 64 columns, half the cluster; the exponentials are recomputed in the
  // output pass, as the backward does). bf16 with dlogits measured 4K / 8K / 16K 0.840 /
  // 0.806 / 0.816 -> 0.860 / 0.863 / 0.868x copy as 64 columns of pairs instead of 32 floats,
  // 1K 0.858 -> 0.853 as 32 pairs (so 1K keeps floats; H200, 2026-12-01, same-run A/B, after
  // the dlogits were written by groups). fp16 keeps 32 floats below 32K: its pairs spill
  // there (20-76 bytes; not measured).
  // Without dlogits, rows from 32K columns on are streamed instead (streamed_packed_table /
  // streamed_table in cross_entropy_tables.cuh).
  static constexpr const row_table& table = WriteGradient ? (std::is_same_v<T, bf16>   ? fused_packed_table
                                                           : is_16bit_float<T> ? fused_wide_table
                                                                               : default_row_table)
                                                          : (is_16bit_float<T> ? streamed_packed_table : streamed_table);
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int) {
    return {static_cast<const T*>(p.logits), p.logits_row_stride};
  }
  TILEKIT_DEVICE static row_scalars fetch(const params& p, int64_t row) { return fetch_ce_row(p, row, false); }

  // What finish() needs of a row besides its statistics.
  struct label_state {
    ce_label label;
    float label_logit;  // the label's logit, read by the thread that owns its column
  };
  // Streamed rows also carry this thread's running statistics over the row's segments.
  struct streamed_state : label_state {
    float max;         // of this thread's logits so far
    float sum_exp;     // of exp(logit - max) over them
    float sum_logits;  // of them (label smoothing only, else 0)
  };
  template <class S>
  using pending = std::conditional_t<S::segmented, streamed_state, label_state>;

  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE ce_stats partial(const params& p, const row_place& at, int64_t, const ce_row& r,
                                                 const stage_row<S> (&in)[1], pending<S>& out) {
    using layout = typename S::layout;
    const int cols = at.cols;
    // Streamed rows: segment 0 starts the label state, the segment that holds the label's
    // column (for this thread) completes it.
    const ce_label label = locate_label<layout>(r, at, p.ignore_index, p.cols);
    if (at.segment == 0 || label.owned) {
      out.label = label;
      out.label_logit = label.owned ? convert<float>(in[0][label.column]) : 0.f;
    }
    if constexpr (S::segmented) {
      return streamed_partial<S>(p, at, in[0], out);
    } else if constexpr (packed_rows<S>) {
      packed_t<T> pairs[layout::elements / 2];
      const auto held = load_row_pairs_unordered<layout>(pairs, in[0], cols, at.thread, convert<T>(-infinity));
      return warp_statistics(pairs, held, at.thread, p.label_smoothing != 0.f);
    } else {
      float values[layout::elements];
      const auto held = load_row_unordered<layout>(values, in[0], cols, at.thread, -infinity);
      return float_statistics(values, held, at.thread, p.label_smoothing != 0.f);
    }
  }

  // A segment of a streamed row: each thread folds its columns into its running (max, sum of
  // exp(x - max), sum of x), rescaling the sum when the max grows (one exponential per thread
  // and segment); the warp combines the threads' statistics (ce_stats_op) only at the row's last
  // segment, so the other segments need no shuffle at all.
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE static ce_stats streamed_partial(const params& p, const row_place& at,
                                                                 stage_row<S> segment, streamed_state& out) {
    using layout = typename S::layout;
    const int cols = at.cols;
    const bool with_logit_sum = p.label_smoothing != 0.f;
    float m = 0.f, sum_exp = 0.f, sum_logits = 0.f;
    if constexpr (packed_rows<S>) {
      packed_t<T> pairs[layout::elements / 2];
      const auto held = load_row_pairs_unordered<layout>(pairs, segment, cols, at.thread, convert<T>(-infinity));
      m = tilekit::detail::thread_max(pairs);
      if (at.segment > 0) m = fmaxf(m, out.max);
      if (m != -infinity)  // else only padding (or -inf logits) so far: a sum of 0
        sum_exp = tilekit::detail::exp2_sum_of(pairs, [m](float x) { return (x - m) * log2e; });
      if (with_logit_sum) sum_logits = sum_of_logits(pairs, held, at.thread, held.warp_all(at.thread));
    } else {
      float values[layout::elements];
      const auto held = load_row_unordered<layout>(values, segment, cols, at.thread, -infinity);
      if (with_logit_sum) sum_logits = sum_of_logits(values, held, at.thread, held.warp_all(at.thread));
      m = tilekit::detail::thread_max(values);
      if (at.segment > 0) m = fmaxf(m, out.max);
      if (m != -infinity) sum_exp = tilekit::detail::exp2_in_place(values, [m](float x) { return (x - m) * log2e; });
    }
    if (at.segment > 0) {
      if (out.max != -infinity) sum_exp = fmaf(out.sum_exp, exp2_fast((out.max - m) * log2e), sum_exp);
      sum_logits += out.sum_logits;
    }
    out.max = m;
    out.sum_exp = sum_exp;
    out.sum_logits = sum_logits;
    if (at.segment + 1 < at.segments) return {};  // not posted
    return warp_reduce(ce_stats{m, sum_exp, sum_logits, 0.f}, ce_stats_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE ce_stats total(const params&, const ce_stats* partials, uint32_t count) const {
    return reduce_slots(partials, count, ce_stats_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(const params& p, const row_place& at, int64_t row, const label_state& pend,
                                            const ce_stats& total) {
    write_loss(p, at, row, pend, total);
  }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, const ce_row& r,
                                         const stage_row<S> (&in)[1], const Ctx& ctx) {
    if constexpr (WriteGradient) {
      row_with_gradient<S>(p, at, row, r, in, ctx);
    } else {  // rows of fewer than row_defer_min_warps warps: both halves at once
      label_state pend;
      const ce_stats warp = partial<S>(p, at, row, r, in, pend);
      write_loss(p, at, row, pend, ctx.reduce_warps(warp, ce_stats_op{}));
    }
  }

 private:
  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row_with_gradient(const params& p, const row_place& at, int64_t row, const ce_row& r,
                                                       const stage_row<S> (&in)[1], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = at.cols;
    const ce_label label = locate_label<layout>(r, at, p.ignore_index, p.cols);
    const float smoothing = p.label_smoothing;
    const float label_logit = label.owned ? convert<float>(in[0][label.column]) : 0.f;

    // Per warp: (max, sum of exp(x - max)) with exponents (x - max) log2 e: the max's term is
    // exactly 1, so lse and the loss are exact for a one-element row (loss 0 at vocab = 1), at
    // one more instruction per element than the base-2 form softmax uses. Packed rows of over 32K
    // columns (no one-element rows there) take the base-2 form instead, x log2 e - max log2 e
    // (fused_exponent, see row_probability). The sum of the logits only with label smoothing
    // (uniform branch).
    constexpr bool packed = packed_rows<S>;
    ce_stats warp;
    [[maybe_unused]] float values[packed ? 1 : layout::elements];
    [[maybe_unused]] packed_t<T> pairs[packed ? layout::elements / 2 : 1];
    if constexpr (packed) {
      // Shifted rows: overread (row_io.cuh), so that the tail's warp loads as the others do.
      if constexpr (S::shifted)
        load_row_pairs_aligned<layout>(pairs, overread(in[0]), cols, at.thread, convert<T>(-infinity));
      else
        load_row_pairs_aligned<layout>(pairs, in[0], cols, at.thread, convert<T>(-infinity));
      warp = warp_statistics<fused_exponent<T, S>, S::shifted>(pairs, held_columns<layout, false>{cols}, at.thread,
                                                              smoothing != 0.f);
    } else {
      if constexpr (S::shifted) load_row_aligned<layout>(values, overread(in[0]), cols, at.thread, -infinity);
      else load_row_aligned<layout>(values, in[0], cols, at.thread, -infinity);
      // values := exp(x - warp max)
      warp = float_statistics(values, held_columns<layout, false>{cols}, at.thread, smoothing != 0.f);
    }
    const ce_stats total = ctx.reduce_warps(warp, ce_stats_op{});
    const float lse = write_loss(p, at, row, {label, label_logit}, total);

    if constexpr (packed) {
      // dlogits from the pairs with the backward's formula and operations (bit-identical to
      // what cross_entropy_backward writes from this lse).
      const float g = row_gradient(r, p.grad_scale, label.ignored, label.in_range);
      const float probability_scale = g * (1.f + 2.f * p.z_loss_weight * lse);
      const float uniform_target = g * p.smoothing_per_class;
      const row_probability<fused_exponent<T, S>> probability(lse);
      // One 16-byte group at a time (store_row_from_pairs): the whole row's dlogits as floats
      // next to its pairs spilled at the 128-register cap (136 bytes at 32K), by groups nothing
      // does. H200, 2026-12-01, same-run A/B: 32K / 64K / 128K / 256K 0.771 / 0.783 / 0.713 /
      // 0.682 -> 0.868 / 0.839 / 0.767 / 0.756x copy.
      T* out = static_cast<T*>(p.dlogits) + row * p.dlogits_row_stride + at.col0;
      store_dlogits_from_pairs<S>(out, pairs, probability, probability_scale, uniform_target, cols, at.thread, label, [&] {
        return label_dlogit(probability(label_logit), probability_scale, uniform_target, g, smoothing);
      });
    } else {
      const float g = row_gradient(r, p.grad_scale, label.ignored, label.in_range);
      // p_j = values[j] * exp(warp max - M) / S; d/dx_j of z lse^2 = 2 z lse p_j.
      const float probability_scale =
          exp2_fast((warp.max - total.max) * log2e) / total.sum_exp * (g * (1.f + 2.f * p.z_loss_weight * lse));
      const float uniform_target = g * p.smoothing_per_class;
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) values[j] = fmaf(values[j], probability_scale, -uniform_target);
      T* out = static_cast<T*>(p.dlogits) + row * p.dlogits_row_stride + at.col0;
      store_row<layout, cache_policy::streaming, S::shifted>(out, values, cols, at.thread);
      // The label's exponential recomputed exactly as float_statistics did (same bits).
      patch_label_dlogit<S>(out, label, [&] {
        return label_dlogit(exp2_fast((label_logit - warp.max) * log2e), probability_scale, uniform_target, g,
                            smoothing);
      });
    }
  }

  // The float path's warp partial; values := exp(x - warp max) in natural units (the max's term
  // is exactly 1, so lse and the loss are exact for a one-element row: loss 0 at vocab = 1).
  template <class Held, int N>
  TILEKIT_DEVICE TILEKIT_INLINE static ce_stats float_statistics(float (&values)[N], const Held& held, int thread,
                                                                 bool with_logit_sum) {
    const float sum_logits = with_logit_sum ? sum_of_logits(values, held, thread, held.warp_all(thread)) : 0.f;
    const float m = tilekit::detail::warp_max(values);
    if (m == -infinity) {  // warp-uniform: padding (or -inf logits) only
#pragma unroll
      for (int j = 0; j < N; ++j) values[j] = 0.f;
      return warp_partial(m, 0.f, sum_logits, with_logit_sum);
    }
    const float sum_exp = tilekit::detail::exp2_in_place(values, [m](float x) { return (x - m) * log2e; });
    return warp_partial(m, sum_exp, sum_logits, with_logit_sum);
  }

  // lse = M + log S (lg2.approx: absolute error ~2^-22 on log2(S), S >= 1, lg2(1) = 0 exactly);
  // the leader writes it, the thread holding the label's column writes the loss (the leader when
  // there is no valid label). Returns lse.
  TILEKIT_DEVICE TILEKIT_INLINE static float write_loss(const params& p, const row_place& at, int64_t row,
                                                        const label_state& pend, const ce_stats& total) {
    const float lse = total.max + log2_fast(total.sum_exp) * ln2;
    if (at.leader() && p.lse) p.lse[row] = lse;
    const ce_label& label = pend.label;
    if (label.owned || (at.leader() && (label.ignored || !label.in_range))) {
      float loss = 0.f;
      if (!label.ignored) {
        const float smoothing = p.label_smoothing;
        loss = label.in_range ? lse - (1.f - smoothing) * pend.label_logit -
                                    total.sum_logits * p.smoothing_per_class + p.z_loss_weight * lse * lse
                              : invalid_label_marker;
      }
      p.loss[row] = loss;
    }
    return lse;
  }
};

// Backward: every element is independent once lse is known (no reduction): read logits,
// write dlogits, through the same streamed rows as the forward.
//   dlogits_j = g * (p_j * (1 + 2 z lse) - eps / V - (1 - eps) [j == label]),  p_j = exp(x_j - lse).
template <class T>
struct ce_backward_op : row_op_defaults {
  using element = T;
  using reduce_value = float;
  using params = ce_backward_params;
  using row_scalars = ce_row;
  static constexpr int inputs = 1;
  // 16-bit logits: one class more, rows of 131073-163840 columns over 5 CTAs (backward_wide_table,
  // cross_entropy_tables.cuh).
  static constexpr const row_table& table = is_16bit_float<T> ? backward_wide_table : default_row_table;
  // Claimed with one CTA per worker (the default), paced over clusters. bf16, H200, 2026-12-01,
  // same-binary A/B, x copy: 32K / 64K / 128K / 256K static 0.876 / 0.885 / 0.887 / 0.853 ->
  // paced 0.912 / 0.918 / 0.911 / 0.904 (claimed over clusters had lost 1-3%); 1K-8K claimed
  // 0.91-0.92, paced 0.89-0.90.
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas == 1 ? item_order::claimed : item_order::paced;
  }
  TILEKIT_HOST_DEVICE static row_source<T> source(const params& p, int) {
    return {static_cast<const T*>(p.logits), p.logits_row_stride};
  }
  TILEKIT_DEVICE static row_scalars fetch(const params& p, int64_t row) { return fetch_ce_row(p, row, true); }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const row_place& at, int64_t row, const ce_row& r,
                                         const stage_row<S> (&in)[1], const Ctx&) {
    using layout = typename S::layout;
    const int cols = at.cols;
    const ce_label label = locate_label<layout>(r, at, p.ignore_index, p.cols);
    const float g = row_gradient(r, p.grad_scale, label.ignored, label.in_range);
    const float probability_scale = g * (1.f + 2.f * p.z_loss_weight * r.lse);
    const float uniform_target = g * p.smoothing_per_class;
    const row_probability<fused_exponent<T, S>> probability(r.lse);
    auto label_value = [&] {
      return label_dlogit(probability(convert<float>(in[0][label.column])), probability_scale, uniform_target, g,
                          p.label_smoothing);
    };
    if constexpr (packed_rows<S>) {
      // 64 columns per thread (backward_wide_table): held as pairs and written one 16-byte group
      // at a time, as the forward with dlogits does (as 64 floats the shifted kernel spilled).
      packed_t<T> pairs[layout::elements / 2];
      if constexpr (S::shifted) load_row_pairs_aligned<layout>(pairs, overread(in[0]), cols, at.thread, convert<T>(0.f));
      else load_row_pairs_aligned<layout>(pairs, in[0], cols, at.thread, convert<T>(0.f));
      T* out = static_cast<T*>(p.dlogits) + row * p.dlogits_row_stride + at.col0;
      store_dlogits_from_pairs<S>(out, pairs, probability, probability_scale, uniform_target, cols, at.thread, label,
                                  label_value);
      return;
    }
    float values[layout::elements];
    if constexpr (S::shifted) load_row_aligned<layout>(values, overread(in[0]), cols, at.thread, 0.f);
    else load_row_aligned<layout>(values, in[0], cols, at.thread, 0.f);
#pragma unroll
    for (int j = 0; j < layout::elements; ++j)
      values[j] = dlogit_from_logit(values[j], probability, probability_scale, uniform_target);
    T* out = static_cast<T*>(p.dlogits) + row * p.dlogits_row_stride + at.col0;
    store_row<layout, cache_policy::streaming, S::shifted>(out, values, cols, at.thread);
    patch_label_dlogit<S>(out, label, label_value);
  }
};

// The forward with dlogits and the backward take the same exponent form for a vocabulary (see
// row_probability): their size classes split where the form changes.
static_assert(splits_at_fused_exponent(ce_forward_op<bf16, true>::table) &&
                  splits_at_fused_exponent(ce_forward_op<fp16, true>::table) &&
                  splits_at_fused_exponent(ce_backward_op<bf16>::table) &&
                  splits_at_fused_exponent(ce_backward_op<fp16>::table),
              "cross-entropy: the forward's and the backward's classes must split at fused_exponent_above_cols");

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

void check_upstream_gradient(const float* grad_per_row, int64_t grad_per_row_stride, int64_t rows,
                             float grad_scale) {
  if (grad_per_row) {
    check_pointer(grad_per_row, "grad_per_row", sizeof(float));
    TILEKIT_CHECK_ARG(grad_per_row_stride >= 0, "grad_per_row_stride: must be >= 0 (0: one gradient for every row), got ",
                      grad_per_row_stride);
    TILEKIT_CHECK_ARG(grad_per_row_stride <= std::numeric_limits<int64_t>::max() / std::max<int64_t>(rows, 1),
                      "grad_per_row_stride: rows * stride overflows int64 (rows ", rows, ", stride ",
                      grad_per_row_stride, ")");
  }
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
    detail::check_upstream_gradient(a.grad_per_row, a.grad_per_row_stride, a.rows, a.grad_scale);
  }
}

void validate(const cross_entropy_backward_args& a) {
  detail::check_type(a.type, "type");
  const int bytes = dtype_bytes(a.type);
  detail::check_pointer(a.dlogits, "dlogits", bytes);
  detail::check_pointer(a.logits, "logits", bytes);
  detail::check_pointer(a.labels, "labels", sizeof(int64_t));
  detail::check_pointer(a.lse, "lse", sizeof(float));
  detail::check_upstream_gradient(a.grad_per_row, a.grad_per_row_stride, a.rows, a.grad_scale);
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
                                         a.grad_per_row_stride,
                                         a.rows,
                                         int(a.vocab),
                                         a.logits_row_stride,
                                         a.dlogits_row_stride,
                                         a.ignore_index,
                                         a.label_smoothing,
                                         a.label_smoothing / float(a.vocab),
                                         a.z_loss_weight,
                                         a.grad_scale};
  const bool write_gradient = a.dlogits != nullptr;
  detail::dispatch_type(a.type, [&]<class T>() {
    if (write_gradient) detail::run_rows<detail::ce_forward_op<T, true>>(params, stream);
    else detail::run_rows<detail::ce_forward_op<T, false>>(params, stream);
  });
}

void cross_entropy_backward(const cross_entropy_backward_args& a, cudaStream_t stream) {
  validate(a);
  const detail::ce_backward_params params{a.dlogits,
                                          a.logits,
                                          a.labels,
                                          a.lse,
                                          a.grad_per_row,
                                          a.grad_per_row_stride,
                                          a.rows,
                                          int(a.vocab),
                                          a.logits_row_stride,
                                          a.dlogits_row_stride,
                                          a.ignore_index,
                                          a.label_smoothing,
                                          a.label_smoothing / float(a.vocab),
                                          a.z_loss_weight,
                                          a.grad_scale};
  detail::dispatch_type(a.type,
                        [&]<class T>() { detail::run_rows<detail::ce_backward_op<T>>(params, stream); });
}

}  // namespace tilekit::kernels
