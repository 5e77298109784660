#pragma once
// The reduction ladder of the memory-bound kernels (norms, softmax, cross-entropy):
//
//   thread  : the caller folds its registers into one value
//   warp    : warp_reduce       butterfly of __shfl_xor_sync, every lane gets the result
//   CTA     : block_reduce      one value per warp through shared memory, then log2(warps)
//                               shuffle levels over the partials (group_reduce: the same for a
//                               group of warps on its own named barrier)
//   cluster : cluster_reduce    one value per CTA through distributed shared memory (st.async
//                               completing on each peer's mbarrier), every CTA combines all
//   posted  : posted_reduce_post / _wait   one value per WARP into every CTA's slots (a CTA, a
//                               group of warps, or a cluster), no CTA barrier: a warp posts,
//                               goes on, and collects the result later (end of this file)
//
// WarpUniform = true enters the ladder at the warp partials: every lane already holds its
// warp's result (e.g. warp_exp_sum below, which needs the warp max before it can exponentiate).
//
// Every level returns the result to ALL threads (of the warp, CTA, cluster), and the result is
// bitwise identical in all of them: the butterfly combines op(a, b) in one lane and op(b, a) in
// its partner, which is the same float for commutative ops, and the cluster level combines the
// CTA partials in the same order (reduce_slots) in every warp of every CTA. Kernels rely on
// this (every CTA of a cluster must normalize its slice of a row with the same rstd).
//
// Values. The reduced type T is float, or any trivially copyable struct of 4-byte words (at
// most 16 bytes for the cluster level, which moves it with one st.async), e.g. exp2_sum below.
// Ops are functors `T operator()(T, T) const`, commutative bit for bit (op(a, b) and op(b, a)
// the same floats: mind FMA contraction, see exp2_sum_op); most also give `static T
// identity()`, the value that changes nothing (0 for a sum, -inf for a max), which kernels
// fill out-of-range registers with (the ladder itself never needs it).
//
//   __shared__ block_reduce_scratch<256> red;
//   float sum_sq = ...;                                          // this thread's part
//   sum_sq = block_reduce<256>(sum_sq, sum_op{}, red.values);    // whole-CTA sum, all threads

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/ops/sync/named_barrier.cuh"

namespace tilekit {

// ---------------------------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------------------------
struct sum_op {
  TILEKIT_HOST_DEVICE TILEKIT_INLINE float operator()(float a, float b) const { return a + b; }
  TILEKIT_HOST_DEVICE static constexpr float identity() { return 0.0f; }
};

struct max_op {
  TILEKIT_HOST_DEVICE TILEKIT_INLINE float operator()(float a, float b) const { return a > b ? a : b; }
  TILEKIT_HOST_DEVICE static constexpr float identity() { return -infinity; }
};

// Shared memory that block_reduce<Threads> needs: one value per warp.
template <int Threads, class T = float>
struct block_reduce_scratch {
  static_assert(Threads % warp_threads == 0 && Threads / warp_threads >= 1 &&
                    Threads / warp_threads <= warp_threads,
                "block_reduce needs a whole number of warps, 1..32 of them (Threads = 32, 64, ..., 1024)");
  static constexpr int warps = Threads / warp_threads;
  T values[warps];
};

// Largest cluster the cluster level supports (non-portable maximum on sm_90, HOPPER_NOTES 7.1).
inline constexpr int max_cluster_ctas = 16;

#if defined(__CUDACC__)

namespace detail {
// __shfl_xor_sync for float or a struct of 4-byte words, one shuffle per word.
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE T shuffle_xor(T value, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % sizeof(uint32_t) == 0,
                "reductions shuffle 4-byte words: make the reduced type a struct of floats/ints");
  if constexpr (std::is_same_v<T, float>) {
    return __shfl_xor_sync(0xffffffffu, value, lane_mask);
  } else {
    constexpr int words = sizeof(T) / sizeof(uint32_t);
    uint32_t w[words];
    memcpy(w, &value, sizeof(T));
#pragma unroll
    for (int i = 0; i < words; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], lane_mask);
    memcpy(&value, w, sizeof(T));
    return value;
  }
}
}  // namespace detail

// Butterfly reduction over the 32 lanes of a warp; every lane gets the (identical) result.
// All 32 lanes must call it.
template <class T, class Op>
TILEKIT_DEVICE TILEKIT_INLINE T warp_reduce(T value, Op op) {
#pragma unroll
  for (int lane_mask = warp_threads / 2; lane_mask > 0; lane_mask /= 2)
    value = op(value, detail::shuffle_xor(value, lane_mask));
  return value;
}

// The online-softmax state in base 2, as kernels compute it: sum = sum_j 2^(x_j * log2(e) - base).
// Any base near max * log2(e) works as long as the same float scales the elements and the sum;
// that is what keeps partials with different bases consistent (each exponent is one FFMA
// x * log2e - base, and the combine shifts by base differences, exact for nearby bases).
// log-sum-exp = (base + log2(sum)) * ln(2).
struct exp2_sum {
  float base;
  float sum;
};

