// The examples/02_gemm GEMM (C = A * B^T, bf16 in, fp32 accumulate, bf16 out)
// against cuBLAS on the same shapes, in the same run. Reports TFLOP/s and
// x_cublas = ours / cuBLAS (cuBLAS measured on the same shape with the same
// L2 flush and timing protocol).
#include "02_gemm/gemm.cuh"
#include "harness/harness.cuh"

namespace tb = tilekit::bench;
using tilekit::bf16;

namespace {

void BM_tilekit_gemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  tb::cuda_stream stream;
  tb::device_array<bf16> a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n);
  tb::fill_uniform(a.data(), a.size(), 1, stream);
  tb::fill_uniform(b.data(), b.size(), 2, stream);
  const gemm_example::gemm_args args{.a = a.data(), .b = b.data(), .c = c.data(), .m = m, .n = n, .k = k};
  tb::time_on_stream(state, stream, [&] { gemm_example::gemm(args, stream); }, {.flush_l2 = true});
  tb::set_throughput(state, 2.0 * m * n * k, 0);
  tb::cublas_ceiling_ratio(state, m, n, k);
}

void BM_cublas_gemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  tb::cuda_stream stream;
  tb::cublas_bf16_gemm gemm(m, n, k, stream);
  tb::time_on_stream(state, stream, [&] { gemm.run(); }, {.flush_l2 = true});
  tb::set_throughput(state, gemm.flops(), 0);
}

// Square sizes of the issue plus a skinny problem (few, long columns of C).
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K"});
  for (int s : {2048, 4096, 8192}) b->Args({s, s, s});
  b->Args({16384, 1024, 8192});
}

}  // namespace

TILEKIT_BENCHMARK(BM_tilekit_gemm)->Apply(shapes);
TILEKIT_BENCHMARK(BM_cublas_gemm)->Apply(shapes);
TILEKIT_BENCHMARK_MAIN()
