// The row kernel's pipeline on its own (kernels/common/row_kernel.cuh + row_stream.cuh): how
// fast rows stream through the shared-memory ring when the per-row work is (almost) nothing.
// It separates the pipeline's ceiling from the cost of each kernel's math:
//
//   BM_stream_read         read every row from its stage, no reduction (1 tensor of traffic)
//   BM_stream_read_reduce  the same plus one sum over the row's group / CTA / cluster
//   BM_stream_copy         read every row from its stage and write it out (2 tensors)
//
// bf16, M * N = 2^28 elements, GB/s of minimal traffic and x_copy as in bench_softmax.
#include <cstdint>

#include "common/row_kernel.cuh"
#include "harness/harness.cuh"

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
struct stream_op {
  using element = bf16;
  using reduce_value = float;
  using params = stream_params;
  struct row_scalars {};
  static constexpr int inputs = 1;
  static constexpr bool per_worker_results = false;
  TILEKIT_HOST_DEVICE static constexpr size_t shared_bytes(tkd::row_config) { return 0; }
  TILEKIT_HOST_DEVICE static tilekit::row_source<bf16> source(const params& p, int) { return {p.x, p.cols}; }
  TILEKIT_DEVICE static row_scalars fetch(const params&, int64_t) { return {}; }
  template <class S>
  TILEKIT_DEVICE void begin(const params&, const tkd::row_place&, void*) {}
  template <class S>
  TILEKIT_DEVICE void end(const params&, const tkd::row_place&, void*) {}

  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const tkd::row_place& at, int64_t row, row_scalars,
                                         const bf16* (&in)[1], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = p.cols - at.col0;
    float v[layout::elements];
    tilekit::load_row_aligned<layout>(v, in[0], cols, at.thread);
    if constexpr (Mode == 2) {
      tilekit::store_row<layout, tilekit::cache_policy::streaming>(p.y + row * p.cols + at.col0, v, cols, at.thread);
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

void widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N"});
  for (int64_t n : {1024, 16384, 262144}) b->Args({n});
}

void BM_stream_read(benchmark::State& state) { BM_stream<0>(state); }
void BM_stream_read_reduce(benchmark::State& state) { BM_stream<1>(state); }
void BM_stream_copy(benchmark::State& state) { BM_stream<2>(state); }

}  // namespace

TILEKIT_BENCHMARK(BM_stream_read)->Apply(widths);
TILEKIT_BENCHMARK(BM_stream_read_reduce)->Apply(widths);
TILEKIT_BENCHMARK(BM_stream_copy)->Apply(widths);
TILEKIT_BENCHMARK_MAIN()