// The two combines below keep the sum of the partial with the larger base (or max) as it is
// (its scale would be 2^0 = 1) and rescale only the other by 2^-|difference|: one exponential
// per combine, and op(a, b) == op(b, a) bit for bit, as the butterflies need (the same FMA
// with the same operands whichever side the larger partial comes from; equal bases: a.sum +
// b.sum, rounded once). Written as a.sum * 2^(a.base - m) + b.sum * 2^(b.base - m), the
// compiler contracts it to fma(a.sum, .., b.sum * ..) in one lane and fma(b.sum, .., a.sum *
// ..) in its partner, which round differently (tests/gpu/test_reduce.cu,
// SlotsLaneParallelOrInOrder). A partial of -inf gets scale 2^-inf = 0; two of them, the
// identity.
namespace detail {
TILEKIT_DEVICE TILEKIT_INLINE float rescaled_sum(float a_sum, float b_sum, float difference, float scale) {
  return difference >= 0.0f ? fmaf(b_sum, scale, a_sum) : fmaf(a_sum, scale, b_sum);
}
}  // namespace detail
struct exp2_sum_op {
  TILEKIT_HOST_DEVICE static constexpr exp2_sum identity() { return {-infinity, 0.0f}; }
#if defined(__CUDACC__)
  TILEKIT_DEVICE TILEKIT_INLINE exp2_sum operator()(exp2_sum a, exp2_sum b) const {
    const float m = fmaxf(a.base, b.base);
    if (m == -infinity) return identity();
    const float d = a.base - b.base;
    return {m, detail::rescaled_sum(a.sum, b.sum, d, exp2_fast(-fabsf(d)))};
  }
#endif
};

// The same state in natural units: sum = sum_j exp(x_j - max), max the exact maximum, so the
// maximum's own term is exactly 1 (exp of an exact 0). Costs one more instruction per element
// than exp2_sum (x - max, then the log2(e) scale), and buys a log-sum-exp that is exact for a
// one-element row (cross-entropy's loss must be exactly 0 at vocab = 1). Combining rescales by
// exp(max_i - max) from the exact difference, so partials stay consistent.
// log-sum-exp = max + log(sum).
struct max_sum {
  float max;
  float sum;
};

struct max_sum_op {
  TILEKIT_HOST_DEVICE static constexpr max_sum identity() { return {-infinity, 0.0f}; }
#if defined(__CUDACC__)
  TILEKIT_DEVICE TILEKIT_INLINE max_sum operator()(max_sum a, max_sum b) const {
    const float m = fmaxf(a.max, b.max);
    if (m == -infinity) return identity();
    const float d = a.max - b.max;
    // The two sums selected for one FMA (not rescaled_sum's two FMAs and a select): measured
    // faster in the cross-entropy forward, which sits at the register cap
    // (docs/performance_log.md, "The 2026-12-01 01:27 table").
    const bool a_top = d >= 0.0f;
    const float top_sum = a_top ? a.sum : b.sum, low_sum = a_top ? b.sum : a.sum;
    return {m, fmaf(low_sum, exp2_fast(-fabsf(d) * log2e), top_sum)};
  }
#endif
};

namespace detail {
struct fmax_op {  // fmaxf: a NaN loses to a number (max_op keeps a > b ? a : b on purpose)
  TILEKIT_DEVICE TILEKIT_INLINE float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Max over a thread's values (two independent chains), and then over the warp.
template <int N>
TILEKIT_DEVICE TILEKIT_INLINE float thread_max(const float (&values)[N]) {
  float m0 = -infinity, m1 = -infinity;
#pragma unroll
  for (int j = 0; j < N; j += 2) {
    m0 = fmaxf(m0, values[j]);
    if (j + 1 < N) m1 = fmaxf(m1, values[j + 1]);
  }
  return fmaxf(m0, m1);
}
template <int N>
TILEKIT_DEVICE TILEKIT_INLINE float warp_max(const float (&values)[N]) {
  return warp_reduce(thread_max(values), fmax_op{});
}

// values[j] := 2^exponent(values[j]) in place and this thread's sum of them (two independent
// chains: the dependent FADD latency is the critical path of the row otherwise).
template <int N, class Exponent>
TILEKIT_DEVICE TILEKIT_INLINE float exp2_in_place(float (&values)[N], Exponent exponent) {
  float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    values[j] = exp2_fast(exponent(values[j]));
    if (j % 2 == 0) s0 += values[j];
    else s1 += values[j];
  }
  return s0 + s1;
}

// exp2_in_place and the warp's sum. m is the warp max; a warp of pure -inf padding (m = -inf)
// gets zeros and a sum of 0.
template <int N, class Exponent>
TILEKIT_DEVICE TILEKIT_INLINE float warp_exp2_in_place(float (&values)[N], float m, Exponent exponent) {
  if (m == -infinity) {  // warp-uniform
#pragma unroll
    for (int j = 0; j < N; ++j) values[j] = 0.0f;
    return 0.0f;
  }
  return warp_reduce(exp2_in_place(values, exponent), sum_op{});
}
}  // namespace detail

