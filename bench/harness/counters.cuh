#pragma once
// Benchmark counters in the units the project reports.
//
//   "TFLOP/s"  = flops / 1e12 / median seconds
//   "GB/s"     = bytes / 1e9  / median seconds      (decimal GB, as HBM specs)
//   "x_copy"   = GB/s / same-run device-to-device copy bandwidth
//   "x_cublas" = TFLOP/s / same-run cuBLAS bf16 GEMM rate of the same shape
//
// The values are plain numbers already in those units (no kIsRate flag), so
// the JSON output holds e.g. 3.95e3 for "GB/s". The console reporter prints
// counters with SI prefixes, so 3950 GB/s shows as "GB/s=3.95k".
//
// Byte and FLOP conventions (DESIGN.md section 4): memory-bound kernels count
// each input read once and each output written once; GEMM 2*M*N*K; attention
// forward 4*B*H*Nq*Nk*D (halved when causal), backward 2.5x forward.

#include <benchmark/benchmark.h>

#include <string>

#include "harness/ceilings.cuh"
#include "harness/timer.cuh"
#include "tilekit/core/error.cuh"

namespace tilekit::bench {

inline constexpr const char* tflops_counter = "TFLOP/s";
inline constexpr const char* gbps_counter = "GB/s";
inline constexpr const char* copy_ratio_counter = "x_copy";
inline constexpr const char* cublas_ratio_counter = "x_cublas";

inline void set_ratio(benchmark::State& state, const std::string& name, double value) {
  state.counters[name] = benchmark::Counter(value);
}

// Median seconds stored by time_on_stream for this benchmark run (0 when the
// run was skipped before its first iteration).
inline double median_seconds(const benchmark::State& state) {
  const auto it = state.counters.find(median_time_counter);
  TILEKIT_CHECK_ARG(it != state.counters.end(), "set_throughput needs a timed run: call time_on_stream(state, ...) first");
  return it->second.value / microseconds_per_second;
}

// Sets "TFLOP/s" (when flops > 0) and "GB/s" (when bytes > 0) for the work of
// ONE run, from the median run time. Call after time_on_stream.
inline void set_throughput(benchmark::State& state, double flops, double bytes) {
  const double seconds = median_seconds(state);
  if (seconds <= 0) return;  // no iteration ran (SkipWithError): nothing to report
  if (flops > 0) set_ratio(state, tflops_counter, flops / flops_per_tflop / seconds);
  if (bytes > 0) set_ratio(state, gbps_counter, bytes / bytes_per_gb / seconds);
}

// Sets `ratio_name` = achieved / ceiling and returns it (0 when no ceiling).
inline double ceiling_ratio(benchmark::State& state, const std::string& ratio_name, double achieved,
                            double ceiling) {
  const double ratio = ceiling > 0 ? achieved / ceiling : 0.0;
  set_ratio(state, ratio_name, ratio);
  return ratio;
}

// The ratios below read the counter set_throughput wrote; when it is absent
// (the run was skipped, or that quantity was not given) they set nothing and
// return 0.

// "x_copy" from the "GB/s" counter: for memory-bound kernels.
inline double copy_ceiling_ratio(benchmark::State& state) {
  const auto it = state.counters.find(gbps_counter);
  if (it == state.counters.end()) return 0.0;
  return ceiling_ratio(state, copy_ratio_counter, it->second.value, measure_copy_bandwidth());
}

// "x_cublas" from the "TFLOP/s" counter: for compute-bound kernels, against
// cuBLAS on the GEMM of the same shape (m, n, k) or the same FLOP count.
inline double cublas_ceiling_ratio(benchmark::State& state, int m, int n, int k) {
  const auto it = state.counters.find(tflops_counter);
  if (it == state.counters.end()) return 0.0;
  return ceiling_ratio(state, cublas_ratio_counter, it->second.value, measure_cublas_bf16_gemm(m, n, k));
}

}  // namespace tilekit::bench
