// The row kernel's pipeline on its own (kernels/common/row_kernel.cuh + row_stream.cuh): how
// fast rows stream through the shared-memory ring when the per-row work is (almost) nothing.
// It separates the pipeline's ceiling from the cost of each kernel's math:
//
//   BM_stream_read         read every row from its stage, no reduction (1 tensor of traffic)
//   BM_stream_read_reduce  the same plus one sum over the row's group / CTA / cluster
//   BM_stream_copy         read every row from its stage and write it out (2 tensors)
//   BM_stream_read_segments  streamed rows (row_config::segments): each group reads its row as
//                          segments, one stage each, and reduces it once per row (deferred),
//                          in the shapes of the cross-entropy forward; arg pad = elements
//                          between rows (0: dense, so an unsegmented item is one bulk copy; 8:
//                          one bulk copy per row, as every segmented item is, but also rows
//                          that are 16- and not 128-byte aligned: H200, 2026-11-30, pad 0
//                          1.03-1.05x copy at every width, pad 8 0.96-0.99)
//
// and two copies that do not use the row kernel, as references for its store path:
//
//   BM_bulk_copy           one thread per CTA moves 32 KiB items global -> shared -> global with
//                          bulk copies only (a ring of loads, one bulk store per item)
//   BM_vector_copy         a grid-stride copy with 16-byte loads and stores from registers
//                          (streaming hints; BM_vector_copy_cached without them)
//   BM_block_copy          one block of 16-byte vectors per CTA, many CTAs (elementwise shape)
//   BM_ordered_copy        persistent CTAs claiming 32 KiB items in order from a global counter
//   BM_ordered_bulk_copy   BM_bulk_copy claiming its items in order from a global counter
//   BM_paced_bulk_copy     BM_bulk_copy in its static order, paced by a global count of finished
//                          items (arg: the pace, in quarter items; the row kernel's "Paced order")
//
// The three bulk copies also report tail_pct, from one more launch after the timed ones: the
// time between the first and the last CTA's end, in percent of the launch (static: ~35-40%,
// claimed or paced ~1-4%; H200, 2026-12-01).
//
// bf16, M * N = 2^28 elements, GB/s of minimal traffic and x_copy as in bench_softmax.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/row_kernel.cuh"
#include "harness/harness.cuh"
#include "tilekit/ops/memory/tma.cuh"

namespace tb = tilekit::bench;
namespace tkd = tilekit::kernels::detail;
using tilekit::bf16;

namespace {

constexpr int64_t total_elements = int64_t(1) << 28;

struct stream_params {
  const bf16* x;
  bf16* y;       // copy: output rows
  float* sums;   // read: one float per row (written only by the reducing variant, or never)
  int64_t rows;
  int cols;
};

// Mode 0: read only; 1: read + reduce; 2: copy.
template <int Mode>
struct stream_op : tkd::row_op_defaults {
  using element = bf16;
  using reduce_value = float;
  using params = stream_params;
  static constexpr int inputs = 1;
  TILEKIT_HOST_DEVICE static tilekit::row_source<bf16> source(const params& p, int) { return {p.x, p.cols}; }

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const tkd::row_place& at, int64_t row, row_scalars,
                                         const tkd::stage_row<S> (&in)[1], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = at.cols;
    float v[layout::elements];
    tilekit::load_row_aligned<layout>(v, in[0], cols, at.thread);
    if constexpr (Mode == 2) {
      tilekit::store_row<layout, tilekit::cache_policy::streaming, S::shifted>(p.y + row * p.cols + at.col0, v, cols,
                                                                              at.thread);
    } else {
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) sum += v[j];
      if constexpr (Mode == 1) {
        sum = ctx.reduce(sum, tilekit::sum_op{});
        if (at.leader()) p.sums[row] = sum;
      } else if (sum == 1234.5f) {  // keeps the loads; never true for the zero-filled input
        p.sums[row] = sum;
      }
    }
  }
};