// The softmax statistics of a warp's registers, with no exponentials inside the warp's
// reduction: m = max over the warp (shuffles only), base = m * log2(e) rounded, values[j] :=
// 2^(values[j] * log2(e) - base) = exp(values[j] - m) in place, and (base, sum over the warp
// of the exponentials) returned, identical in every lane. Only the warp partials of a larger
// group then need exp2_sum_op (reduce them with WarpUniform = true). Per element: one FMNMX,
// one FFMA, one MUFU.EX2, one FADD. A warp whose values are all -inf (padding) gets zeros and
// (-inf, 0).
template <int N>
TILEKIT_DEVICE TILEKIT_INLINE exp2_sum warp_exp_sum(float (&values)[N]) {
  const float m = detail::warp_max(values);
  const float base = m * log2e;
  return {base, detail::warp_exp2_in_place(values, m, [base](float x) { return fmaf(x, log2e, -base); })};
}

// warp_exp_sum in natural units (max_sum): values[j] := exp(values[j] - m) with the exact
// difference first, so the maximum's term is exactly 1.
template <int N>
TILEKIT_DEVICE TILEKIT_INLINE max_sum warp_exp_sum_natural(float (&values)[N]) {
  const float m = detail::warp_max(values);
  return {m, detail::warp_exp2_in_place(values, m, [m](float x) { return (x - m) * log2e; })};
}

namespace detail {
// The max of a thread's packed 16-bit pairs (one HMNMX2 per two elements, two chains; a NaN
// loses to a number, as fmaxf), and then over the warp.
template <int N, class P>
TILEKIT_DEVICE TILEKIT_INLINE float thread_max(const P (&pairs)[N]) {
  static_assert(is_16bit_float<element_t<P>>, "thread_max: bf16 or fp16 pairs");
  P m0 = pairs[0], m1 = pairs[N > 1 ? 1 : 0];
#pragma unroll
  for (int j = 2; j < N; j += 2) {
    m0 = __hmax2(m0, pairs[j]);
    if (j + 1 < N) m1 = __hmax2(m1, pairs[j + 1]);
  }
  const float2 top = unpack_pair(__hmax2(m0, m1));
  return fmaxf(top.x, top.y);
}
template <int N, class P>
TILEKIT_DEVICE TILEKIT_INLINE float warp_max(const P (&pairs)[N]) {
  return warp_reduce(thread_max(pairs), fmax_op{});
}

// A thread's sum of 2^exponent(x) over its packed pairs, each pair unpacked once (the
// exponentials are not kept; two independent chains).
template <int N, class P, class Exponent>
TILEKIT_DEVICE TILEKIT_INLINE float exp2_sum_of(const P (&pairs)[N], Exponent exponent) {
  float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float2 x = unpack_pair(pairs[j]);
    s0 += exp2_fast(exponent(x.x));
    s1 += exp2_fast(exponent(x.y));
  }
  return s0 + s1;
}

// The warp's sum of exp2_sum_of. m is the warp max; a warp of pure -inf padding (m = -inf)
// sums to 0.
template <int N, class P, class Exponent>
TILEKIT_DEVICE TILEKIT_INLINE float warp_exp2_sum(const P (&pairs)[N], float m, Exponent exponent) {
  if (m == -infinity) return 0.0f;  // warp-uniform
  return warp_reduce(exp2_sum_of(pairs, exponent), sum_op{});
}
}  // namespace detail

// warp_exp_sum / warp_exp_sum_natural of a row held as packed 16-bit pairs (bf16x2 / f16x2,
// e.g. from load_row_pairs_aligned), for kernels that need the statistics but not the
// exponentials (they recompute them, or never need them): the max on the pairs, then each pair
// unpacked once for its two exponentials, summed and not kept. Per element: half an HMNMX2,
// one unpack, the exponent (one FFMA; natural units FADD + FMUL), MUFU.EX2, FADD. The same
// results as the float forms up to the order of the sum; a warp of pure -inf padding gets
// (-inf, 0).
template <int N, class P>
TILEKIT_DEVICE TILEKIT_INLINE exp2_sum warp_exp_sum(const P (&pairs)[N]) {
  const float m = detail::warp_max(pairs);
  const float base = m * log2e;
  return {base, detail::warp_exp2_sum(pairs, m, [base](float x) { return fmaf(x, log2e, -base); })};
}
template <int N, class P>
TILEKIT_DEVICE TILEKIT_INLINE max_sum warp_exp_sum_natural(const P (&pairs)[N]) {
  const float m = detail::warp_max(pairs);
  return {m, detail::warp_exp2_sum(pairs, m, [m](float x) { return (x - m) * log2e; })};
}

