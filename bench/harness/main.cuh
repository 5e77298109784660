#pragma once
// The main function of every tilekit benchmark binary:
//
//   TILEKIT_BENCHMARK_MAIN()
//
// 1. strips tilekit's own flags (below) and hands the rest to Google
//    Benchmark, so --benchmark_filter, --benchmark_out=file.json
//    --benchmark_out_format=json, --benchmark_repetitions ... work as usual;
// 2. --benchmark_list_tests lists the benchmarks without touching the GPU;
// 3. without an sm_90 GPU prints why and exits 0 (CI builds and smoke-runs
//    every benchmark on a machine without a GPU), or exits 1 when
//    TILEKIT_REQUIRE_GPU=1 (the GPU machine sets it, as for the tests);
// 4. prints the device (name, SMs, clocks, L2) and the same-run ceilings
//    (copy bandwidth, cuBLAS bf16 GEMM 8192^3), also recorded in the JSON
//    "context", then runs the benchmarks;
// 5. a tilekit::error (failed CUDA or cuBLAS call) ends the run with its
//    message and exit code 1.
//
// tilekit flags:
//   --tilekit_device=N         run on device N (default 0)
//   --tilekit_skip_ceilings    do not measure the ceilings up front (ratios
//                              still measure theirs on first use)

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "harness/ceilings.cuh"
#include "tilekit/core/device.cuh"
#include "tilekit/core/error.cuh"

