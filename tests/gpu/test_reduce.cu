// The reduction ladder of tilekit/ops/reduce.cuh, level by level:
//   * block_reduce over a whole CTA (from one value per thread, and WarpUniform from one value
//     per warp), sums of small integers (exact in fp32, so the check is exact);
//   * group_reduce: four groups of 128 threads of one CTA, each on its own named barrier,
//     reducing different data at the same time, twice in a row through the same scratch;
//   * warp_exp_sum + cluster_reduce<WarpUniform> of exp2_sum (the softmax statistics) over
//     clusters of 1, 2 and 4 CTAs, against an fp64 reference, with warps that hold only -inf;
//   * warp_exp_sum_natural over packed bf16 / fp16 pairs against fp64 and against the same
//     function over floats (the max bit for bit), with a warp of pure -inf padding;
//   * group_reduce_alternating / block_reduce_alternating (one barrier per call, two scratch
//     arrays): 8 calls in a row with different values, one group and one warp starting late;
//   * whole cluster_reduce calls (one CTA barrier each), 64 in a row with CTAs and warps
//     taking turns to lag behind, sums checked exactly;
//   * reduce_slots (the cluster level's combine of the CTA partials) for 1 .. 256 slots: lane-
//     parallel for powers of two (above 32: lane-strided, then over the whole warp), in slot
//     order otherwise, with and without a map;
//   * posted reductions (posted_reduce_post, then posted_reduce_wait one round later, no CTA
//     barrier): groups of 4 or 8 warps in one CTA, clusters of 2, 4, 8 and 16, of 4- and
//     16-byte values, 64 rounds with warps and CTAs taking turns to lag behind, checked exactly;
//   * every thread of every CTA must end with the SAME bits (kernels rely on it), checked
//     by comparing all threads' copies with thread 0's.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/reduce.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

constexpr int cta_threads = 256;
constexpr int group_threads = 128;
constexpr int groups = 512 / group_threads;
constexpr int values_per_thread = 8;

// out[thread] = block sum of in (per-thread values), out[threads + thread] = the same from
// warp-reduced values (WarpUniform).
__global__ void __launch_bounds__(cta_threads) block_reduce_kernel(const float* in, float* out) {
  __shared__ block_reduce_scratch<cta_threads> scratch;
  const float x = in[threadIdx.x];
  out[threadIdx.x] = block_reduce<cta_threads>(x, sum_op{}, scratch.values);
  const float warp_sum = warp_reduce(x, sum_op{});
  out[cta_threads + threadIdx.x] = block_reduce<cta_threads, true>(warp_sum, sum_op{}, scratch.values);
}

// Four groups of 128 threads; group g sums in[g * 128 ..] and then (same scratch) the squares.
__global__ void __launch_bounds__(512) group_reduce_kernel(const float* in, float* out) {
  __shared__ block_reduce_scratch<group_threads> scratch[groups];
  const int group = threadIdx.x / group_threads;
  const float x = in[threadIdx.x];
  // Group 0 starts late: the others must not wait for it (each group has its own barrier).
  if (group == 0) __nanosleep(20000);
  const float sum = group_reduce<group_threads>(x, sum_op{}, scratch[group].values, 1 + group);
  const float squares = group_reduce<group_threads>(x * x, sum_op{}, scratch[group].values, 1 + group);
  out[threadIdx.x] = sum;
  out[512 + threadIdx.x] = squares;
}