namespace detail {
// block_reduce with a hook that every thread runs between the two CTA barriers, i.e. at a point
// where all threads have entered this reduction and none has left it (cluster_reduce uses it
// to advance its round counter without a race).
// `Sync` is the barrier of the participating threads (__syncthreads for a whole CTA, a named
// barrier for a group of warps). `WarpUniform`: every lane of a warp already holds its warp's
// result (the caller reduced over the warp itself), so the warp level is skipped.
struct cta_sync {
  TILEKIT_DEVICE TILEKIT_INLINE void operator()() const { __syncthreads(); }
};
template <int Threads, bool WarpUniform = false, bool ClosingBarrier = true, class T, class Op, class Between,
          class Sync = cta_sync>
TILEKIT_DEVICE TILEKIT_INLINE T block_reduce_with(T value, Op op, T* scratch, Between between, Sync sync = {}) {
  static_assert(Threads % warp_threads == 0 && Threads <= warp_threads * warp_threads,
                "block_reduce needs a whole number of warps, 1..32 of them (Threads = 32, 64, ..., 1024)");
  constexpr int warps = Threads / warp_threads;
  static_assert((warps & (warps - 1)) == 0, "block_reduce: the number of warps must be a power of two");
  if constexpr (!WarpUniform) value = warp_reduce(value, op);
  if constexpr (warps == 1) {
    between();
    return value;
  } else {
    if (laneid() == 0) scratch[warpid() % warps] = value;
    sync();
    between();
    // Every warp reduces the per-warp partials itself, so no broadcast step and no third
    // barrier are needed: lane l holds partial l % warps, and a butterfly over the low
    // log2(warps) lane bits combines each aligned run of `warps` lanes -- every run holds the
    // same partials in the same order, so all lanes end with the same bits.
    value = scratch[laneid() % warps];
#pragma unroll
    for (int lane_mask = warps / 2; lane_mask > 0; lane_mask /= 2) value = op(value, shuffle_xor(value, lane_mask));
    // Nobody may overwrite `scratch` (a second reduction) before every warp has read it (callers
    // that alternate between two scratch arrays get that from the next call's barrier instead).
    if constexpr (ClosingBarrier) sync();
    return value;
  }
}
struct no_hook {
  TILEKIT_DEVICE TILEKIT_INLINE void operator()() const {}
};
}  // namespace detail

// Reduce one value per thread over the CTA; every thread gets the (identical) result.
// Threads = blockDim.x (all of them must call it), scratch = block_reduce_scratch<Threads,
// T>::values in shared memory. Safe to call back to back with the same scratch: the second
// call cannot overwrite partials the first is still reading (it ends with a CTA barrier).
template <int Threads, bool WarpUniform = false, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T block_reduce(T value, Op op, T* scratch) {
  return detail::block_reduce_with<Threads, WarpUniform>(value, op, scratch, detail::no_hook{});
}

// Reduce over a group of Threads threads (whole warps, warp-aligned: warps k * Threads / 32 ..
// (k + 1) * Threads / 32 - 1 for some k) that synchronize on named barrier `barrier_id`
// (1..15, one id per group that may reduce at the same time; see named_barrier.cuh). scratch =
// block_reduce_scratch<Threads, T>::values of THIS group. Several groups of a CTA reduce
// different rows concurrently without waiting for each other.
namespace detail {
template <int Threads>
struct named_sync {
  int id;
  TILEKIT_DEVICE TILEKIT_INLINE void operator()() const { named_barrier_sync(id, Threads); }
};
}  // namespace detail
template <int Threads, bool WarpUniform = false, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T group_reduce(T value, Op op, T* scratch, int barrier_id) {
  return detail::block_reduce_with<Threads, WarpUniform>(value, op, scratch, detail::no_hook{},
                                                         detail::named_sync<Threads>{barrier_id});
}

// block_reduce / group_reduce with one barrier per call instead of two, for callers that
// alternate between two scratch arrays: call n (counted by each thread, the same count in all)
// uses scratch[n % 2]. A thread reaches call n + 2, which overwrites call n's array, only after
// every thread arrived at call n + 1's barrier, i.e. after every thread read call n's result.
template <int Threads, bool WarpUniform = false, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T block_reduce_alternating(T value, Op op, block_reduce_scratch<Threads, T> (&scratch)[2],
                                                         uint32_t call) {
  return detail::block_reduce_with<Threads, WarpUniform, false>(value, op, scratch[call % 2].values, detail::no_hook{});
}
template <int Threads, bool WarpUniform = false, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T group_reduce_alternating(T value, Op op, block_reduce_scratch<Threads, T> (&scratch)[2],
                                                         uint32_t call, int barrier_id) {
  return detail::block_reduce_with<Threads, WarpUniform, false>(value, op, scratch[call % 2].values, detail::no_hook{},
                                                                detail::named_sync<Threads>{barrier_id});
}