template <int Mode>
void BM_stream(benchmark::State& state) {
  const int64_t cols = state.range(0), rows = total_elements / cols;
  tb::cuda_stream stream;
  const size_t elements = static_cast<size_t>(total_elements);
  tb::device_array<bf16> x(elements), y(Mode == 2 ? elements : 1);
  tb::device_array<float> sums(static_cast<size_t>(rows));
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(x.data(), 0, elements * sizeof(bf16), stream));
  const stream_params params{x.data(), y.data(), sums.data(), rows, int(cols)};
  tb::time_on_stream(state, stream, [&] { tkd::run_rows<stream_op<Mode>>(params, stream); });
  const int tensors_moved = Mode == 2 ? 2 : 1;
  tb::set_throughput(state, 0, double(tensors_moved) * double(total_elements) * sizeof(bf16));
  tb::copy_ceiling_ratio(state);
}

// Streamed rows (row_kernel.cuh, "Streamed rows"): every thread sums its columns of each
// segment of its row (a running sum in `pending`), its warp reduces the sum at the row's last
// segment, and the warp's sum is posted once per row; the row's total is
// stored only if it is 1234.5 (never: the input is zero-filled). Groups of 4 warps with 64
// columns per thread: 8K columns in one segment, 16K-64K in 2-8 segments of 8K; 128K-256K in
// groups of 8 warps, 8-16 segments of 16K (the shapes of the cross-entropy forward's table).
struct segment_params {
  const bf16* x;
  float* sums;
  int64_t rows;
  int cols;
  int64_t stride;
};
inline constexpr tkd::row_table segment_table = [] {
  tkd::row_table t = tkd::with_classes(tkd::default_row_table, 0,
                                       {{8192, 128, 1, 1, 64},
                                        {16384, 128, 1, 1, 64, false, 2},
                                        {32768, 128, 1, 1, 64, false, 4},
                                        {65536, 128, 1, 1, 64, false, 8},
                                        {131072, 256, 1, 1, 64, false, 8},
                                        {262144, 256, 1, 1, 64, false, 16}});
  t.count = 6;
  return t;
}();
struct segment_read_op : tkd::row_op_defaults {
  using element = bf16;
  using reduce_value = float;
  using params = segment_params;
  static constexpr int inputs = 1;
  static constexpr const tkd::row_table& table = segment_table;
  TILEKIT_HOST_DEVICE static constexpr tkd::item_order item_order_for(tkd::row_config) {  // as the CE forward
    return tkd::item_order::fixed;
  }
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(tkd::row_config) { return true; }
  TILEKIT_HOST_DEVICE static tilekit::row_source<bf16> source(const params& p, int) { return {p.x, p.stride}; }

  template <class S>
  struct pending {
    float sum;  // this thread's columns of the row's segments so far
  };
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE float partial(const params& p, const tkd::row_place& at, int64_t, row_scalars,
                                              const tkd::stage_row<S> (&in)[1], pending<S>& running) {
    using layout = typename S::layout;
    float v[layout::elements];
    tilekit::load_row_aligned<layout>(v, in[0], p.cols - at.col0, at.thread);
    float sum = at.segment > 0 ? running.sum : 0.f;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) sum += v[j];
    running.sum = sum;
    return at.segment + 1 < at.segments ? 0.f : tilekit::warp_reduce(sum, tilekit::sum_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE float total(const params&, const float* partials, uint32_t count) const {
    return tilekit::reduce_slots(partials, count, tilekit::sum_op{});
  }
  template <class S>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(const params& p, const tkd::row_place& at, int64_t row, const pending<S>&,
                                            float total) {
    if (at.leader() && total == 1234.5f) p.sums[row] = total;
  }
};

void BM_stream_read_segments(benchmark::State& state) {
  const int64_t cols = state.range(0), pad = state.range(1), rows = total_elements / cols;
  tb::cuda_stream stream;
  const size_t elements = static_cast<size_t>(rows * (cols + pad));
  tb::device_array<bf16> x(elements);
  tb::device_array<float> sums(static_cast<size_t>(rows));
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(x.data(), 0, elements * sizeof(bf16), stream));
  const segment_params params{x.data(), sums.data(), rows, int(cols), cols + pad};
  tb::time_on_stream(state, stream, [&] { tkd::run_rows<segment_read_op>(params, stream); });
  tb::set_throughput(state, 0, double(total_elements) * sizeof(bf16));
  tb::copy_ceiling_ratio(state);
}

