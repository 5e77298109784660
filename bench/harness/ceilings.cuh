#pragma once
// Ceilings measured in the same process as the benchmarks that compare to them:
//
//  * measure_copy_bandwidth(): device-to-device cudaMemcpyAsync of 2 GiB
//    (bytes read + bytes written), median of copy_ceiling_runs, in GB/s.
//    2 GiB is ~35x L2, so L2 plays no part and no flush is needed.
//  * measure_cublas_bf16_gemm(m, n, k): cublasGemmEx, bf16 inputs with values
//    uniform in [-1, 1), fp32 accumulation, bf16 output, in TFLOP/s (2*m*n*k
//    per GEMM), median of gemm_ceiling_runs, L2 flushed before each run as our
//    own GEMM benchmarks do.
//
// Each is measured once per process (per shape) and cached, so a benchmark
// can ask for its ceiling in every run at no cost. Same-run numbers matter:
// clocks, power limits and ECC differ between machines and days, and a ratio
// to a ceiling measured elsewhere says little.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "harness/cuda_resources.cuh"
#include "harness/random.cuh"
#include "harness/timer.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"

namespace tilekit::bench {

inline constexpr double flops_per_tflop = 1e12;
inline constexpr double bytes_per_gb = 1e9;
inline constexpr size_t mebibyte = size_t(1) << 20;
inline constexpr size_t gibibyte = size_t(1) << 30;

inline constexpr size_t copy_ceiling_bytes = 2 * gibibyte;
inline constexpr int copy_ceiling_runs = 10;
inline constexpr int gemm_ceiling_runs = 20;

// --- cuBLAS errors -----------------------------------------------------------

// "tilekit: cuBLAS error <n> (<name>: <description>)\n  in <expr> at <file>:<line>"
inline std::string format_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  return ::tilekit::detail::concat("tilekit: cuBLAS error ", static_cast<int>(status), " (", cublasGetStatusName(status), ": ",
                        cublasGetStatusString(status), ")\n  in ", expr, " at ", ::tilekit::detail::basename(file), ":", line);
}
inline void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw error(format_cublas_error(status, expr, file, line), file, line);
}
#define TILEKIT_CHECK_CUBLAS(expr) ::tilekit::bench::check_cublas((expr), #expr, __FILE__, __LINE__)

class cublas_handle {
 public:
  cublas_handle() { TILEKIT_CHECK_CUBLAS(cublasCreate(&handle_)); }
  ~cublas_handle() { (void)cublasDestroy(handle_); }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// --- the cuBLAS bf16 GEMM ----------------------------------------------------

// C[m][n] = A[m][k] * B[n][k]^T, all row-major bf16, fp32 accumulation: the
// "TN" problem (both operands K-contiguous) that tensor-core GEMMs, ours
// included, run at their best rate. cuBLAS is column-major, so it computes
// C^T (n x m, ld n) = op(B^T) * A^T with B^T transposed (CUBLAS_OP_T).
class cublas_bf16_gemm {
 public:
  cublas_bf16_gemm(int m, int n, int k, cudaStream_t stream, uint64_t seed = 1)
      : m_(m), n_(n), k_(k), stream_(stream), a_(size_t(m) * k), b_(size_t(n) * k), c_(size_t(m) * n) {
    TILEKIT_CHECK_ARG(m > 0 && n > 0 && k > 0, "GEMM sizes must be positive, got m=", m, " n=", n, " k=", k);
    TILEKIT_CHECK_CUBLAS(cublasSetStream(handle_.get(), stream_));
    fill_uniform(a_.data(), a_.size(), seed, stream_);
    fill_uniform(b_.data(), b_.size(), splitmix64(seed), stream_);
    TILEKIT_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

  // Enqueues one GEMM on the stream.
  void run() const {
    const float alpha = 1.f, beta = 0.f;
    TILEKIT_CHECK_CUBLAS(cublasGemmEx(handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, n_, m_, k_, &alpha,  //
                                      b_.data(), CUDA_R_16BF, k_,                                   //
                                      a_.data(), CUDA_R_16BF, k_, &beta,                            //
                                      c_.data(), CUDA_R_16BF, n_,                                   //
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  double flops() const { return 2.0 * double(m_) * double(n_) * double(k_); }
  // Minimal bytes: A and B read once, C written once.
  double bytes() const { return double(sizeof(bf16)) * (double(m_) * k_ + double(n_) * k_ + double(m_) * n_); }
  const bf16* c() const { return c_.data(); }

 private:
  int m_, n_, k_;
  cudaStream_t stream_;
  cublas_handle handle_;
  device_array<bf16> a_, b_, c_;
};

// --- measured once per process -----------------------------------------------

namespace detail {
// The ceilings are cached behind one lock: the benchmarks run on one thread,
// but a ceiling asked for twice must not be measured twice.
inline std::mutex& ceiling_mutex() {
  static std::mutex mutex;
  return mutex;
}
}  // namespace detail

// Device-to-device copy of `bytes`: GB/s counting bytes read + bytes written.
inline double measure_copy_bandwidth_uncached(size_t bytes, int runs) {
  cuda_stream stream;
  device_array<uint8_t> source(bytes), destination(bytes);
  constexpr int fill_byte = 0x5A;  // copy speed does not depend on the bytes, only on them being written once
  TILEKIT_CHECK_CUDA(cudaMemsetAsync(source.data(), fill_byte, bytes, stream));
  const timing t = time_runs(stream, runs, [&] {
    TILEKIT_CHECK_CUDA(cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  constexpr double bytes_moved_per_byte = 2;  // read once, written once
  return bytes_moved_per_byte * double(bytes) / bytes_per_gb / t.median_seconds;
}

// The copy ceiling in GB/s (2 GiB, or a quarter of the free memory per
// buffer on a smaller device), measured on the first call.
inline double measure_copy_bandwidth() {
  std::lock_guard<std::mutex> lock(detail::ceiling_mutex());
  static double cached = 0;
  if (cached == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    TILEKIT_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    constexpr size_t buffers_per_free_memory = 4;  // two buffers, leave half the memory to the benchmarks
    const size_t bytes = std::min(copy_ceiling_bytes, free_bytes / buffers_per_free_memory);
    cached = measure_copy_bandwidth_uncached(bytes, copy_ceiling_runs);
  }
  return cached;
}

// TFLOP/s of cublas_bf16_gemm(m, n, k), measured on the first call per shape.
inline double measure_cublas_bf16_gemm(int m, int n, int k) {
  std::lock_guard<std::mutex> lock(detail::ceiling_mutex());
  static std::map<std::tuple<int, int, int>, double> cached;
  const auto key = std::make_tuple(m, n, k);
  if (const auto it = cached.find(key); it != cached.end()) return it->second;
  cuda_stream stream;
  cublas_bf16_gemm gemm(m, n, k, stream);
  timing_options options;
  options.flush_l2 = true;
  const timing t = time_runs(stream, gemm_ceiling_runs, [&] { gemm.run(); }, options);
  const double tflops = gemm.flops() / flops_per_tflop / t.median_seconds;
  cached.emplace(key, tflops);
  return tflops;
}

}  // namespace tilekit::bench