// Every thread holds values_per_thread logits; out[2 * global thread + {0, 1}] = the cluster's
// (base, sum of 2^(x log2 e - base)).
__global__ void __launch_bounds__(cta_threads) softmax_stats_kernel(const float* in, float* out) {
  __shared__ cluster_reduce_scratch<cta_threads, exp2_sum> scratch;
  cluster_reduce_init(scratch);
  const size_t thread = size_t(blockIdx.x) * cta_threads + threadIdx.x;
  float values[values_per_thread];
  for (int j = 0; j < values_per_thread; ++j) values[j] = in[thread * values_per_thread + j];
  const exp2_sum warp = warp_exp_sum(values);
  const exp2_sum total = cluster_reduce<cta_threads, true>(warp, exp2_sum_op{}, scratch);
  out[2 * thread] = total.base;
  out[2 * thread + 1] = total.sum;
  // The exponentials left in place, rescaled to the cluster's base, must sum to total.sum.
  float rescaled = 0.f;
  for (int j = 0; j < values_per_thread; ++j) rescaled += values[j];
  out[2 * size_t(gridDim.x) * cta_threads + thread] = rescaled * exp2_fast(warp.base - total.base);
  cluster::sync();  // no CTA exits while a peer may still send into it
}

// Each warp's lanes hold pairs_per_lane pairs of T; out[2 * thread + {0, 1}] = (max, sum) of
// the warp from the pairs, out[2 * threads + 2 * thread + {0, 1}] = the same from floats.
constexpr int pairs_per_lane = 12;
template <class T>
__global__ void __launch_bounds__(128) packed_exp_sum_kernel(const T* in, float* out) {
  const size_t thread = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = size_t(gridDim.x) * blockDim.x;
  packed_t<T> pairs[pairs_per_lane];
  float values[2 * pairs_per_lane];
  for (int j = 0; j < pairs_per_lane; ++j) {
    pairs[j] = make_pair<T>(in[thread * 2 * pairs_per_lane + 2 * j], in[thread * 2 * pairs_per_lane + 2 * j + 1]);
    values[2 * j] = convert<float>(low(pairs[j]));
    values[2 * j + 1] = convert<float>(high(pairs[j]));
  }
  const max_sum packed = warp_exp_sum_natural(pairs);
  const max_sum unpacked = warp_exp_sum_natural(values);
  out[2 * thread] = packed.max;
  out[2 * thread + 1] = packed.sum;
  out[2 * threads + 2 * thread] = unpacked.max;
  out[2 * threads + 2 * thread + 1] = unpacked.sum;
}

template <class T>
void run_packed_exp_sum() {
  SCOPED_TRACE(dtype_name(dtype_traits<T>::tag));
  constexpr int warps = 8, threads = warps * warp_threads, per_warp = warp_threads * 2 * pairs_per_lane;
  std::mt19937_64 rng(test_seed() + 7);
  std::uniform_real_distribution<float> dist(-12.f, 12.f);
  std::vector<T> host(size_t(threads) * 2 * pairs_per_lane);
  for (size_t i = 0; i < host.size(); ++i) {
    const int warp = int(i / per_warp);
    host[i] = convert<T>(warp == 3 ? -infinity : dist(rng));  // warp 3: pure padding
    if (warp == 5 && i % 7 == 0) host[i] = convert<T>(-infinity);  // some padding in warp 5
  }
  host[size_t(6) * per_warp + 100] = convert<T>(40.f);  // one large logit in warp 6
  device_buffer<T> in(host);
  device_buffer<float> out(4 * size_t(threads));
  packed_exp_sum_kernel<T><<<2, threads / 2>>>(in.get(), out.get());
  TILEKIT_CHECK_LAUNCH("packed_exp_sum_kernel");
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int w = 0; w < warps; ++w) {
    SCOPED_TRACE(::testing::Message() << "warp " << w);
    double m = -INFINITY, s = 0;
    for (int i = 0; i < per_warp; ++i) m = std::max(m, double(convert<float>(host[size_t(w) * per_warp + i])));
    if (m != -INFINITY)
      for (int i = 0; i < per_warp; ++i) s += std::exp(double(convert<float>(host[size_t(w) * per_warp + i])) - m);
    for (int lane = 0; lane < warp_threads; ++lane) {
      const size_t t = size_t(w) * warp_threads + lane;
      EXPECT_EQ(got[2 * t], float(m));
      EXPECT_NEAR(got[2 * t + 1], s, 1e-5 * s);
      EXPECT_EQ(got[2 * t], got[2 * threads + 2 * t]);  // the max, bit for bit
      EXPECT_NEAR(got[2 * t + 1], got[2 * threads + 2 * t + 1], 1e-5 * s);
      EXPECT_EQ(got[2 * t + 1], got[2 * (size_t(w) * warp_threads) + 1]) << "lane " << lane;  // same in every lane
    }
  }
}

