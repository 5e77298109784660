// The ceilings every other benchmark compares to, as benchmarks of their own,
// plus self-checks of the harness.
//
//   copy_d2d/<MiB>            cudaMemcpyAsync device to device; GB/s counts read + write
//   cublas_bf16_gemm/m/n/k    cublasGemmEx bf16 -> fp32 accumulate -> bf16, L2 flushed; TFLOP/s
//   harness_write/<MiB>       a kernel that writes N bytes; GB/s, checked afterwards
//   harness_l2_read/<flush>   a 16 MiB read with and without the L2 flush: the
//                             flushed one must be slower (it comes from HBM)

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/harness.cuh"

namespace tb = tilekit::bench;

namespace {

// --- ceilings ----------------------------------------------------------------

void copy_d2d(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0)) * tb::mebibyte;
  tb::cuda_stream stream;
  tb::device_array<uint8_t> source(bytes), destination(bytes);
  constexpr int fill_byte = 0x3C;
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(source.data(), fill_byte, bytes, stream));
  // >= 256 MiB is >= 4x L2: the copy's own traffic evicts L2, no flush needed.
  tb::time_on_stream(state, stream, [&] {
    TILEKIT_CHECK_CUDA(cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  constexpr double bytes_moved_per_byte = 2;  // read + write
  tb::set_throughput(state, 0, bytes_moved_per_byte * double(bytes));
  tb::copy_ceiling_ratio(state);
}
TILEKIT_BENCHMARK(copy_d2d)->ArgName("MiB")->RangeMultiplier(4)->Range(256, 4096);

void cublas_bf16_gemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  tb::cuda_stream stream;
  tb::cublas_bf16_gemm gemm(m, n, k, stream);
  tb::time_on_stream(state, stream, [&] { gemm.run(); }, {.flush_l2 = true});
  tb::set_throughput(state, gemm.flops(), gemm.bytes());
  tb::cublas_ceiling_ratio(state, m, n, k);  // ~1: the same measurement, two ways
}
TILEKIT_BENCHMARK(cublas_bf16_gemm)
    ->ArgNames({"m", "n", "k"})
    ->Args({2048, 2048, 2048})
    ->Args({4096, 4096, 4096})
    ->Args({8192, 8192, 8192})
    ->Args({8192, 8192, 1024})   // short K: prologue/epilogue weigh more
    ->Args({64, 8192, 8192});    // 64 rows (decode-like): bandwidth-bound, read GB/s

// --- harness self-checks -----------------------------------------------------

// Writes `pattern` to every 16-byte word.
__global__ void write_words_kernel(uint4* words, size_t count, uint32_t pattern) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    words[i] = make_uint4(pattern, pattern + 1, pattern + 2, pattern + 3);
}

int blocks_for_bandwidth() {
  // 8 blocks of 512 threads per SM is two waves of full occupancy (2048 threads per SM):
  // enough loads in flight to saturate HBM, and the grid-stride loop covers any size.
  constexpr int blocks_per_sm = 8;
  return tilekit::query_device().sm_count * blocks_per_sm;
}
constexpr int bandwidth_threads = 512;

// Shows the timing and the counters work on a kernel whose bytes are known
// exactly, and that the kernel really ran: the written words are checked.
void harness_write(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0)) * tb::mebibyte;
  const size_t words = bytes / sizeof(uint4);
  tb::cuda_stream stream;
  tb::device_array<uint4> buffer(words);
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(buffer.data(), 0, buffer.bytes(), stream));
  const int blocks = blocks_for_bandwidth();
  constexpr uint32_t pattern = 0xC0FFEE00u;
  tb::time_on_stream(state, stream, [&] {
    write_words_kernel<<<blocks, bandwidth_threads, 0, stream>>>(buffer.data(), words, pattern);
  });
  tb::set_throughput(state, 0, double(bytes));
  tb::copy_ceiling_ratio(state);

  // The first and the last word must hold the pattern.
  uint4 first{}, last{};
  TILEKIT_CHECK_CUDA(cudaMemcpyAsync(&first, buffer.data(), sizeof(uint4), cudaMemcpyDeviceToHost, stream));
  TILEKIT_CHECK_CUDA(cudaMemcpyAsync(&last, buffer.data() + words - 1, sizeof(uint4), cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  const auto holds_pattern = [&](const uint4& w) {
    return w.x == pattern && w.y == pattern + 1 && w.z == pattern + 2 && w.w == pattern + 3;
  };
  if (!holds_pattern(first) || !holds_pattern(last)) state.SkipWithError("write_words_kernel did not write its buffer");
}
TILEKIT_BENCHMARK(harness_write)->ArgName("MiB")->Arg(64)->Arg(1024);

// A 16 MiB buffer fits in L2 (50-60 MiB): read back to back it comes from L2,
// after the flush from HBM. The two GB/s numbers show whether the flush works.
void harness_l2_read(benchmark::State& state) {
  constexpr size_t bytes = 16 * tb::mebibyte;
  const bool flush = state.range(0) != 0;
  const size_t words = bytes / sizeof(uint4);
  tb::cuda_stream stream;
  tb::device_array<uint4> buffer(words);
  tb::device_array<unsigned> sink(1);
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(buffer.data(), 0, buffer.bytes(), stream));
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(sink.data(), 0, sink.bytes(), stream));
  const int blocks = blocks_for_bandwidth();
  tb::timing_options options;
  options.flush_l2 = flush;
  tb::time_on_stream(state, stream, [&] {
    tb::l2_evict_kernel<<<blocks, bandwidth_threads, 0, stream>>>(buffer.data(), words, sink.data());
  }, options);
  tb::set_throughput(state, 0, double(bytes));
  tb::copy_ceiling_ratio(state);
}
TILEKIT_BENCHMARK(harness_l2_read)->ArgName("flush_l2")->Arg(0)->Arg(1);

}  // namespace

TILEKIT_BENCHMARK_MAIN()