namespace tilekit::bench {

// The GEMM shape whose cuBLAS rate is printed as the compute ceiling.
inline constexpr int reference_gemm_size = 8192;

struct main_options {
  int device = 0;
  bool measure_ceilings = true;
  bool list_only = false;
  bool show_help = false;
};

namespace detail {
inline bool starts_with(const char* text, const char* prefix) {
  return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

// Google Benchmark's boolean flags accept "--flag" and "--flag=<value>".
inline bool bool_flag_is_set(const char* argument, const char* flag) {
  const size_t length = std::strlen(flag);
  if (std::strncmp(argument, flag, length) != 0) return false;
  if (argument[length] == '\0') return true;
  if (argument[length] != '=') return false;
  const std::string value = argument + length + 1;
  return !(value == "false" || value == "0" || value == "no" || value == "f" || value == "n" || value == "F" ||
           value == "FALSE" || value == "False");
}

// Removes --tilekit_* arguments from argv (Google Benchmark rejects unknown
// flags) and notes the Google Benchmark flags that change what main does.
inline main_options parse_arguments(int& argc, char** argv) {
  main_options options;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* argument = argv[i];
    if (starts_with(argument, "--tilekit_device=")) {
      options.device = std::atoi(argument + std::strlen("--tilekit_device="));
      continue;
    }
    if (bool_flag_is_set(argument, "--tilekit_skip_ceilings")) {
      options.measure_ceilings = false;
      continue;
    }
    if (bool_flag_is_set(argument, "--benchmark_list_tests")) options.list_only = true;
    if (std::strcmp(argument, "--help") == 0 || std::strcmp(argument, "-h") == 0) options.show_help = true;
    argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
  return options;
}

inline bool gpu_required() { return gpu_required_by_environment(); }  // core/device.cuh

inline void add_context(const std::string& key, const std::string& value) {
  benchmark::AddCustomContext(key, value);
}

inline void print_device_and_ceilings(const main_options& options) {
  const device_info info = query_device(options.device);
  auto attribute = [&](cudaDeviceAttr which) {
    int value = 0;
    TILEKIT_CHECK_CUDA(cudaDeviceGetAttribute(&value, which, options.device));
    return value;
  };
  constexpr double khz_per_mhz = 1e3;
  constexpr double hz_per_khz = 1e3;
  constexpr double bits_per_byte = 8;
  constexpr double transfers_per_clock = 2;  // HBM moves data on both clock edges
  const int memory_clock_khz = attribute(cudaDevAttrMemoryClockRate);
  const int memory_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth);
  const double nominal_hbm_gbps =
      transfers_per_clock * memory_clock_khz * hz_per_khz * (memory_bus_bits / bits_per_byte) / bytes_per_gb;

  std::printf("tilekit bench: device %d: %s (sm_%d%d), %d SMs, SM clock %.0f MHz (max), memory clock %.0f MHz, "
              "%d-bit bus (nominal %.0f GB/s), L2 %.1f MiB\n",
              options.device, info.name.c_str(), info.cc_major, info.cc_minor, info.sm_count,
              info.clock_khz / khz_per_mhz, memory_clock_khz / khz_per_mhz, memory_bus_bits, nominal_hbm_gbps,
              double(info.l2_bytes) / double(mebibyte));
  add_context("tilekit_device", info.name);
  add_context("tilekit_sm_count", std::to_string(info.sm_count));
  add_context("tilekit_sm_clock_mhz", std::to_string(info.clock_khz / 1000));
  add_context("tilekit_memory_clock_mhz", std::to_string(memory_clock_khz / 1000));
  add_context("tilekit_l2_bytes", std::to_string(info.l2_bytes));

  if (!options.measure_ceilings) {
    std::printf("tilekit bench: ceilings not measured up front (--tilekit_skip_ceilings)\n");
    std::fflush(stdout);
    return;
  }
  const double copy_gbps = measure_copy_bandwidth();
  const double gemm_tflops = measure_cublas_bf16_gemm(reference_gemm_size, reference_gemm_size, reference_gemm_size);
  std::printf("tilekit bench: ceilings (this run): D2D copy %.0f GB/s (%.0f%% of nominal), cuBLAS bf16 GEMM %d^3 "
              "%.1f TFLOP/s\n",
              copy_gbps, 100.0 * copy_gbps / nominal_hbm_gbps, reference_gemm_size, gemm_tflops);
  std::fflush(stdout);
  add_context("tilekit_copy_GBps", std::to_string(copy_gbps));
  add_context("tilekit_cublas_bf16_gemm_8192_TFLOPs", std::to_string(gemm_tflops));
}
}  // namespace detail

inline int run_main(int argc, char** argv) {
  std::vector<char*> arguments(argv, argv + argc);
  arguments.push_back(nullptr);
  main_options options = detail::parse_arguments(argc, arguments.data());
  if (options.show_help)
    std::printf("tilekit flags:\n  --tilekit_device=N       benchmark on device N (default 0)\n"
                "  --tilekit_skip_ceilings  do not measure the ceilings before the benchmarks\n"
                "Google Benchmark flags:\n");
  benchmark::Initialize(&argc, arguments.data());
  if (benchmark::ReportUnrecognizedArguments(argc, arguments.data())) return 1;

  try {
    if (options.list_only) {  // lists the registered benchmarks; runs nothing
      benchmark::RunSpecifiedBenchmarks();
      benchmark::Shutdown();
      return 0;
    }
    const std::string reason = hopper_unavailable_reason(options.device);  // core/device.cuh
    if (!reason.empty()) {
      if (detail::gpu_required()) {
        std::fprintf(stderr, "tilekit bench: TILEKIT_REQUIRE_GPU=1 but %s\n", reason.c_str());
        return 1;
      }
      std::printf("tilekit bench: no sm_90 GPU, skipping the benchmarks: %s\n", reason.c_str());
      return 0;
    }
    TILEKIT_CHECK_CUDA(cudaSetDevice(options.device));
    detail::print_device_and_ceilings(options);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& failure) {
    std::fflush(stdout);
    std::fprintf(stderr, "tilekit bench: aborted: %s\n", failure.what());
    return 1;
  }
  return 0;
}

}  // namespace tilekit::bench

#define TILEKIT_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return ::tilekit::bench::run_main(argc, argv); }