// Alternating scratch: call k of group g sums (k + 1) * in[thread] + k; out[k * 512 + thread].
// Warp 0 of every group dawdles before odd calls, so fast warps run into the next call early.
constexpr int alternating_calls = 8;
__global__ void __launch_bounds__(512) alternating_reduce_kernel(const float* in, float* out) {
  __shared__ block_reduce_scratch<group_threads> scratch[groups][2];
  __shared__ block_reduce_scratch<512> whole[2];
  const int group = threadIdx.x / group_threads;
  const float x = in[threadIdx.x];
  if (group == 0) __nanosleep(20000);
  for (int k = 0; k < alternating_calls; ++k) {
    if (k % 2 == 1 && threadIdx.x % group_threads < warp_threads) __nanosleep(5000);
    const float v = float(k + 1) * x + float(k);
    out[k * 512 + threadIdx.x] = group_reduce_alternating<group_threads>(v, sum_op{}, scratch[group], uint32_t(k), 1 + group);
  }
  for (int k = 0; k < alternating_calls; ++k) {
    if (k % 2 == 0 && threadIdx.x < warp_threads) __nanosleep(5000);
    out[(alternating_calls + k) * 512 + threadIdx.x] =
        block_reduce_alternating<512>(float(k + 1) * x - float(k), sum_op{}, whole, uint32_t(k));
  }
}

// Whole cluster reductions back to back (one CTA barrier per call, two alternating block
// arrays): round k reduces (k + 1) * (thread % 5 + 1 + rank); in every round one CTA starts late
// and, inside every CTA, one warp dawdles before the block step, so that fast warps run into the
// next call while slow ones still read this one's partials. out[round * threads + global thread]
// = its sum.
constexpr int fused_rounds = 64;
__global__ void __launch_bounds__(cta_threads) fused_reduce_kernel(float* out) {
  __shared__ cluster_reduce_scratch<cta_threads, float> scratch;
  cluster_reduce_init(scratch);
  const size_t threads = size_t(gridDim.x) * cta_threads;
  const size_t thread = size_t(blockIdx.x) * cta_threads + threadIdx.x;
  for (int k = 0; k < fused_rounds; ++k) {
    if (int(cluster::rank()) == k % int(cluster::size()) && threadIdx.x == 0) __nanosleep(3000);
    if (int(threadIdx.x) / warp_threads == k % (cta_threads / warp_threads)) __nanosleep(2000);
    const float v = float((k + 1) * (int(threadIdx.x) % 5 + 1 + int(cluster::rank())));
    out[size_t(k) * threads + thread] = cluster_reduce<cta_threads>(v, sum_op{}, scratch);
  }
  cluster::sync();  // no CTA exits while a peer may still send into it
}