// ---------------------------------------------------------------------------------------------
// Cluster level
// ---------------------------------------------------------------------------------------------
// Shared memory of cluster_reduce<Threads, T>. Each call:
//   1. block_reduce -> this CTA's partial (all threads);
//   2. thread 0 writes it into its own slot and arms this round's mbarrier for the
//      (size - 1) partials the peers will send; threads 1..size-1 of warp 0 each send the
//      partial to one peer with st.async, which lands in that peer's slot[my rank] and credits
//      the peer's mbarrier (data and completion travel together; nobody waits on a sender);
//   3. every thread waits for the mbarrier, then combines slot[0..size) (reduce_slots: a
//      butterfly over the warp's lanes, the same order in every thread of every CTA).
// Two sets of slots + mbarriers alternate between calls: a fast peer may already send the
// partial of call n+1 while this CTA still reads the slots of call n, but it cannot send call
// n+2's before this CTA has sent its own n+1 partial, i.e. before every thread here finished
// reading call n (the next call's block_reduce barrier orders that). One set would let call
// n+1's bytes complete call n's barrier early.
// The CTA step alternates between two block_reduce arrays as well, and a whole cluster_reduce
// skips block_reduce's closing barrier (one CTA barrier per call): call n + 2 writes call n's
// array only after call n + 1's barrier, which every thread reaches after reading call n. The
// round advanced by thread 0 after call n's barrier reaches the others through its mbarrier
// arrive (release) and their wait (acquire) before they start call n + 1. (A reduction that
// need not wait for its result, e.g. one row's statistics collected one row later, is a posted
// reduction: end of this file.)
//
// Initialisation (once per kernel, before the first call):
//     if (threadIdx.x == 0) scratch.init();
//     init_barriers_fence();
//     cluster::sync();          // peers may send into this CTA only after its barriers exist
// (cluster_reduce_init(scratch) does exactly this, called by all threads.)
// Exit: end the kernel with cluster::sync() (cluster.cuh exit rule): a CTA that finished its
// last reduction may still have st.async stores in flight towards slower peers.
// 16-byte aligned: partials of 16 bytes travel with st.async.v4, which needs aligned slots.
template <int Threads, class T = float>
struct alignas(16) cluster_reduce_scratch {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "cluster_reduce moves each partial with one st.async of 4, 8 or 16 bytes");
  static constexpr int buffers = 2;
  block_reduce_scratch<Threads, T> block[2];  // block[round % 2]
  T slots[buffers][max_cluster_ctas];
  mbarrier arrived[buffers];
  // Number of posted calls; buffer = round % buffers, mbarrier parity = (round / buffers) % 2. Read by
  // every thread at the start of a call, advanced by thread 0 after the block_reduce barrier
  // (all threads have read it by then; see above for when the next call may read it).
  uint32_t round;

  // Thread 0 only; see the initialisation protocol above.
  TILEKIT_DEVICE TILEKIT_INLINE void init() {
#pragma unroll
    for (int b = 0; b < buffers; ++b) arrived[b].init(1);  // thread 0's arrive_expect_tx
    round = 0;
  }
};

// All threads of all CTAs of the cluster: initialise `scratch` and make it visible to the peers.
template <int Threads, class T>
TILEKIT_DEVICE TILEKIT_INLINE void cluster_reduce_init(cluster_reduce_scratch<Threads, T>& scratch) {
  if (threadIdx.x == 0) scratch.init();
  init_barriers_fence();
  cluster::sync();
}

namespace detail {
// Reduce over this CTA and send the partial to every peer; returns the call's round. No closing
// barrier: the caller waits for this round before its next call (see above).
template <int Threads, bool WarpUniform, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE uint32_t cluster_post(T value, Op op, cluster_reduce_scratch<Threads, T>& scratch) {
  constexpr int buffers = cluster_reduce_scratch<Threads, T>::buffers;
  const uint32_t round = scratch.round;
  const T partial = block_reduce_with<Threads, WarpUniform, false>(value, op, scratch.block[round % 2].values, [&] {
    if (threadIdx.x == 0) scratch.round = round + 1;
  });
  const uint32_t ctas = cluster::size();
  const uint32_t my_rank = cluster::rank();
  T* slots = scratch.slots[round % buffers];
  mbarrier& arrived = scratch.arrived[round % buffers];
  if (threadIdx.x == 0) {
    slots[my_rank] = partial;
    // Release (CTA scope) of the slot write above to the threads that wait below.
    arrived.arrive_expect_tx(static_cast<uint32_t>((ctas - 1) * sizeof(T)));
  } else if (threadIdx.x < ctas) {
    // Thread t sends to the peer of rank (my_rank + t) % ctas: every peer but me, once.
    const uint32_t peer = (my_rank + threadIdx.x) % ctas;
    cluster::store_remote_async(cluster::map_shared(&slots[my_rank], peer), partial,
                                cluster::map_shared(&arrived, peer));
  }
  return round;
}
}  // namespace detail


// op over map(slots[0]), .., map(slots[count - 1]) (count >= 1, e.g. the per-CTA partials of a
// cluster reduction), in every lane of the calling warp (all 32 lanes must call it with the
// same slots): lane l takes slot l % count, and a butterfly over aligned runs of `count` lanes
// combines them in log2(count) shuffle levels, so each thread makes one shared load and
// log2(count) combines instead of count loads and count - 1 dependent combines (a cluster of
// 16: 4 levels against 15 ops in a chain, on every row's critical path). Every run of lanes
// holds the same values in the same order, so every lane of every warp gets the same bits
// (op commutative, as everywhere in this file). A count that is not a power of two, or above
// 32, is combined in slot order instead; a power of two above 32 (the warp partials of a
// posted reduction, below) lane-parallel again: lane l first combines slots l, l + 32, l + 64,
// .. in that order, then the butterfly runs over all 32 lanes. `map` turns a slot into the
// value combined (a fold that needs per-slot arithmetic first, e.g. re-centering the LayerNorm
// partials).
template <class T, class Op, class Map>
TILEKIT_DEVICE TILEKIT_INLINE auto reduce_slots(const T* slots, uint32_t count, Op op, Map map) {
  if ((count & (count - 1)) == 0 && count <= uint32_t(warp_threads)) {
    auto value = map(slots[uint32_t(laneid()) & (count - 1)]);
    for (uint32_t lane_mask = count / 2; lane_mask > 0; lane_mask /= 2)
      value = op(value, detail::shuffle_xor(value, int(lane_mask)));
    return value;
  }
  if ((count & (count - 1)) == 0) {
    auto value = map(slots[laneid()]);
    for (uint32_t s = uint32_t(laneid()) + warp_threads; s < count; s += warp_threads) value = op(value, map(slots[s]));
    for (int lane_mask = warp_threads / 2; lane_mask > 0; lane_mask /= 2)
      value = op(value, detail::shuffle_xor(value, lane_mask));
    return value;
  }
  auto value = map(slots[0]);
  for (uint32_t r = 1; r < count; ++r) value = op(value, map(slots[r]));
  return value;
}
template <class T, class Op>
TILEKIT_DEVICE TILEKIT_INLINE T reduce_slots(const T* slots, uint32_t count, Op op) {
  return reduce_slots(slots, count, op, [](const T& slot) { return slot; });
}

