// GPU tests of warpgroup wgmma (ops/warpgroup/mma.cuh) with A and B in shared
// memory, bf16 and fp16: every transpose form (AB, ABt, AtB, AtBt), the
// accumulating (mma_*) and overwriting (mm_*) flavours, several N (including
// odd multiples of 16 and N = 256) and K (one K-step, one 128-byte panel, and
// panel crossing). Register-A, fp8 and the accumulator -> register-A chain are
// in test_wgmma_register_fp8.cu (split for compile time).
//
// Each case: random logical A (64 x K) and B (K x N) in global memory are
// stored element by element into swizzled shared tiles through st::operator()
// (transposed into st<T, K, 64> / st<T, N, K> for the At / Bt forms), one
// warpgroup runs the op on an accumulator preloaded with random values, and
// every warp writes its 16 rows with the reference register I/O. The fp64 CPU
// reference is C0 + A*B for mma_* and A*B for mm_*.
#include "wgmma_test_common.cuh"

namespace {

using namespace wgmma_test;
using tilekit::bf16;
using tilekit::fp16;

class Wgmma : public tilekit::testing::GpuTest {};

#define WGMMA_SHARED_TEST(FORM, ACCUMULATE, T, N, K)                                           \
  TEST_F(Wgmma, FORM##_##T##_##ACCUMULATE##_N##N##_K##K) {                                     \
    run_case<mma_case<op_form::FORM, op_kind::ACCUMULATE, a_source::shared, T, T, N, K>>();    \
  }

// A*B^T: A = st<T, 64, K>, B = st<T, N, K> (both K-major).
WGMMA_SHARED_TEST(ABt, mma, bf16, 64, 64)
WGMMA_SHARED_TEST(ABt, mm, bf16, 256, 128)  // panel crossing in A and B, widest N
WGMMA_SHARED_TEST(ABt, mma, fp16, 80, 16)   // odd multiple of 16, one K-step (32-byte swizzle)
WGMMA_SHARED_TEST(ABt, mm, fp16, 128, 32)   // 64-byte swizzle

// A*B: A = st<T, 64, K>, B = st<T, K, N> (MN-major).
WGMMA_SHARED_TEST(AB, mma, bf16, 128, 128)  // B: two 128-byte panels along N (LBO)
WGMMA_SHARED_TEST(AB, mm, bf16, 48, 64)     // B: 96-byte rows = three 32-byte panels
WGMMA_SHARED_TEST(AB, mma, fp16, 256, 32)   // B: four 128-byte panels
WGMMA_SHARED_TEST(AB, mm, fp16, 16, 16)     // smallest: one instruction, 32-byte swizzle

// A^T*B: A = st<T, K, 64> (MN-major), B = st<T, K, N>.
WGMMA_SHARED_TEST(AtB, mma, bf16, 64, 128)
WGMMA_SHARED_TEST(AtB, mm, bf16, 256, 64)
WGMMA_SHARED_TEST(AtB, mm, fp16, 96, 16)    // B: 192-byte rows = three 64-byte panels

// A^T*B^T: A = st<T, K, 64>, B = st<T, N, K>.
WGMMA_SHARED_TEST(AtBt, mm, bf16, 16, 64)
WGMMA_SHARED_TEST(AtBt, mma, bf16, 256, 16)
WGMMA_SHARED_TEST(AtBt, mma, fp16, 208, 128)  // odd multiple of 16, panel crossing in B

#undef WGMMA_SHARED_TEST

}  // namespace