// Posted reductions: groups of Warps warps (cta_threads / 32 / Warps groups per CTA) over
// clusters of Ctas CTAs. Round k posts, from warp w of group g in the CTA of rank r, the
// warp-uniform (k + 1) * (w + 1 + Warps * r + g) (in every word of a 16-byte value: (1, 2, 3,
// 4) times that), and waits for round k - 1 only after that. Every round one warp of every CTA
// and one whole CTA of the cluster start late, so that others post up to a round ahead and read
// while the late ones still post. out[round * threads + global thread] = the first word of its
// total, out[(rounds + round) * threads + ..] = the sum of its words divided by 10. CtaFirst:
// each CTA's last warp of a round combines the CTA's warp partials (reduce_slots), and those
// travel (posted reductions, "CTA partials first"); the late warp of each round makes a
// different warp the last one every round.
struct four_floats {
  float v[4];
};
struct four_sum_op {
  TILEKIT_DEVICE TILEKIT_INLINE four_floats operator()(four_floats a, four_floats b) const {
    return {{a.v[0] + b.v[0], a.v[1] + b.v[1], a.v[2] + b.v[2], a.v[3] + b.v[3]}};
  }
};
constexpr int posted_rounds = 64;
template <int Warps, int Ctas, class T, bool CtaFirst>
__global__ void __launch_bounds__(cta_threads) posted_reduce_kernel(float* out) {
  constexpr int groups = cta_threads / warp_threads / Warps;
  __shared__ posted_reduce_scratch<Warps, T, Ctas, CtaFirst> scratch[groups];
  if (threadIdx.x == 0)
    for (int g = 0; g < groups; ++g) scratch[g].init();
  init_barriers_fence();
  if constexpr (Ctas > 1) cluster::sync();
  else __syncthreads();
  const size_t threads = size_t(gridDim.x) * cta_threads;
  const size_t thread = size_t(blockIdx.x) * cta_threads + threadIdx.x;
  const int warp = int(threadIdx.x) / warp_threads, group = warp / Warps, in_group = warp % Warps;
  const int rank = Ctas > 1 ? int(cluster::rank()) : 0;
  auto record = [&](int round, T total) {
    if constexpr (std::is_same_v<T, float>) {
      out[size_t(round) * threads + thread] = total;
      out[size_t(posted_rounds + round) * threads + thread] = total;
    } else {
      out[size_t(round) * threads + thread] = total.v[0];
      out[size_t(posted_rounds + round) * threads + thread] = (total.v[0] + total.v[1] + total.v[2] + total.v[3]) / 10.f;
    }
  };
  for (int k = 0; k < posted_rounds; ++k) {
    if (rank == k % Ctas) __nanosleep(3000);
    if (warp == k % (cta_threads / warp_threads)) __nanosleep(2000);
    const float v = float((k + 1) * (in_group + 1 + Warps * rank + group));
    T value;
    if constexpr (std::is_same_v<T, float>) value = v;
    else value = {{v, 2 * v, 3 * v, 4 * v}};
    posted_reduce_post(value, scratch[group], uint32_t(k), in_group, [](const T* partials, uint32_t warps) {
      if constexpr (std::is_same_v<T, float>) return reduce_slots(partials, warps, sum_op{});
      else return reduce_slots(partials, warps, four_sum_op{});
    });
    if (k > 0) {
      if constexpr (std::is_same_v<T, float>) record(k - 1, posted_reduce_wait(uint32_t(k - 1), sum_op{}, scratch[group]));
      else record(k - 1, posted_reduce_wait(uint32_t(k - 1), four_sum_op{}, scratch[group]));
    }
  }
  if constexpr (std::is_same_v<T, float>)
    record(posted_rounds - 1, posted_reduce_wait(uint32_t(posted_rounds - 1), sum_op{}, scratch[group]));
  else
    record(posted_rounds - 1, posted_reduce_wait(uint32_t(posted_rounds - 1), four_sum_op{}, scratch[group]));
  if constexpr (Ctas > 1) cluster::sync();  // no CTA exits while a peer may still send into it
}

