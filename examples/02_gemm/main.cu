// examples/02_gemm: runs the tilekit GEMM (gemm.cuh) on several shapes,
// including ones that are not multiples of the tile, checks every output
// element against a straightforward fp32 GPU reference, and prints the rate.
#include <cstdio>
#include <string>
#include <random>
#include <vector>

#include "gemm.cuh"

namespace {

using namespace tilekit;

// Reference: one thread per output element, fp32 accumulation in a fixed order.
__global__ void reference_gemm(const bf16* a, const bf16* b, float* c, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
  if (col >= n) return;
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += float(a[size_t(row) * k + i]) * float(b[size_t(col) * k + i]);
  c[size_t(row) * n + col] = sum;
}

bool run_shape(int m, int n, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<bf16> a(size_t(m) * k), b(size_t(n) * k);
  for (auto& x : a) x = convert<bf16>(dist(rng));
  for (auto& x : b) x = convert<bf16>(dist(rng));
  bf16 *da, *db, *dc;
  float* dref;
  TILEKIT_CHECK_CUDA(cudaMalloc(&da, a.size() * sizeof(bf16)));
  TILEKIT_CHECK_CUDA(cudaMalloc(&db, b.size() * sizeof(bf16)));
  TILEKIT_CHECK_CUDA(cudaMalloc(&dc, size_t(m) * n * sizeof(bf16)));
  TILEKIT_CHECK_CUDA(cudaMalloc(&dref, size_t(m) * n * sizeof(float)));
  TILEKIT_CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  TILEKIT_CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  TILEKIT_CHECK_CUDA(cudaMemset(dc, 0xFF, size_t(m) * n * sizeof(bf16)));  // poison: NaN

  gemm_example::gemm({.a = da, .b = db, .c = dc, .m = m, .n = n, .k = k});
  reference_gemm<<<dim3(ceil_div(n, 128), m), 128>>>(da, db, dref, m, n, k);
  TILEKIT_CHECK_LAUNCH("reference_gemm");
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<bf16> c(size_t(m) * n);
  std::vector<float> ref(size_t(m) * n);
  TILEKIT_CHECK_CUDA(cudaMemcpy(c.data(), dc, c.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
  TILEKIT_CHECK_CUDA(cudaMemcpy(ref.data(), dref, ref.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double o = float(c[i]), r = ref[i];
    if (!std::isfinite(o)) ++bad;
    num += (o - r) * (o - r);
    den += r * r;
  }
  const double rel = std::sqrt(num / den);
  // bf16 output rounding dominates: relative error about 2^-9 per element.
  const bool ok = bad == 0 && rel < 1e-2;

  // Timing: a few warm-up runs, then the median-free mean of 10 (the benchmark
  // in bench/ does this properly; this is a sanity number).
  float ms = 0;
  if (size_t(m) * n * k >= (size_t(1) << 30)) {
    cudaEvent_t start, stop;
    TILEKIT_CHECK_CUDA(cudaEventCreate(&start));
    TILEKIT_CHECK_CUDA(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) gemm_example::gemm({.a = da, .b = db, .c = dc, .m = m, .n = n, .k = k});
    TILEKIT_CHECK_CUDA(cudaEventRecord(start));
    for (int i = 0; i < 10; ++i) gemm_example::gemm({.a = da, .b = db, .c = dc, .m = m, .n = n, .k = k});
    TILEKIT_CHECK_CUDA(cudaEventRecord(stop));
    TILEKIT_CHECK_CUDA(cudaEventSynchronize(stop));
    TILEKIT_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    ms /= 10;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  std::printf("  M=%5d N=%5d K=%5d  rel.err %.2e  %s", m, n, k, rel, ok ? "ok" : "WRONG");
  if (bad) std::printf(" (%zu non-finite outputs)", bad);
  if (ms > 0) std::printf("  %.3f ms  %.0f TFLOP/s", ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12);
  std::printf("\n");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dref);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // --quick: small shapes only (for compute-sanitizer runs).
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  if (const std::string reason = tilekit::hopper_unavailable_reason(0); !reason.empty()) {
    std::printf("02_gemm: SKIPPED - needs an sm_90 (Hopper) GPU: %s\n", reason.c_str());
    return tilekit::gpu_required_by_environment() ? 1 : 0;  // TILEKIT_REQUIRE_GPU=1: a missing GPU is an error
  }
  std::printf("02_gemm: C = A * B^T, bf16 in, fp32 accumulate, bf16 out (%s)\n", tilekit::query_device().name.c_str());
  std::mt19937 rng(2026);
  const int shapes[][3] = {{4096, 4096, 4096}, {1000, 1000, 1000}, {127, 300, 72},
                           {1, 8, 8}, {4096, 257, 520}, {300, 4096, 64}};
  bool all_ok = true;
  for (const auto& s : shapes)
    if (!quick || size_t(s[0]) * s[1] * s[2] < (size_t(1) << 30)) all_ok &= run_shape(s[0], s[1], s[2], rng);
  // The host API rejects what TMA cannot do, before launching anything.
  try {
    gemm_example::gemm({.a = nullptr, .b = nullptr, .c = nullptr, .m = 16, .n = 16, .k = 12});
    std::printf("  K = 12 was accepted: WRONG\n");
    all_ok = false;
  } catch (const tilekit::invalid_argument& e) {
    std::printf("  K = 12 rejected as expected: %s\n", e.what());
  }
  std::printf("02_gemm: %s\n", all_ok ? "PASS" : "FAIL");
  return all_ok ? 0 : 1;
}
