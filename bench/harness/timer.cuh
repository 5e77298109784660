#pragma once
// Timing GPU work with CUDA events, inside and outside Google Benchmark.
//
// Protocol of one timed run (gpu_timer::time_once):
//
//   [L2 flush, optional] [hold kernel] start-event  launch()  stop-event  sync
//   '------ not timed ----------------''-------- timed --------'
//
// The hold kernel spins for timing_options::hold_microseconds so that the
// start event, the launch and the stop event are all queued while the GPU is
// busy: the events then bracket the work itself, not the host's launch
// latency (several microseconds, as long as a whole small kernel).
//
// Inside a benchmark (time_on_stream):
//  * warm-up: at least warmup_runs runs and at least min_warmup_seconds of
//    them (clocks ramp up, lazy module loading and cuBLAS heuristics happen),
//    each time the benchmark function is entered;
//  * one event-timed run per benchmark iteration, reported with
//    state.SetIterationTime, so benchmarks must register with
//    ->UseManualTime() (TILEKIT_BENCHMARK does);
//  * the median of the run times is stored in the counter "median_us", and
//    set_throughput derives TFLOP/s and GB/s from it.
//
// Why the median is ours and not Google Benchmark's: its "Time" column is the
// mean of the iteration times of a run, and the per-iteration samples are not
// exposed. MinWarmUpTime and the string form of --benchmark_min_time exist in
// 1.8 but not in 1.7, so the harness does its own warm-up and keeps its own
// samples; the result is the same in Google Benchmark 1.7.1 and 1.8.3. For the
// spread between repeated runs of a benchmark add
//   --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// which reports mean/median/stddev of every counter (both versions).

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "harness/cuda_resources.cuh"
#include "harness/l2.cuh"
#include "tilekit/core/error.cuh"

// Register a benchmark function with the settings every tilekit benchmark
// needs; chain ->Args(...), ->Apply(...), ->Name(...) as usual.
#define TILEKIT_BENCHMARK(function) BENCHMARK(function)->UseManualTime()->Unit(::benchmark::kMicrosecond)

namespace tilekit::bench {

struct timing_options {
  int warmup_runs = 3;
  double min_warmup_seconds = 0.05;
  // Sweep 2x L2 before each timed run (see l2.cuh for when to use it).
  bool flush_l2 = false;
  // Length of the hold kernel; longer than the host needs to enqueue
  // event + launch + event (cuBLAS calls take the longest, ~10 us).
  double hold_microseconds = 30.0;
};

// Name of the counter that holds the median run time of a benchmark.
inline constexpr const char* median_time_counter = "median_us";
inline constexpr double microseconds_per_second = 1e6;

// Spins one thread until `nanoseconds` of the global timer have passed.
template <int = 0>
__global__ void hold_stream_kernel(uint64_t nanoseconds) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

class gpu_timer {
 public:
  explicit gpu_timer(cudaStream_t stream, timing_options options = {}) : stream_(stream), options_(options) {}

  // Runs launch() once on the stream and returns its event-timed seconds.
  // launch() must only enqueue work on stream() (kernel launches, async
  // copies, library calls bound to the stream); it must not synchronize.
  template <class Launch>
  double time_once(Launch&& launch) {
    prepare();
    start_.record(stream_);
    launch();
    TILEKIT_CHECK_LAUNCH("the benchmarked launch");
    stop_.record(stream_);
    return elapsed_seconds(start_, stop_);
  }

  // Untimed runs until both warmup_runs and min_warmup_seconds are reached.
  template <class Launch>
  void warm_up(Launch&& launch) {
    const auto begin = std::chrono::steady_clock::now();
    for (int run = 0;; ++run) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      if (run >= options_.warmup_runs && seconds >= options_.min_warmup_seconds) break;
      launch();
      TILEKIT_CHECK_LAUNCH("the benchmarked launch (warm-up)");
      TILEKIT_CHECK_CUDA(cudaStreamSynchronize(stream_));
    }
  }

  cudaStream_t stream() const { return stream_; }
  const timing_options& options() const { return options_; }

 private:
  void prepare() {
    if (options_.flush_l2) l2_flusher::instance().flush(stream_);
    constexpr double nanoseconds_per_microsecond = 1e3;
    hold_stream_kernel<<<1, 1, 0, stream_>>>(uint64_t(options_.hold_microseconds * nanoseconds_per_microsecond));
    TILEKIT_CHECK_LAUNCH("hold_stream_kernel");
  }

  cudaStream_t stream_;
  timing_options options_;
  cuda_event start_, stop_;
};

// Median of `samples` (reorders them); 0 when empty.
inline double median(std::vector<double>& samples) {
  if (samples.empty()) return 0.0;
  const size_t middle = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + middle, samples.end());
  const double upper = samples[middle];
  if (samples.size() % 2 == 1) return upper;
  const double lower = *std::max_element(samples.begin(), samples.begin() + middle);
  return 0.5 * (lower + upper);
}

struct timing {
  double median_seconds = 0;
  double min_seconds = 0;
  size_t runs = 0;
};

// Outside Google Benchmark (ceilings, self-checks): warm-up, then `runs`
// timed runs; returns their median and minimum.
template <class Launch>
timing time_runs(cudaStream_t stream, int runs, Launch&& launch, timing_options options = {}) {
  gpu_timer timer(stream, options);
  timer.warm_up(launch);
  std::vector<double> samples;
  samples.reserve(size_t(std::max(runs, 0)));
  for (int run = 0; run < runs; ++run) samples.push_back(timer.time_once(launch));
  timing result;
  result.runs = samples.size();
  if (!samples.empty()) result.min_seconds = *std::min_element(samples.begin(), samples.end());
  result.median_seconds = median(samples);
  return result;
}

// The benchmark loop: warm-up, one timed run per iteration reported with
// SetIterationTime, median stored in the "median_us" counter and returned.
template <class Launch>
timing time_on_stream(benchmark::State& state, cudaStream_t stream, Launch&& launch, timing_options options = {}) {
  gpu_timer timer(stream, options);
  timer.warm_up(launch);
  std::vector<double> samples;
  for (auto _ : state) {
    const double seconds = timer.time_once(launch);
    state.SetIterationTime(seconds);
    samples.push_back(seconds);
  }
  timing result;
  result.runs = samples.size();
  if (!samples.empty()) result.min_seconds = *std::min_element(samples.begin(), samples.end());
  result.median_seconds = median(samples);
  state.counters[median_time_counter] = benchmark::Counter(result.median_seconds * microseconds_per_second);
  return result;
}

}  // namespace tilekit::bench