// Second half of cluster_reduce_fold (after detail::cluster_post), with the caller's own
// combine: wait for every CTA's partial of call `round` and return fold(partials, cluster::size()), partials[r] being rank r's (in this CTA's shared
// memory). Every thread of every CTA sees the same partials in the same order, so a fold that
// depends on nothing else (e.g. one made with reduce_slots) gives bitwise the same result
// everywhere. For combines that are not a plain op over the partials, e.g. the LayerNorm
// statistics, whose partials are (shift, deviation sums, count) of each CTA's slice and fold
// into the row's mean and M2.
template <int Threads, class T, class Fold>
TILEKIT_DEVICE TILEKIT_INLINE auto cluster_reduce_wait_fold(uint32_t round, cluster_reduce_scratch<Threads, T>& scratch,
                                                            Fold fold) {
  constexpr int buffers = cluster_reduce_scratch<Threads, T>::buffers;
  scratch.arrived[round % buffers].wait((round / buffers) % 2);
  return fold(static_cast<const T*>(scratch.slots[round % buffers]), cluster::size());
}

// Second half of cluster_reduce: wait for every CTA's partial of call `round` and combine them
// (reduce_slots).
template <int Threads, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T cluster_reduce_wait(uint32_t round, Op op, cluster_reduce_scratch<Threads, T>& scratch) {
  return cluster_reduce_wait_fold(round, scratch,
                                  [&](const T* slots, uint32_t ctas) { return reduce_slots(slots, ctas, op); });
}

// Reduce one value per thread over every thread of every CTA in the cluster; all of them get
// the (bitwise identical) result. Every thread of every CTA must call it, the same number of
// times. Works for a cluster of 1 (then it is a block_reduce plus a barrier round trip).
template <int Threads, bool WarpUniform = false, class Op, class T>
TILEKIT_DEVICE TILEKIT_INLINE T cluster_reduce(T value, Op op, cluster_reduce_scratch<Threads, T>& scratch) {
  return cluster_reduce_wait<Threads>(detail::cluster_post<Threads, WarpUniform>(value, op, scratch), op, scratch);
}

// cluster_reduce with the caller's combine of the CTA partials (see cluster_reduce_wait_fold):
// `op` reduces over each CTA, `fold` over the cluster.
template <int Threads, bool WarpUniform = false, class Op, class T, class Fold>
TILEKIT_DEVICE TILEKIT_INLINE auto cluster_reduce_fold(T value, Op op, cluster_reduce_scratch<Threads, T>& scratch,
                                                       Fold fold) {
  return cluster_reduce_wait_fold(detail::cluster_post<Threads, WarpUniform>(value, op, scratch), scratch, fold);
}

#endif  // __CUDACC__