// Bulk copy through shared memory: per CTA a ring of `bulk_stages` items of `bulk_item_bytes`;
// thread 0 waits for its k-th item, stores it with one bulk store, waits until the store has read
// the stage, and refills the stage with its (k + bulk_stages)-th item. Orders: fixed, CTA b
// copies items b, b + grid, b + 2 grid, ... (static grid stride); claimed, it claims its items
// IN ORDER from a global counter (zeroed before each launch), each claim made one refill ahead
// so that thread 0 never waits for the atomic's round trip; paced, the static stride, but a CTA
// that has finished k items loads its next one only once the CTAs have finished (k - pace / 4)
// items each on average (the same counter counts finished items; the count checked is the one
// the previous item's atomic returned, so its latency is hidden, and the CTA polls only when it
// is short). times (optional): per CTA its start and end (globaltimer, ns).
constexpr int bulk_stages = 6;
constexpr uint32_t bulk_item_bytes = 32 * 1024;
enum class bulk_order { fixed, claimed, paced };
__device__ __forceinline__ unsigned long long global_time() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned long long load_relaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
template <bulk_order Order>
__global__ void __launch_bounds__(32, 1) bulk_copy_kernel(const bf16* x, bf16* y, int64_t items,
                                                          unsigned long long* counter, int pace,
                                                          unsigned long long* times) {
  extern __shared__ __align__(128) unsigned char stages[];
  __shared__ tilekit::mbarrier full[bulk_stages];
  if (threadIdx.x != 0) return;
  if (times) times[2 * blockIdx.x] = global_time();
  for (int s = 0; s < bulk_stages; ++s) full[s].init(1);
  tilekit::init_barriers_fence();
  auto load = [&](int s, int64_t item) {
    full[s].arrive_expect_tx(bulk_item_bytes);
    tilekit::tma::load_bytes_async(stages + s * bulk_item_bytes,
                                   reinterpret_cast<const unsigned char*>(x) + item * bulk_item_bytes,
                                   bulk_item_bytes, full[s]);
  };
  constexpr bool ordered = Order == bulk_order::claimed;
  auto claim = [&] { return int64_t(atomicAdd(counter, 1ull)); };
  int64_t item_of[bulk_stages];  // the item each stage holds
  for (int s = 0; s < bulk_stages; ++s) {
    item_of[s] = ordered ? claim() : blockIdx.x + s * int64_t(gridDim.x);
    if (item_of[s] < items) load(s, item_of[s]);
  }
  int64_t pending = ordered ? claim() : 0;
  unsigned long long done_seen = 0;
  for (int64_t k = 0;; ++k) {
    const int s = int(k % bulk_stages);
    const int64_t item = item_of[s];
    if (item >= items) break;
    full[s].wait(uint32_t((k / bulk_stages) % 2));
    tilekit::tma::store_bytes_async(reinterpret_cast<unsigned char*>(y) + item * bulk_item_bytes,
                                    stages + s * bulk_item_bytes, bulk_item_bytes);
    tilekit::tma::store_commit();
    tilekit::tma::store_wait_read<0>();
    if constexpr (ordered) {
      item_of[s] = pending;
      pending = claim();
    } else {
      item_of[s] = item + int64_t(bulk_stages) * gridDim.x;
    }
    if constexpr (Order == bulk_order::paced) {
      const int64_t need = ((k + 1) * 4 - pace) * int64_t(gridDim.x) / 4;  // this CTA has done k + 1 items
      if (item_of[s] < items && need > 0 && int64_t(done_seen) < need) {
        while (int64_t(load_relaxed(counter)) < need) {
        }
      }
      done_seen = atomicAdd(counter, 1ull) + 1;  // this item done; read at the next one
    }
    if (item_of[s] < items) load(s, item_of[s]);
  }
  tilekit::tma::store_wait<0>();
  if (times) times[2 * blockIdx.x + 1] = global_time();
}

// Streaming: ld/st.global.cs (evict-first), as the row kernels store; else default caching.
template <bool Streaming>
__global__ void __launch_bounds__(512) vector_copy_kernel(const uint4* x, uint4* y, int64_t n) {
  auto load = [](const uint4* p) { return Streaming ? __ldcs(p) : *p; };
  auto store = [](uint4* p, uint4 v) {
    if constexpr (Streaming) __stcs(p, v);
    else *p = v;
  };
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = load(x + i), b = load(x + i + stride), c = load(x + i + 2 * stride), d = load(x + i + 3 * stride);
    store(y + i, a), store(y + i + stride, b), store(y + i + 2 * stride, c), store(y + i + 3 * stride, d);
  }
  for (; i < n; i += stride) store(y + i, load(x + i));
}

