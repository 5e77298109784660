// The examples/02_gemm GEMM (C = A * B^T, bf16 in, fp32 accumulate, bf16 out)
// against cuBLAS on the same shapes, in the same run.
//
// Each benchmark times our GEMM (Google Benchmark iterations, median), then
// right after it cuBLAS on the same shape with the same protocol (L2 flushed
// before every run, median of `cublas_runs`), so that both see the same clocks:
// an H200 under sustained GEMM load slows down, and a ceiling measured minutes
// earlier on a cool GPU would flatter cuBLAS. Counters: TFLOP/s (ours),
// cublas_TFLOP/s, x_cublas = ours / cuBLAS. BM_gemm_no_cluster is the same kernel
// without B multicast (cluster of 1), to show what the cluster buys.
#include "02_gemm/gemm.cuh"
#include "harness/harness.cuh"

namespace tb = tilekit::bench;
using tilekit::bf16;

namespace {

constexpr int cublas_runs = 50;

template <int Cluster>
void BM_gemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  const double flops = 2.0 * m * n * k;
  tb::cuda_stream stream;
  tb::device_array<bf16> a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n);
  tb::fill_uniform(a.data(), a.size(), 1, stream);
  tb::fill_uniform(b.data(), b.size(), 2, stream);
  const gemm_example::gemm_args args{.a = a.data(), .b = b.data(), .c = c.data(), .m = m, .n = n, .k = k};
  tb::timing_options options;
  options.flush_l2 = true;
  tb::time_on_stream(state, stream, [&] { gemm_example::gemm<Cluster>(args, stream); }, options);
  tb::set_throughput(state, flops, 0);

  tb::cublas_bf16_gemm cublas(m, n, k, stream);
  const tb::timing t = tb::time_runs(stream, cublas_runs, [&] { cublas.run(); }, options);
  const double cublas_tflops = flops / tb::flops_per_tflop / t.median_seconds;
  tb::set_ratio(state, "cublas_TFLOP/s", cublas_tflops);
  tb::ceiling_ratio(state, tb::cublas_ratio_counter, state.counters[tb::tflops_counter].value, cublas_tflops);
}

// Square sizes of the issue plus a skinny problem (few, long columns of C).
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K"});
  for (int s : {2048, 4096, 8192}) b->Args({s, s, s});
  b->Args({16384, 1024, 8192});
}

}  // namespace

// The shipped configuration (B multicast over a cluster of 2), and without clusters.
TILEKIT_BENCHMARK(BM_gemm<gemm_example::config::cluster>)->Name("BM_gemm")->Apply(shapes);
TILEKIT_BENCHMARK(BM_gemm<1>)->Name("BM_gemm_no_cluster")->Apply(shapes);
TILEKIT_BENCHMARK_MAIN()
