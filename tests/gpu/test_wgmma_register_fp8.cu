// GPU tests of warpgroup wgmma (ops/warpgroup/mma.cuh), second part:
//   * A from registers (each warp's rt<bf16|fp16, 16, K>), B from shared
//     memory, for mma_AB / mma_ABt and mm_AB / mm_ABt;
//   * fp8 e4m3 / e5m2 (and mixed) mma_ABt / mm_ABt with A and B in shared memory;
//   * the attention-style chain: wgmma -> warp::copy of the fp32 accumulator to
//     a 16-bit register tile -> that tile as the register A of a second wgmma.
// test_wgmma.cu explains the method (random inputs, element-wise swizzled
// shared stores, poisoned outputs, fp64 reference).
#include "tilekit/ops/warp/conversions.cuh"
#include "wgmma_test_common.cuh"

namespace {

using namespace wgmma_test;
using tilekit::bf16;
using tilekit::fp16;
using tilekit::fp8e4m3;
using tilekit::fp8e5m2;

class Wgmma : public tilekit::testing::GpuTest {};

// ---- register A -----------------------------------------------------------------

#define WGMMA_REGISTER_TEST(FORM, ACCUMULATE, T, N, K)                                              \
  TEST_F(Wgmma, FORM##_##T##_##ACCUMULATE##_register_a_N##N##_K##K) {                               \
    run_case<mma_case<op_form::FORM, op_kind::ACCUMULATE, a_source::registers, T, T, N, K>>();      \
  }

WGMMA_REGISTER_TEST(AB, mma, bf16, 64, 64)
WGMMA_REGISTER_TEST(AB, mm, fp16, 112, 128)  // B: 224-byte rows = seven 32-byte panels
WGMMA_REGISTER_TEST(ABt, mm, bf16, 256, 128)
WGMMA_REGISTER_TEST(ABt, mma, fp16, 32, 16)

#undef WGMMA_REGISTER_TEST

// ---- fp8 (K-major A and B only) ---------------------------------------------------

#define WGMMA_FP8_TEST(ACCUMULATE, TA, TB, N, K)                                                    \
  TEST_F(Wgmma, ABt_##TA##_##TB##_##ACCUMULATE##_N##N##_K##K) {                                     \
    run_case<mma_case<op_form::ABt, op_kind::ACCUMULATE, a_source::shared, TA, TB, N, K>>();        \
  }

WGMMA_FP8_TEST(mma, fp8e4m3, fp8e4m3, 256, 128)  // 128-byte rows, 4 K-steps of 32
WGMMA_FP8_TEST(mm, fp8e4m3, fp8e4m3, 64, 64)     // 64-byte swizzle
WGMMA_FP8_TEST(mma, fp8e5m2, fp8e5m2, 128, 32)   // one K-step, 32-byte swizzle
WGMMA_FP8_TEST(mm, fp8e4m3, fp8e5m2, 16, 256)    // mixed types, panel crossing

#undef WGMMA_FP8_TEST

// ---- chain: accumulator -> 16-bit register A -> second wgmma ----------------------
//
// P = A1 (64 x K1) * B1 (K1 x N1)   with mm_ABt from shared tiles (B1 stored N1 x K1)
// C = round_T(P) (64 x N1) * B2 (N1 x N2)   with register A = warp::copy(P),
//     B2 stored N1 x N2 (SecondForm AB) or N2 x N1 (SecondForm ABt).
template <class T, int K1, int N1, int N2, op_form SecondForm>
struct chain_case {
  static_assert(SecondForm == op_form::AB || SecondForm == op_form::ABt, "register A is K-major: AB or ABt");
  using element = T;
  static constexpr op_form second_form = SecondForm;
  static constexpr int k1 = K1, n1 = N1, n2 = N2;
  static constexpr bool b2_transposed = SecondForm == op_form::ABt;
  using b2_tile = std::conditional_t<b2_transposed, st<T, N2, N1>, st<T, N1, N2>>;
  struct storage {
    st<T, m_rows, K1> a1;
    st<T, N1, K1> b1;
    b2_tile b2;
  };
};

template <class Case>
__global__ void __launch_bounds__(warpgroup_threads)
    chain_kernel(const typename Case::element* a1, const typename Case::element* b1,
                 const typename Case::element* b2, float* out) {
  using T = typename Case::element;
  constexpr int K1 = Case::k1, N1 = Case::n1, N2 = Case::n2;
  auto& s = shared_storage<typename Case::storage>();
  for (int i = threadIdx.x; i < m_rows * K1; i += blockDim.x) s.a1(i / K1, i % K1) = a1[i];
  for (int i = threadIdx.x; i < K1 * N1; i += blockDim.x) s.b1(i % N1, i / N1) = b1[i];  // stored transposed
  for (int i = threadIdx.x; i < N1 * N2; i += blockDim.x) {
    const int row = i / N2, col = i % N2;
    if constexpr (Case::b2_transposed) s.b2(col, row) = b2[i];
    else s.b2(row, col) = b2[i];
  }
  fence_shared_for_wgmma();
  __syncthreads();

  rt<float, warp_rows, N1> p;
  warpgroup::mma_fence(p);
  warpgroup::mm_ABt(p, s.a1, s.b1);
  warpgroup::mma_commit_group();
  warpgroup::mma_async_wait(p);

  rt<T, warp_rows, N1> p_registers;
  warp::copy(p_registers, p);  // fp32 accumulator -> 16-bit A operand, no shuffles
  rt<float, warp_rows, N2> c;
  warpgroup::mma_fence(c, p_registers);  // the registers of p_registers were just written
  if constexpr (Case::second_form == op_form::AB) warpgroup::mm_AB(c, p_registers, s.b2);
  else warpgroup::mm_ABt(c, p_registers, s.b2);
  warpgroup::mma_commit_group();
  warpgroup::mma_async_wait(c);
  tkt::reference_store(out, N2, c, warp_rows * warp_in_warpgroup());
}

template <class Case>
void run_chain() {
  using T = typename Case::element;
  constexpr int K1 = Case::k1, N1 = Case::n1, N2 = Case::n2;
  std::mt19937_64 rng(tkt::test_seed());
  const auto a1 = tkt::random_vector<T>(size_t(m_rows) * K1, rng);
  const auto b1 = tkt::random_vector<T>(size_t(K1) * N1, rng);
  const auto b2 = tkt::random_vector<T>(size_t(N1) * N2, rng);
  // P rounded to T as the kernel does (fp32 first, then T; the fp64 -> fp32
  // step differs from the GPU's fp32 sum only in rare last-bit cases).
  const auto p_exact = reference_product(a1, b1, nullptr, m_rows, K1, N1);
  std::vector<T> p(p_exact.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = convert<T>(float(p_exact[i]));
  const auto ref = reference_product(p, b2, nullptr, m_rows, N1, N2);

  tkt::device_buffer<T> a1_dev(a1), b1_dev(b1), b2_dev(b2);
  tkt::device_buffer<float> out_dev(size_t(m_rows) * N2);  // poisoned
  constexpr size_t shared_bytes = shared_storage_bytes<typename Case::storage>;
  set_shared_bytes(chain_kernel<Case>, shared_bytes);
  chain_kernel<Case><<<1, warpgroup_threads, shared_bytes>>>(a1_dev.get(), b1_dev.get(), b2_dev.get(), out_dev.get());
  TILEKIT_CHECK_LAUNCH("chain_kernel");
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  // A P element whose fp32 value sits next to a rounding boundary of T may
  // round differently on the GPU: one ulp of T (2^-8 for bf16) in one of
  // N1 terms; allow that on top of the fp32 accumulation error.
  constexpr double chain_tolerance = 1e-4;
  TILEKIT_EXPECT_CLOSE(out_dev.download(), ref, chain_tolerance);
}

TEST_F(Wgmma, Chain_bf16_ABt_then_register_AB) { run_chain<chain_case<bf16, 64, 64, 128, op_form::AB>>(); }
TEST_F(Wgmma, Chain_fp16_ABt_then_register_ABt) { run_chain<chain_case<fp16, 32, 128, 48, op_form::ABt>>(); }

}  // namespace