template <int Warps, int Ctas, class T, bool CtaFirst = false>
void run_posted_reduce() {
  SCOPED_TRACE(::testing::Message() << Warps << " warps per group, cluster of " << Ctas << ", " << sizeof(T)
                                    << "-byte values" << (CtaFirst ? ", CTA partials first" : ""));
  constexpr int clusters = 2, ctas = clusters * Ctas, groups = cta_threads / warp_threads / Warps;
  const size_t threads = size_t(ctas) * cta_threads;
  device_buffer<float> out(threads * posted_rounds * 2);
  launch_clusters(posted_reduce_kernel<Warps, Ctas, T, CtaFirst>, ctas, cta_threads, Ctas, out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int k = 0; k < posted_rounds; ++k)
    for (size_t t = 0; t < threads; ++t) {
      const int group = int(t % cta_threads) / warp_threads / Warps;
      double base = 0;  // sum over the group's warps in every CTA of the cluster
      for (int r = 0; r < Ctas; ++r)
        for (int w = 0; w < Warps; ++w) base += w + 1 + Warps * r + group;
      const float expected = float((k + 1) * base);
      const float got_first = got[size_t(k) * threads + t], got_words = got[size_t(posted_rounds + k) * threads + t];
      if (got_first != expected || got_words != expected) {
        ADD_FAILURE() << "round " << k << " thread " << t << " (group " << group << " of " << groups << "): got "
                      << got_first << " / " << got_words << ", expected " << expected;
        return;
      }
    }
}

