// GPU tests of the warp-scope mma.sync GEMMs (ops/warp/mma.cuh): all four
// transpose variants, accumulating (mma_*) and overwriting (mm_*), bf16 and
// fp16 inputs, three shapes. A, A^T, B, B^T and C are loaded from row-major
// host matrices with the reference per-element I/O; the result is compared
// with an fp64 CPU GEMM of the same (rounded) inputs.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "tilekit/ops/warp/register_ops.cuh"

using namespace tilekit;
namespace tkt = tilekit::testing;
using tkt::device_buffer;

namespace {

enum class variant { AB, ABt, AtB, AtBt };
const char* variant_name(variant v) {
  switch (v) {
    case variant::AB: return "AB";
    case variant::ABt: return "ABt";
    case variant::AtB: return "AtB";
    case variant::AtBt: return "AtBt";
  }
  return "?";
}

// a: M x K, at: K x M, b: K x N, bt: N x K, c / out: M x N, all row-major.
template <class T, int M, int N, int K>
__global__ void mma_kernel(const float* a, const float* at, const float* b, const float* bt, const float* c,
                           float* out, variant v, bool accumulate) {
  rt<float, M, N, layout::row> acc;
  if (accumulate) tkt::reference_load(acc, c, N);
  rt<T, M, K, layout::row> a_row;
  rt<T, K, M, layout::col> at_col;
  rt<T, K, N, layout::col> b_col;
  rt<T, N, K, layout::row> bt_row;
  switch (v) {
    case variant::AB:
      tkt::reference_load(a_row, a, K);
      tkt::reference_load(b_col, b, N);
      if (accumulate) warp::mma_AB(acc, a_row, b_col);
      else warp::mm_AB(acc, a_row, b_col);
      break;
    case variant::ABt:
      tkt::reference_load(a_row, a, K);
      tkt::reference_load(bt_row, bt, K);
      if (accumulate) warp::mma_ABt(acc, a_row, bt_row);
      else warp::mm_ABt(acc, a_row, bt_row);
      break;
    case variant::AtB:
      tkt::reference_load(at_col, at, M);
      tkt::reference_load(b_col, b, N);
      if (accumulate) warp::mma_AtB(acc, at_col, b_col);
      else warp::mm_AtB(acc, at_col, b_col);
      break;
    case variant::AtBt:
      tkt::reference_load(at_col, at, M);
      tkt::reference_load(bt_row, bt, K);
      if (accumulate) warp::mma_AtBt(acc, at_col, bt_row);
      else warp::mm_AtBt(acc, at_col, bt_row);
      break;
  }
  tkt::reference_store(out, N, acc);
}

std::vector<float> transposed(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> t(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

template <class T, int M, int N, int K>
void check_mma() {
  std::mt19937_64 rng(tkt::test_seed());
  auto rounded = [&](size_t n) {
    std::vector<float> v = tkt::random_vector<float>(n, rng, -1.f, 1.f);
    for (auto& x : v) x = convert<float>(convert<T>(x));
    return v;
  };
  const std::vector<float> a = rounded(M * K), b = rounded(K * N);
  const std::vector<float> c = tkt::random_vector<float>(M * N, rng, -1.f, 1.f);
  device_buffer<float> a_dev(a), at_dev(transposed(a, M, K)), b_dev(b), bt_dev(transposed(b, K, N)), c_dev(c);
  device_buffer<float> out_dev(M * N);

  for (bool accumulate : {true, false}) {
    std::vector<double> ref(M * N);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double s = accumulate ? c[m * N + n] : 0.0;
        for (int k = 0; k < K; ++k) s += double(a[m * K + k]) * double(b[k * N + n]);
        ref[m * N + n] = s;
      }
    for (variant v : {variant::AB, variant::ABt, variant::AtB, variant::AtBt}) {
      SCOPED_TRACE(::testing::Message() << (accumulate ? "mma_" : "mm_") << variant_name(v) << " "
                                        << dtype_traits<T>::name << " M=" << M << " N=" << N << " K=" << K);
      out_dev.poison();
      mma_kernel<T, M, N, K><<<1, warp_threads>>>(a_dev.get(), at_dev.get(), b_dev.get(), bt_dev.get(), c_dev.get(),
                                                  out_dev.get(), v, accumulate);
      TILEKIT_CHECK_CUDA(cudaGetLastError());
      TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
      // The inputs are exact in T and their products exact in fp32; the tensor
      // core accumulates in (at least) fp32, so the error is a few fp32 ulps
      // per term: 1e-4 relative covers K <= 64 with margin, while any layout
      // or indexing error is O(1).
      TILEKIT_EXPECT_CLOSE(out_dev.download(), ref, 1e-4);
    }
  }
}

class WarpMma : public tkt::GpuTest {};

TEST_F(WarpMma, Bf16_16x16x16) { check_mma<bf16, 16, 16, 16>(); }
TEST_F(WarpMma, Bf16_32x64x48) { check_mma<bf16, 32, 64, 48>(); }
TEST_F(WarpMma, Bf16_64x32x32) { check_mma<bf16, 64, 32, 32>(); }
TEST_F(WarpMma, Fp16_16x16x16) { check_mma<fp16, 16, 16, 16>(); }
TEST_F(WarpMma, Fp16_32x64x48) { check_mma<fp16, 32, 64, 48>(); }
TEST_F(WarpMma, Fp16_64x32x32) { check_mma<fp16, 64, 32, 32>(); }

}  // namespace