// ---------------------------------------------------------------------------------------------
// Posted reductions: warp partials, no CTA barrier
// ---------------------------------------------------------------------------------------------
// A reduction over a group of Warps warps (warp-aligned, as for group_reduce) in each of the
// Ctas CTAs of a cluster (Ctas = 1: one CTA, no cluster launch needed), from one warp-uniform
// value per warp, in two halves that no thread ever waits inside:
//   post(round): lane 0 of each warp writes the warp's partial into its own slot of this CTA
//     (slot rank * Warps + warp of the round's buffer) and arrives on the round's mbarrier;
//     lanes 1 .. Ctas - 1 send the same partial to the same slot of every peer with st.async,
//     which completes on the peer's mbarrier (data and completion travel together). Each local
//     arrival also announces the (Ctas - 1) partials its counterparts in the peers will send
//     (arrive.expect_tx), so a round completes once all Warps x Ctas partials are in.
//   wait(round): wait for the round's mbarrier, then combine the Warps x Ctas slots with
//     reduce_slots (the same slots in the same order in every warp of every CTA: the same bits
//     everywhere); every lane then marks its reads of the buffer done (`consumed`).
// Unlike block_reduce / cluster_reduce, a warp that posted does not wait for the others: it
// may go on with other work (e.g. the next row) and collect the result later, so the warps of
// a row are no longer in lock-step. Rule: a warp waits for round n before it posts round n + 2
// (post n + 1, wait n, post n + 2, ...: rows finished one row late). Then four buffers are
// enough: a warp posting round r has seen round r - 2 complete, so every warp everywhere has
// posted r - 2, which each did after its own wait for r - 4: every CTA has completed and read
// the buffer (r - 4) % 4 that round r reuses, and no round-r byte can land in an older phase.
// That order runs through another buffer's mbarrier, which compute-sanitizer's racecheck does
// not follow (it reported every local slot write of round r as racing with the reads of round
// r - 4), so the local writer also waits, explicitly, until every thread of the group in its
// CTA has marked round r - 4 read (`consumed`, one arrival per thread: with one arrival per
// warp after __syncwarp, racecheck still reported the other lanes' reads): by the argument
// above that phase is already complete, so the wait is one test, and the order is one
// racecheck checks.
//
// CTA partials first (CtaFirst = true, Ctas > 1): rather than every warp's partial travelling
// to every CTA and every warp folding Warps x Ctas of them (256 for a row over 16 CTAs of 16
// warps: 8 loads and re-centerings per lane on every row), each warp writes its partial into a
// warp slot of its own CTA and arrives on the round's `warps_in` mbarrier, then counts itself
// in with a shared atomic (`joined`, one counter per buffer, never reset: round r is the
// (r / 4)-th use of its buffer, so its last warp reads (r / 4) x Warps + Warps - 1). The CTA's
// LAST warp of the round waits for `warps_in` (complete by then, or about to be: the wait is
// the acquire, the count only picks who folds), combines the Warps warp slots with the
// caller's `cta_fold` into the CTA's partial, and posts that as above (its own slot, and
// st.async to every peer). The round's mbarrier then counts one local arrival and the peers'
// bytes, and wait() folds Ctas slots. No warp waits for another to post: the last one to
// arrive does the CTA's part, the others go on at once. The rules above carry over: a warp's
// lane 0 waits for `consumed` of round r - 4 before writing its warp slot of round r, and the
// last warp of round r - 4 read those slots before it posted the CTA partial that every local
// thread waited for before arriving on `consumed`; so the warp slots, `warps_in` and `joined`
// are reused only after their previous round is done, in the order racecheck follows (the
// mbarriers; the atomic decides nothing about memory order).
// Initialisation as for cluster_reduce (init by one thread, init_barriers_fence, then a CTA or
// cluster barrier), and for Ctas > 1 the cluster exit rule (cluster::sync() before exit).
// Shared memory: 4 x Warps x Ctas partials (16 warps x 8 CTAs x 16 bytes x 4 = 8 KiB) and 8
// mbarriers; CTA partials first: 4 x (Ctas + Warps) partials and 12 mbarriers.
namespace detail {
inline constexpr int posted_reduce_buffers = 4;  // rounds in flight (see above)
// What CTA partials first add to a posted reduction's scratch (nothing otherwise: an empty base).
template <int Warps, class T, bool CtaFirst>
struct posted_cta_state {};
template <int Warps, class T>
struct posted_cta_state<Warps, T, true> {
  static constexpr int buffers = posted_reduce_buffers;
  T warp_slots[buffers][Warps];  // this CTA's warps' partials
  mbarrier warps_in[buffers];    // every local warp's partial is in its warp slot (Warps arrivals)
  uint32_t joined[buffers];      // warps counted in, over all uses of the buffer
};
}  // namespace detail

template <int Warps, class T = float, int Ctas = 1, bool CtaFirst = false>
struct alignas(16) posted_reduce_scratch : detail::posted_cta_state<Warps, T, CtaFirst && (Ctas > 1)> {
  static_assert(Warps >= 1 && Warps <= warp_threads, "posted reduction: 1..32 warps per group");
  static_assert(Ctas >= 1 && Ctas <= max_cluster_ctas, "posted reduction: 1..16 CTAs");
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "posted reductions move each partial with one st.async of 4, 8 or 16 bytes");
  static constexpr int buffers = detail::posted_reduce_buffers;
  // CTA partials first (see above); with one CTA the warps' slots are the CTA's partials already.
  static constexpr bool cta_first = CtaFirst && Ctas > 1;
  static constexpr int slots_per_round = cta_first ? Ctas : Warps * Ctas;
  T slots[buffers][slots_per_round];
  mbarrier arrived[buffers];   // the round's partials are in (local arrivals + the peers' bytes)
  mbarrier consumed[buffers];  // every local thread has read the round (Warps x 32 arrivals)

#if defined(__CUDACC__)
  // Thread 0 only (see above).
  TILEKIT_DEVICE TILEKIT_INLINE void init() {
#pragma unroll
    for (int b = 0; b < buffers; ++b) {
      arrived[b].init(cta_first ? 1 : Warps);  // the CTA's last warp, or one arrival per local warp
      consumed[b].init(Warps * warp_threads);
      if constexpr (cta_first) {
        this->warps_in[b].init(Warps);
        this->joined[b] = 0;
      }
    }
  }
#endif
};

#if defined(__CUDACC__)
namespace detail {
// Write `value` into this CTA's slot `slot` of `buffer` (lane 0) and send it to the same slot of
// every peer (lanes 1 .. Ctas - 1): the round's local arrival announces the peers' bytes.
template <int Ctas, class T>
TILEKIT_DEVICE TILEKIT_INLINE void post_everywhere(T value, T* slot, mbarrier& arrived, uint32_t rank) {
  const uint32_t lane = laneid();
  if (lane == 0) {
    *slot = value;
    // Release (CTA scope) of the slot write to the waiters; announces the peers' partials.
    if constexpr (Ctas > 1) arrived.arrive_expect_tx(uint32_t((Ctas - 1) * sizeof(T)));
    else arrived.arrive();
  } else if constexpr (Ctas > 1) {
    if (lane < uint32_t(Ctas)) {  // lane t sends to the peer of rank (rank + t) % Ctas
      const uint32_t peer = (rank + lane) % uint32_t(Ctas);
      cluster::store_remote_async(cluster::map_shared(slot, peer), value, cluster::map_shared(&arrived, peer));
    }
  }
}
}  // namespace detail

