#pragma once
// Shared machinery of the wgmma GPU tests (test_wgmma.cu, test_wgmma_register_fp8.cu).
//
// mma_case<Form, Kind, ASource, TA, TB, N, K> describes one test case:
//   Form     AB / ABt / AtB / AtBt (which tiles are stored transposed)
//   Kind     mma (accumulate onto the random initial accumulator) or mm (overwrite)
//   ASource  A from shared memory or from registers (rt<T, 16, K> per warp)
// run_case<Case>() makes random inputs, runs mma_kernel<Case> on one
// warpgroup, and compares with an fp64 CPU reference.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <type_traits>
#include <vector>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/warpgroup/mma.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/shared.cuh"
#include "tilekit/tiles/st.cuh"

namespace wgmma_test {

using namespace tilekit;
namespace tkt = tilekit::testing;

enum class op_form { AB, ABt, AtB, AtBt };
enum class op_kind { mma, mm };  // accumulate / overwrite
enum class a_source { shared, registers };

inline constexpr int m_rows = warpgroup::wgmma_m;                  // 64 rows of A and C
inline constexpr int warp_rows = m_rows / warpgroup_warps;          // 16 rows per warp

// Tolerances on ||out - ref|| / ||ref||. The products of bf16/fp16/fp8 inputs
// are exact in fp32 (at most 2 x 11 significant bits), so the only error is
// the fp32 accumulation over K <= 256 terms: well below 2^-24 * K ~ 1.5e-5
// per element in the worst case, ~1e-7 typically.
inline constexpr double fp32_accumulation_tolerance = 1e-5;
// fp8 wgmma accumulates with a reduced internal precision (about 14 mantissa
// bits, DeepSeek-V3 technical report section 3.3.2), so allow 2^-10.
inline constexpr double fp8_accumulation_tolerance = 1e-3;

template <op_form Form, op_kind Kind, a_source ASource, class TA, class TB, int N, int K>
struct mma_case {
  using a_type = TA;
  using b_type = TB;
  static constexpr op_form form = Form;
  static constexpr op_kind kind = Kind;
  static constexpr a_source source = ASource;
  static constexpr int n = N;
  static constexpr int k = K;
  static constexpr bool a_transposed = Form == op_form::AtB || Form == op_form::AtBt;
  static constexpr bool b_transposed = Form == op_form::ABt || Form == op_form::AtBt;
  // A^T forms store A as K x 64; B^T forms store B as N x K.
  using a_tile = std::conditional_t<a_transposed, st<TA, K, m_rows>, st<TA, m_rows, K>>;
  using b_tile = std::conditional_t<b_transposed, st<TB, N, K>, st<TB, K, N>>;
  using accumulator = rt<float, warp_rows, N>;
  using a_registers = rt<TA, warp_rows, K>;
  struct storage {
    a_tile a;
    b_tile b;
  };
  static constexpr double tolerance =
      is_fp8<TA> || is_fp8<TB> ? fp8_accumulation_tolerance : fp32_accumulation_tolerance;
};

// wgmma reads shared memory through the async proxy: order this thread's
// ordinary stores before it (HOPPER_NOTES 1.10); a barrier must follow.
__device__ inline void fence_shared_for_wgmma() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Logical A (m_rows x K) and B (K x N), row-major in global memory, into the
// case's shared tiles (transposed where the form says so), element by element.
template <class Case>
__device__ void fill_shared(typename Case::storage& s, const typename Case::a_type* a,
                            const typename Case::b_type* b, bool fill_a) {
  constexpr int K = Case::k, N = Case::n;
  if (fill_a) {
    for (int i = threadIdx.x; i < m_rows * K; i += blockDim.x) {
      const int row = i / K, col = i % K;
      if constexpr (Case::a_transposed) s.a(col, row) = a[i];
      else s.a(row, col) = a[i];
    }
  }
  for (int i = threadIdx.x; i < K * N; i += blockDim.x) {
    const int row = i / N, col = i % N;
    if constexpr (Case::b_transposed) s.b(col, row) = b[i];
    else s.b(row, col) = b[i];
  }
  fence_shared_for_wgmma();
  __syncthreads();
}

template <op_form Form, op_kind Kind, class Acc, class A, class B>
__device__ void run_op(Acc& acc, const A& a, const B& b) {
  constexpr bool accumulate = Kind == op_kind::mma;
  if constexpr (Form == op_form::AB) {
    if constexpr (accumulate) warpgroup::mma_AB(acc, a, b);
    else warpgroup::mm_AB(acc, a, b);
  } else if constexpr (Form == op_form::ABt) {
    if constexpr (accumulate) warpgroup::mma_ABt(acc, a, b);
    else warpgroup::mm_ABt(acc, a, b);
  } else if constexpr (Form == op_form::AtB) {
    if constexpr (accumulate) warpgroup::mma_AtB(acc, a, b);
    else warpgroup::mm_AtB(acc, a, b);
  } else {
    if constexpr (accumulate) warpgroup::mma_AtBt(acc, a, b);
    else warpgroup::mm_AtBt(acc, a, b);
  }
}

// One warpgroup: out (64 x N, row-major) = [C0 +] op(A, B).
template <class Case>
__global__ void __launch_bounds__(warpgroup_threads)
    mma_kernel(const typename Case::a_type* a, const typename Case::b_type* b, const float* c0, float* out) {
  auto& s = shared_storage<typename Case::storage>();
  constexpr bool registers_a = Case::source == a_source::registers;
  fill_shared<Case>(s, a, b, /*fill_a=*/!registers_a);
  const int row0 = warp_rows * warp_in_warpgroup();
  typename Case::accumulator acc;
  tkt::reference_load(acc, c0, Case::n, row0);  // random: mm_* must ignore it
  if constexpr (registers_a) {
    typename Case::a_registers a_regs;
    tkt::reference_load(a_regs, a, Case::k, row0);
    warpgroup::mma_fence(acc, a_regs);
    run_op<Case::form, Case::kind>(acc, a_regs, s.b);
  } else {
    warpgroup::mma_fence(acc);
    run_op<Case::form, Case::kind>(acc, s.a, s.b);
  }
  warpgroup::mma_commit_group();
  warpgroup::mma_async_wait(acc);
  tkt::reference_store(out, Case::n, acc, row0);
}

// ref (rows x cols) = [c0 +] a (rows x inner) * b (inner x cols), all row-major, in fp64.
template <class TA, class TB>
std::vector<double> reference_product(const std::vector<TA>& a, const std::vector<TB>& b, const std::vector<float>* c0,
                                      int rows, int inner, int cols) {
  std::vector<double> ref(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      double sum = c0 ? double((*c0)[size_t(r) * cols + c]) : 0.0;
      for (int i = 0; i < inner; ++i) sum += tkt::to_double(a[size_t(r) * inner + i]) * tkt::to_double(b[size_t(i) * cols + c]);
      ref[size_t(r) * cols + c] = sum;
    }
  return ref;
}

// Opt in to more than 48 KiB of dynamic shared memory when a case needs it.
template <class Kernel>
void set_shared_bytes(Kernel kernel, size_t bytes) {
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <class Case>
void run_case() {
  using TA = typename Case::a_type;
  using TB = typename Case::b_type;
  constexpr int N = Case::n, K = Case::k;
  std::mt19937_64 rng(tkt::test_seed());
  const auto a = tkt::random_vector<TA>(size_t(m_rows) * K, rng);
  const auto b = tkt::random_vector<TB>(size_t(K) * N, rng);
  const auto c0 = tkt::random_vector<float>(size_t(m_rows) * N, rng);
  const auto ref = reference_product(a, b, Case::kind == op_kind::mma ? &c0 : nullptr, m_rows, K, N);

  tkt::device_buffer<TA> a_dev(a);
  tkt::device_buffer<TB> b_dev(b);
  tkt::device_buffer<float> c0_dev(c0);
  tkt::device_buffer<float> out_dev(size_t(m_rows) * N);  // poisoned
  constexpr size_t shared_bytes = shared_storage_bytes<typename Case::storage>;
  set_shared_bytes(mma_kernel<Case>, shared_bytes);
  mma_kernel<Case><<<1, warpgroup_threads, shared_bytes>>>(a_dev.get(), b_dev.get(), c0_dev.get(), out_dev.get());
  TILEKIT_CHECK_LAUNCH("mma_kernel");
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  TILEKIT_EXPECT_CLOSE(out_dev.download(), ref, Case::tolerance);
}

}  // namespace wgmma_test