// Copies the 4 vectors base + k * Threads (k < 4) that lie below n: every load before any store.
template <int Threads>
__device__ __forceinline__ void copy_four_vectors(const uint4* x, uint4* y, int64_t base, int64_t n) {
  uint4 v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (base + k * Threads < n) v[k] = x[base + k * Threads];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (base + k * Threads < n) y[base + k * Threads] = v[k];
}

// One block of 256 threads x 4 vectors per CTA, no loop, as many CTAs as that takes (the shape
// of a compiled elementwise kernel): default caching.
__global__ void __launch_bounds__(256) block_copy_kernel(const uint4* x, uint4* y, int64_t n) {
  copy_four_vectors<256>(x, y, int64_t(blockIdx.x) * 1024 + threadIdx.x, n);
}

// Persistent CTAs that claim items of 512 x 4 vectors (32 KiB) IN ORDER from a global counter
// (zeroed before each launch): the same work as vector_copy_kernel, but the items in flight
// stay a compact region of memory however the CTAs drift.
__global__ void __launch_bounds__(512) ordered_copy_kernel(const uint4* x, uint4* y, int64_t n,
                                                           unsigned long long* counter) {
  __shared__ int64_t claimed;
  for (;;) {
    if (threadIdx.x == 0) claimed = int64_t(atomicAdd(counter, 1ull));
    __syncthreads();
    const int64_t base = claimed * 2048 + threadIdx.x;
    __syncthreads();  // everyone has read `claimed` before thread 0 overwrites it
    if (base - threadIdx.x >= n) break;
    copy_four_vectors<512>(x, y, base, n);
  }
}

// What every reference copy shares: a stream, the 2^28 bf16 source (zeroed) and destination,
// the SM count, a one-word counter for the ordered copies (reset inside the timed region: a
// 8-byte memset, ~1% of a run) and the report (GB/s of the copy's traffic, x copy).
struct copy_setup {
  static constexpr size_t elements = static_cast<size_t>(total_elements);
  tb::cuda_stream stream;
  tb::device_array<bf16> x{elements}, y{elements};
  tb::device_array<unsigned long long> counter{1};
  int sms = 0;
  copy_setup() {
    TILEKIT_CHECK_CUDA(cudaMemsetAsync(x.data(), 0, elements * sizeof(bf16), stream));
    TILEKIT_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  }
  void reset_counter() { TILEKIT_CHECK_CUDA(cudaMemsetAsync(counter.data(), 0, sizeof(unsigned long long), stream)); }
  static void report(benchmark::State& state) {
    tb::set_throughput(state, 0, 2.0 * double(total_elements) * sizeof(bf16));
    tb::copy_ceiling_ratio(state);
  }
};

// Kind 1: grid-stride vectors, streaming; 2: the same, default caching; 3: one block of vectors
// per CTA (block_copy_kernel); 4: ordered_copy_kernel.
template <int Kind>
void BM_reference_copy(benchmark::State& state) {
  copy_setup c;
  const auto* x4 = reinterpret_cast<const uint4*>(c.x.data());
  auto* y4 = reinterpret_cast<uint4*>(c.y.data());
  const int64_t vectors = int64_t(copy_setup::elements * sizeof(bf16) / sizeof(uint4));
  const int sms = c.sms;
  tb::time_on_stream(state, c.stream, [&] {
    if constexpr (Kind == 1) vector_copy_kernel<true><<<sms * 4, 512, 0, c.stream>>>(x4, y4, vectors);
    else if constexpr (Kind == 2) vector_copy_kernel<false><<<sms * 4, 512, 0, c.stream>>>(x4, y4, vectors);
    else if constexpr (Kind == 3) block_copy_kernel<<<unsigned((vectors + 1023) / 1024), 256, 0, c.stream>>>(x4, y4, vectors);
    else {
      c.reset_counter();
      ordered_copy_kernel<<<sms * 4, 512, 0, c.stream>>>(x4, y4, vectors, c.counter.data());
    }
  });
  copy_setup::report(state);
}
void BM_vector_copy(benchmark::State& state) { BM_reference_copy<1>(state); }
void BM_vector_copy_cached(benchmark::State& state) { BM_reference_copy<2>(state); }
void BM_block_copy(benchmark::State& state) { BM_reference_copy<3>(state); }
void BM_ordered_copy(benchmark::State& state) { BM_reference_copy<4>(state); }