// First half (all lanes of each warp of the group, in every CTA): post this warp's partial of
// `round` (rounds count 0, 1, 2, .. per warp, the same sequence in all warps). `warp` is the
// warp's index in its group (0 .. Warps - 1). CTA partials first: `cta_fold(const T* warp_slots,
// uint32_t warps)` (all lanes of the CTA's last warp call it) returns the CTA's partial from its
// warps'; it must give the same value in every lane (e.g. reduce_slots).
template <int Warps, class T, int Ctas, bool CtaFirst, class CtaFold>
TILEKIT_DEVICE TILEKIT_INLINE void posted_reduce_post(T value, posted_reduce_scratch<Warps, T, Ctas, CtaFirst>& scratch,
                                                     uint32_t round, int warp, CtaFold cta_fold) {
  using scratch_t = posted_reduce_scratch<Warps, T, Ctas, CtaFirst>;
  const uint32_t buffer = round % scratch_t::buffers;
  const uint32_t lap = round / scratch_t::buffers;
  const uint32_t rank = Ctas > 1 ? cluster::rank() : 0u;
  // This CTA's warps have read the buffer's previous round (round - 4); see above.
  if (laneid() == 0 && round >= uint32_t(scratch_t::buffers)) scratch.consumed[buffer].wait((lap - 1) % 2);
  if constexpr (scratch_t::cta_first) {
    uint32_t joined_before = 0;
    if (laneid() == 0) {
      scratch.warp_slots[buffer][warp] = value;
      scratch.warps_in[buffer].arrive();  // release of the warp slot to the CTA's last warp
      joined_before = atomicAdd(&scratch.joined[buffer], 1u);
    }
    if (__shfl_sync(0xffffffffu, joined_before, 0) != lap * uint32_t(Warps) + uint32_t(Warps - 1)) return;
    scratch.warps_in[buffer].wait(lap % 2);  // every lane: acquire of the other warps' slots
    const T partial = cta_fold(static_cast<const T*>(scratch.warp_slots[buffer]), uint32_t(Warps));
    detail::post_everywhere<Ctas>(partial, &scratch.slots[buffer][rank], scratch.arrived[buffer], rank);
  } else {
    detail::post_everywhere<Ctas>(value, &scratch.slots[buffer][rank * Warps + uint32_t(warp)], scratch.arrived[buffer],
                                  rank);
  }
}
// Every warp's partial to every CTA (CtaFirst = false: no CTA fold).
template <int Warps, class T, int Ctas>
TILEKIT_DEVICE TILEKIT_INLINE void posted_reduce_post(T value, posted_reduce_scratch<Warps, T, Ctas>& scratch,
                                                     uint32_t round, int warp) {
  posted_reduce_post(value, scratch, round, warp, [](const T*, uint32_t) { return T{}; });
}

// Second half, with the caller's own combine (all lanes): wait for every warp's partial of
// `round` and return fold(partials, Warps x Ctas), partials[rank * Warps + warp] being that
// warp's (in this CTA's shared memory; CTA partials first: fold(partials, Ctas), partials[rank]
// being that CTA's). Every lane of every warp of every CTA sees the same
// partials in the same order, so a fold that depends on nothing else (e.g. one made with
// reduce_slots) gives the same bits everywhere. For combines that are not one op over the
// partials, e.g. the LayerNorm's (mean, deviation sums, count) per warp.
template <int Warps, class T, int Ctas, bool CtaFirst, class Fold>
TILEKIT_DEVICE TILEKIT_INLINE auto posted_reduce_wait_fold(uint32_t round,
                                                           posted_reduce_scratch<Warps, T, Ctas, CtaFirst>& scratch,
                                                           Fold fold) {
  using scratch_t = posted_reduce_scratch<Warps, T, Ctas, CtaFirst>;
  const uint32_t buffer = round % scratch_t::buffers;
  scratch.arrived[buffer].wait((round / scratch_t::buffers) % 2);
  const auto total = fold(static_cast<const T*>(scratch.slots[buffer]), uint32_t(scratch_t::slots_per_round));
  scratch.consumed[buffer].arrive();  // release of this lane's slot reads
  return total;
}

// Second half (all lanes): the reduction of `round` over the group's warps in every CTA
// (reduce_slots), the same bits in every lane of every warp of every CTA.
template <int Warps, class T, int Ctas, bool CtaFirst, class Op>
TILEKIT_DEVICE TILEKIT_INLINE T posted_reduce_wait(uint32_t round, Op op,
                                                   posted_reduce_scratch<Warps, T, Ctas, CtaFirst>& scratch) {
  return posted_reduce_wait_fold(round, scratch,
                                 [op](const T* slots, uint32_t count) { return reduce_slots(slots, count, op); });
}
#endif  // __CUDACC__

}  // namespace tilekit
