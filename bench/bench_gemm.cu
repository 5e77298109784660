// The examples/02_gemm GEMM (C = A * B^T, bf16 in, fp32 accumulate, bf16 out)
// against cuBLAS on the same shapes, in the same run.
//
// Each benchmark iteration times one run of our GEMM and then one run of
// cuBLAS on the same shape, alternating (L2 flushed before every run, CUDA
// events behind a hold kernel), so both see the same clocks: an H200 under
// sustained GEMM load slows down (cuBLAS 8192^3: ~790 TFLOP/s on a cool GPU,
// ~670 after seconds of load), and comparing against a ceiling measured on a
// cool GPU, or after our runs, would flatter one side. Counters: TFLOP/s
// (ours, median), cublas_TFLOP/s (median), x_cublas = ours / cuBLAS.
// BM_gemm_no_cluster is the same kernel without B multicast (cluster of 1), to
// show what the cluster buys.
#include "02_gemm/gemm.cuh"
#include "harness/harness.cuh"

namespace tb = tilekit::bench;
using tilekit::bf16;

namespace {

template <int Cluster>
void BM_gemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  const double flops = 2.0 * m * n * k;
  tb::cuda_stream stream;
  tb::device_array<bf16> a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n);
  tb::fill_uniform(a.data(), a.size(), 1, stream);
  tb::fill_uniform(b.data(), b.size(), 2, stream);
  const gemm_example::gemm_args args{.a = a.data(), .b = b.data(), .c = c.data(), .m = m, .n = n, .k = k};
  tb::cublas_bf16_gemm cublas(m, n, k, stream);
  const auto run_ours = [&] { gemm_example::gemm<Cluster>(args, stream); };
  const auto run_cublas = [&] { cublas.run(); };

  tb::timing_options options;
  options.flush_l2 = true;
  tb::gpu_timer ours_timer(stream, options), cublas_timer(stream, options);
  ours_timer.warm_up(run_ours);
  cublas_timer.warm_up(run_cublas);
  std::vector<double> ours, theirs;
  for (auto _ : state) {
    const double seconds = ours_timer.time_once(run_ours);
    state.SetIterationTime(seconds);
    ours.push_back(seconds);
    theirs.push_back(cublas_timer.time_once(run_cublas));
  }
  const double ours_median = tb::median(ours), cublas_median = tb::median(theirs);
  state.counters[tb::median_time_counter] = ours_median * tb::microseconds_per_second;
  tb::set_throughput(state, flops, 0);
  const double cublas_tflops = flops / tb::flops_per_tflop / cublas_median;
  tb::set_ratio(state, "cublas_TFLOP/s", cublas_tflops);
  tb::ceiling_ratio(state, tb::cublas_ratio_counter, flops / tb::flops_per_tflop / ours_median, cublas_tflops);
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