// Bulk copies in the three orders (arg: the pace, for the paced one), with the spread of the
// CTAs' end times in one more launch after the timed ones: tail_pct = (last end - first end) /
// (last end - first start), in percent. The counter is reset in every order.
template <bulk_order Order>
void BM_bulk_order(benchmark::State& state) {
  copy_setup c;
  const int sms = c.sms;
  const size_t shared = size_t(bulk_stages) * bulk_item_bytes;
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(bulk_copy_kernel<Order>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  const int64_t items = int64_t(copy_setup::elements * sizeof(bf16) / bulk_item_bytes);
  const int pace = int(state.range(0));
  tb::device_array<unsigned long long> times(2 * size_t(sms));
  auto launch = [&](unsigned long long* t) {
    c.reset_counter();
    bulk_copy_kernel<Order><<<sms, 32, shared, c.stream>>>(c.x.data(), c.y.data(), items, c.counter.data(), pace, t);
  };
  tb::time_on_stream(state, c.stream, [&] { launch(nullptr); });
  copy_setup::report(state);
  launch(times.data());
  std::vector<unsigned long long> host(2 * size_t(sms));
  TILEKIT_CHECK_CUDA(cudaMemcpyAsync(host.data(), times.data(), host.size() * 8, cudaMemcpyDeviceToHost, c.stream));
  TILEKIT_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  unsigned long long first_start = ~0ull, first_end = ~0ull, last_end = 0;
  for (int b = 0; b < sms; ++b) {
    first_start = std::min(first_start, host[2 * b]);
    first_end = std::min(first_end, host[2 * b + 1]);
    last_end = std::max(last_end, host[2 * b + 1]);
  }
  state.counters["tail_pct"] = 100.0 * double(last_end - first_end) / double(last_end - first_start);
}
void BM_bulk_copy(benchmark::State& state) { BM_bulk_order<bulk_order::fixed>(state); }
void BM_ordered_bulk_copy(benchmark::State& state) { BM_bulk_order<bulk_order::claimed>(state); }
void BM_paced_bulk_copy(benchmark::State& state) { BM_bulk_order<bulk_order::paced>(state); }

void widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N"});
  for (int64_t n : {1024, 16384, 262144}) b->Args({n});
}

void segment_widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "pad"});
  for (int64_t pad : {0, 8})
    for (int64_t n : {8192, 16384, 32768, 65536, 131072, 262144}) b->Args({n, pad});
}

void BM_stream_read(benchmark::State& state) { BM_stream<0>(state); }
void BM_stream_read_reduce(benchmark::State& state) { BM_stream<1>(state); }
void BM_stream_copy(benchmark::State& state) { BM_stream<2>(state); }

}  // namespace

TILEKIT_BENCHMARK(BM_stream_read)->Apply(widths);
TILEKIT_BENCHMARK(BM_stream_read_reduce)->Apply(widths);
TILEKIT_BENCHMARK(BM_stream_copy)->Apply(widths);
TILEKIT_BENCHMARK(BM_stream_read_segments)->Apply(segment_widths);
TILEKIT_BENCHMARK(BM_bulk_copy)->Arg(0);
TILEKIT_BENCHMARK(BM_vector_copy);
TILEKIT_BENCHMARK(BM_vector_copy_cached);
TILEKIT_BENCHMARK(BM_block_copy);
TILEKIT_BENCHMARK(BM_ordered_copy);
TILEKIT_BENCHMARK(BM_ordered_bulk_copy)->Arg(0);
TILEKIT_BENCHMARK(BM_paced_bulk_copy)->Arg(4)->Arg(5)->Arg(6)->Arg(8)->Arg(12);
TILEKIT_BENCHMARK_MAIN()