// Runs `kernel` on two clusters of cluster_size CTAs, in which round k of every thread reduces
// (k + 1) * (thread % modulus + 1 + rank) over its cluster, and checks every round of every
// thread exactly (small integers: exact in fp32).
void run_round_reductions(void (*kernel)(float*), int cluster_size, int rounds, int modulus) {
  SCOPED_TRACE(::testing::Message() << "cluster size " << cluster_size);
  constexpr int clusters = 2;
  const int ctas = clusters * cluster_size;
  const size_t threads = size_t(ctas) * cta_threads;
  device_buffer<float> out(threads * rounds);
  launch_clusters(kernel, ctas, cta_threads, cluster_size, out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  double base = 0;  // round k: (k + 1) * base
  for (int r = 0; r < cluster_size; ++r)
    for (int t = 0; t < cta_threads; ++t) base += t % modulus + 1 + r;
  for (int k = 0; k < rounds; ++k)
    for (size_t t = 0; t < threads; ++t)
      if (got[size_t(k) * threads + t] != float((k + 1) * base)) {
        ADD_FAILURE() << "round " << k << " thread " << t << ": got " << got[size_t(k) * threads + t] << ", expected "
                      << (k + 1) * base;
        return;
      }
}
void run_fused_reduce(int cluster_size) { run_round_reductions(fused_reduce_kernel, cluster_size, fused_rounds, 5); }

// reduce_slots over `count` slots of shared memory, by two warps (out[256 + ..]: the same pairs
// combined in natural units by max_sum_op): out[thread] = sum,
// out[64 + thread] = sum of squares (a map), out[128 + 2 * thread + {0, 1}] = the exp2_sum of
// (base = slot_base(in[i], i), sum = 1 + i % 3) slots: a combine whose op is not an add, with
// bases whose differences are not integers, so that its rescaled terms round (an op that
// rounded op(a, b) and op(b, a) differently, e.g. through a contracted FMA, would leave
// butterfly partners with different bits).
// Exact in fp32 for the small integers x of the test (multiples of 1/8 below 2^12), so that host
// and device agree whether or not the compiler contracts it into an FMA.
__host__ __device__ inline float slot_base(float x, int i) { return x * 0.75f + 0.125f * float(i % 64); }
constexpr int max_slots = 256;
__global__ void __launch_bounds__(64) reduce_slots_kernel(const float* in, int count, float* out) {
  __shared__ float slots[max_slots];
  __shared__ exp2_sum pairs[max_slots];
  __shared__ max_sum natural[max_slots];
  for (int i = int(threadIdx.x); i < count; i += 64) {
    slots[i] = in[i];
    pairs[i] = {slot_base(in[i], i), float(1 + i % 3)};
    natural[i] = {slot_base(in[i], i), float(1 + i % 3)};
  }
  __syncthreads();
  out[threadIdx.x] = reduce_slots(slots, uint32_t(count), sum_op{});
  out[64 + threadIdx.x] = reduce_slots(slots, uint32_t(count), sum_op{}, [](float x) { return x * x; });
  const exp2_sum total = reduce_slots(pairs, uint32_t(count), exp2_sum_op{});
  out[128 + 2 * threadIdx.x] = total.base;
  out[128 + 2 * threadIdx.x + 1] = total.sum;
  const max_sum natural_total = reduce_slots(natural, uint32_t(count), max_sum_op{});
  out[256 + 2 * threadIdx.x] = natural_total.max;
  out[256 + 2 * threadIdx.x + 1] = natural_total.sum;
}

std::vector<float> small_integers(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<float> v(n);
  for (auto& x : v) x = float(dist(rng));
  return v;
}

void expect_same_bits(const float* a, const float* b, int n, const char* what) {
  for (int i = 0; i < n; ++i)
    if (std::memcmp(&a[i], &b[0], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": thread " << i << " got " << a[i] << ", thread 0 got " << b[0];
      return;
    }
}

class Reduce : public GpuTest {};

TEST_F(Reduce, BlockSumFromThreadsAndFromWarps) {
  std::mt19937_64 rng(test_seed());
  const auto host = small_integers(cta_threads, rng);
  double sum = 0;
  for (float x : host) sum += x;
  device_buffer<float> in(host);
  device_buffer<float> out{2 * cta_threads};
  block_reduce_kernel<<<1, cta_threads>>>(in.get(), out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  EXPECT_EQ(got[0], sum);
  EXPECT_EQ(got[cta_threads], sum);
  expect_same_bits(got.data(), got.data(), cta_threads, "block_reduce");
  expect_same_bits(got.data() + cta_threads, got.data() + cta_threads, cta_threads, "block_reduce<WarpUniform>");
}

TEST_F(Reduce, IndependentGroupsOnNamedBarriers) {
  std::mt19937_64 rng(test_seed());
  const auto host = small_integers(512, rng);
  device_buffer<float> in(host);
  device_buffer<float> out{1024};
  group_reduce_kernel<<<1, 512>>>(in.get(), out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int g = 0; g < groups; ++g) {
    double sum = 0, squares = 0;
    for (int i = g * group_threads; i < (g + 1) * group_threads; ++i) sum += host[i], squares += host[i] * host[i];
    SCOPED_TRACE(::testing::Message() << "group " << g);
    EXPECT_EQ(got[g * group_threads], sum);
    EXPECT_EQ(got[512 + g * group_threads], squares);
    expect_same_bits(got.data() + g * group_threads, got.data() + g * group_threads, group_threads, "sum");
    expect_same_bits(got.data() + 512 + g * group_threads, got.data() + 512 + g * group_threads, group_threads,
                     "sum of squares");
  }
}

TEST_F(Reduce, AlternatingScratchOneBarrierPerCall) {
  std::mt19937_64 rng(test_seed() + 3);
  const auto host = small_integers(512, rng);
  device_buffer<float> in(host);
  device_buffer<float> out{size_t(2 * alternating_calls) * 512};
  alternating_reduce_kernel<<<1, 512>>>(in.get(), out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int k = 0; k < alternating_calls; ++k) {
    double all = 0;
    for (int i = 0; i < 512; ++i) all += double(k + 1) * host[i] - k;
    for (int g = 0; g < groups; ++g) {
      double sum = 0;
      for (int i = g * group_threads; i < (g + 1) * group_threads; ++i) sum += double(k + 1) * host[i] + k;
      for (int t = g * group_threads; t < (g + 1) * group_threads; ++t)
        ASSERT_EQ(got[size_t(k) * 512 + t], sum) << "group call " << k << " thread " << t;
    }
    for (int t = 0; t < 512; ++t)
      ASSERT_EQ(got[size_t(alternating_calls + k) * 512 + t], all) << "block call " << k << " thread " << t;
  }
}

void run_softmax_stats(int cluster_size) {
  SCOPED_TRACE(::testing::Message() << "cluster size " << cluster_size);
  constexpr int clusters = 3;
  const int ctas = clusters * cluster_size;
  const size_t threads = size_t(ctas) * cta_threads;
  std::mt19937_64 rng(test_seed() + cluster_size);
  auto host = random_vector<float>(threads * values_per_thread, rng, -20.f, 20.f);
  // Padding: the last CTA's warps 2.. hold only -inf (a row that ends early), and one value of
  // every CTA's warp 1 is large, so that warps disagree on their max.
  for (int cta = 0; cta < ctas; ++cta) {
    host[(size_t(cta) * cta_threads + 40) * values_per_thread + 3] = 30.f + float(cta);
    if (cta % cluster_size == cluster_size - 1)
      for (size_t i = (size_t(cta) * cta_threads + 64) * values_per_thread;
           i < size_t(cta + 1) * cta_threads * values_per_thread; ++i)
        host[i] = -infinity;
  }
  device_buffer<float> in(host);
  device_buffer<float> out{3 * threads};

  launch_clusters(softmax_stats_kernel, ctas, cta_threads, cluster_size, static_cast<const float*>(in.get()),
                  out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();

  for (int c = 0; c < clusters; ++c) {
    SCOPED_TRACE(::testing::Message() << "cluster " << c);
    const size_t first = size_t(c) * cluster_size * cta_threads, count = size_t(cluster_size) * cta_threads;
    double m = -INFINITY;
    for (size_t i = first * values_per_thread; i < (first + count) * values_per_thread; ++i) m = std::max(m, double(host[i]));
    // The base is the max times log2(e), rounded to float (one FMUL on the device).
    const float base = float(m) * log2e;
    double s = 0;
    for (size_t i = first * values_per_thread; i < (first + count) * values_per_thread; ++i)
      s += std::exp2(double(host[i]) * double(log2e) - double(base));
    EXPECT_EQ(got[2 * first], base);
    EXPECT_NEAR(got[2 * first + 1], s, 2e-5 * s);
    // Every thread of every CTA of the cluster: the same (max, sum) bits as the first thread.
    std::vector<float> bases(count), sums(count);
    double rescaled = 0;
    for (size_t t = 0; t < count; ++t) {
      bases[t] = got[2 * (first + t)];
      sums[t] = got[2 * (first + t) + 1];
      rescaled += got[2 * threads + first + t];  // this thread's exponentials, rescaled to M
    }
    expect_same_bits(bases.data(), bases.data(), int(count), "base");
    expect_same_bits(sums.data(), sums.data(), int(count), "sum");
    // Sum over threads of (own exponentials * 2^(warp base - B)) = S.
    EXPECT_NEAR(rescaled, s, 2e-5 * s);
  }
}

TEST_F(Reduce, ExpSumOfPackedPairs) {
  run_packed_exp_sum<bf16>();
  run_packed_exp_sum<fp16>();
}

TEST_F(Reduce, WholeClusterCallsBackToBack) {
  run_fused_reduce(1);
  run_fused_reduce(2);
  run_fused_reduce(4);
  run_fused_reduce(16);
}

// One CTA (groups of 4 and 8 warps; launched as clusters of 1), then clusters up to 16 CTAs x 8
// warps (128 slots: reduce_slots' lane-strided path), with 16-byte values (st.async.v4).
TEST_F(Reduce, PostedWarpPartialsOneRoundApart) {
  run_posted_reduce<4, 1, float>();
  run_posted_reduce<8, 1, float>();
  run_posted_reduce<8, 2, float>();
  run_posted_reduce<8, 4, four_floats>();
  run_posted_reduce<8, 8, four_floats>();
  run_posted_reduce<8, 16, float>();
  run_posted_reduce<2, 16, four_floats>();
}
// The same with each CTA's warp partials combined first (by the CTA's last warp to post), as
// the deferred LayerNorm forward's clusters do (2-16 CTAs, 16-byte values): the whole CTA as
// one group, then groups of fewer warps, several per CTA.
TEST_F(Reduce, PostedCtaPartialsFirst) {
  run_posted_reduce<8, 2, four_floats, true>();
  run_posted_reduce<8, 4, float, true>();
  run_posted_reduce<8, 8, four_floats, true>();
  run_posted_reduce<8, 16, four_floats, true>();
  run_posted_reduce<4, 16, float, true>();
  run_posted_reduce<2, 4, four_floats, true>();
}

TEST_F(Reduce, SoftmaxStatisticsSingleCta) { run_softmax_stats(1); }
TEST_F(Reduce, SoftmaxStatisticsClusterOf2) { run_softmax_stats(2); }
TEST_F(Reduce, SoftmaxStatisticsClusterOf4) { run_softmax_stats(4); }
// 3: the partials combined in rank order (not a power of two); 8 and 16: the widest clusters
// of the row kernels' tables, lane-parallel.
TEST_F(Reduce, SoftmaxStatisticsClusterOf3) { run_softmax_stats(3); }
TEST_F(Reduce, SoftmaxStatisticsClusterOf8) { run_softmax_stats(8); }
TEST_F(Reduce, SoftmaxStatisticsClusterOf16) { run_softmax_stats(16); }

TEST_F(Reduce, SlotsLaneParallelOrInOrder) {
  std::mt19937_64 rng(test_seed() + 11);
  for (int count : {1, 2, 3, 4, 5, 7, 8, 12, 16, 32, 33, 40, 64, 128, max_slots}) {
    SCOPED_TRACE(::testing::Message() << count << " slots");
    const auto host = small_integers(max_slots, rng);
    device_buffer<float> in(host);
    device_buffer<float> out{384};
    reduce_slots_kernel<<<1, 64>>>(in.get(), count, out.get());
    TILEKIT_CHECK_LAUNCH("reduce_slots_kernel");
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const auto got = out.download();
    double sum = 0, squares = 0, m = -INFINITY, s = 0;
    for (int i = 0; i < count; ++i)
      sum += host[i], squares += host[i] * host[i], m = std::max(m, double(slot_base(host[i], i)));
    double s_natural = 0;
    for (int i = 0; i < count; ++i) {
      s += (1 + i % 3) * std::exp2(double(slot_base(host[i], i)) - m);
      s_natural += (1 + i % 3) * std::exp(double(slot_base(host[i], i)) - m);
    }
    EXPECT_EQ(got[0], sum);
    EXPECT_EQ(got[64], squares);
    EXPECT_EQ(got[128], float(m));
    EXPECT_NEAR(got[129], s, 1e-6 * s);
    EXPECT_EQ(got[256], float(m));
    EXPECT_NEAR(got[257], s_natural, 1e-6 * s_natural);
    std::vector<float> bases(64), sums(64), maxima(64), natural_sums(64);
    for (int t = 0; t < 64; ++t) bases[t] = got[128 + 2 * t], sums[t] = got[128 + 2 * t + 1];
    for (int t = 0; t < 64; ++t) maxima[t] = got[256 + 2 * t], natural_sums[t] = got[256 + 2 * t + 1];
    expect_same_bits(maxima.data(), maxima.data(), 64, "max_sum max");
    expect_same_bits(natural_sums.data(), natural_sums.data(), 64, "max_sum sum");
    expect_same_bits(got.data(), got.data(), 64, "sum");
    expect_same_bits(got.data() + 64, got.data() + 64, 64, "sum of squares");
    expect_same_bits(bases.data(), bases.data(), 64, "exp2_sum base");
    expect_same_bits(sums.data(), sums.data(), 64, "exp2_sum sum");
  }
}

}  // namespace
