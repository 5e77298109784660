// A single-kernel driver for profiling (ncu) and quick A/Bs of the softmax forward: bf16,
// dense rows of N columns, M = 2^28 / N rows, for each N on the command line. For each shape it
// times 10 launches after 3 warm-up ones (cudaEvent), prints GB/s of minimal traffic (read x,
// write y: 4 bytes per element), and checks six rows (first four, middle, last) against an fp64
// softmax on the CPU. Unlike bench/bench_softmax (Google Benchmark, L2 flush, rotating inputs,
// the copy ceiling), it launches one kernel on one buffer, so that
//   ncu --clock-control none -k regex:row_kernel -c 1 --launch-skip 3 profile_softmax 16383
// profiles exactly one launch, and two builds (e.g. main and a branch, copied to the GPU
// machine) can run side by side in one call: docs/performance_log.md, "Shifted kernels: where the
// instructions go". Odd N (not a multiple of 8) take the shifted stream.
//
//   profile_softmax 1023 4095 16383 16384 50257 262143
//
// Exit status 1 on a CUDA error or a relative error above 1e-2 (bf16 output: ~4e-3 expected).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "harness/cuda_resources.cuh"
#include "softmax/softmax.h"
#include "tilekit/core/error.cuh"

namespace {

// Worst relative error of row r of y against softmax(x) in fp64.
double row_error(const std::vector<__nv_bfloat16>& x, const std::vector<__nv_bfloat16>& y, int64_t r, int64_t n) {
  double max = -INFINITY, sum = 0;
  for (int64_t c = 0; c < n; ++c) max = std::fmax(max, double(__bfloat162float(x[size_t(r * n + c)])));
  for (int64_t c = 0; c < n; ++c) sum += std::exp(double(__bfloat162float(x[size_t(r * n + c)])) - max);
  double worst = 0;
  for (int64_t c = 0; c < n; ++c) {
    const double want = std::exp(double(__bfloat162float(x[size_t(r * n + c)])) - max) / sum;
    const double have = double(__bfloat162float(y[size_t(r * n + c)]));
    worst = std::fmax(worst, std::fabs(have - want) / want);
  }
  return worst;
}

// Times and checks one width; false if the check fails (CUDA errors throw tilekit::cuda_error).
bool run(int64_t n) {
  namespace tb = tilekit::bench;
  const int64_t m = std::max<int64_t>(1, (int64_t(1) << 28) / n);
  std::vector<__nv_bfloat16> x(size_t(m * n)), y(x.size());
  unsigned s = 12345;  // values in [-2.5, 2.5): exponentials within a factor e^5 of each other
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = __float2bfloat16(float((s >> 8) % 2000) / 400.f - 2.5f);
  }
  const tb::device_array<__nv_bfloat16> x_device(x.size()), y_device(x.size());
  TILEKIT_CHECK_CUDA(cudaMemcpy(x_device.data(), x.data(), x_device.bytes(), cudaMemcpyHostToDevice));
  const tilekit::kernels::softmax_forward_args args{
      .y = y_device.data(), .x = x_device.data(), .rows = m, .cols = n, .x_row_stride = n, .y_row_stride = n};
  for (int i = 0; i < 3; ++i) tilekit::kernels::softmax_forward(args, nullptr);
  const tb::cuda_event start, stop;
  start.record(nullptr);
  constexpr int launches = 10;
  for (int i = 0; i < launches; ++i) tilekit::kernels::softmax_forward(args, nullptr);
  stop.record(nullptr);
  const double seconds = tb::elapsed_seconds(start, stop);
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaMemcpy(y.data(), y_device.data(), y_device.bytes(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t r : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), m / 2, m - 1})
    if (r < m) worst = std::fmax(worst, row_error(x, y, r, n));
  const double gbps = 4.0 * double(m) * double(n) * launches / (seconds * 1e9);
  std::printf("N=%lld: %.1f GB/s, worst relative error %.2e\n", static_cast<long long>(n), gbps, worst);
  return worst <= 1e-2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s N [N ...]   (1 <= N <= %lld)\n", argv[0],
                 static_cast<long long>(tilekit::kernels::softmax_max_cols));
    return 2;
  }
  bool ok = true;
  for (int a = 1; a < argc; ++a) {
    const int64_t n = std::atoll(argv[a]);
    if (n < 1 || n > tilekit::kernels::softmax_max_cols) {
      std::fprintf(stderr, "N = %s: out of range\n", argv[a]);
      return 2;
    }
    try {
      ok = run(n) && ok;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  }
  return ok ? 0 : 1;
}
