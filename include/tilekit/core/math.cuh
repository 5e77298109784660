#pragma once
// Numeric helpers: constants and the fast special functions the kernels use.
//
// Softmax-style kernels compute exp(x) as exp2(x * log2(e)) so that the scale
// folds into one FMA and the hardware ex2 unit (MUFU.EX2) does the rest.

#include <cmath>
#include <limits>

#include "tilekit/core/util.cuh"

namespace tilekit {

inline constexpr float log2e = 1.4426950408889634f;  // log2(e) = 1 / ln(2)
inline constexpr float ln2 = 0.6931471805599453f;    // ln(2)
inline constexpr float infinity = std::numeric_limits<float>::infinity();

#if defined(__CUDACC__)
// 2^x with the hardware approximation (max rel. error ~2^-22; -inf -> +0).
TILEKIT_DEVICE TILEKIT_INLINE float exp2_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}
// log2(x) with the hardware approximation.
TILEKIT_DEVICE TILEKIT_INLINE float log2_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::log2(x);
#endif
}
// e^x through exp2: one multiply and one MUFU.EX2.
TILEKIT_DEVICE TILEKIT_INLINE float exp_fast(float x) { return exp2_fast(x * log2e); }
// ln(x) through log2.
TILEKIT_DEVICE TILEKIT_INLINE float log_fast(float x) { return log2_fast(x) * ln2; }
// 1/x with the hardware approximation (rcp.approx, ~1 ulp).
TILEKIT_DEVICE TILEKIT_INLINE float rcp_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return 1.0f / x;
#endif
}
// 1/sqrt(x) with the hardware approximation.
TILEKIT_DEVICE TILEKIT_INLINE float rsqrt_fast(float x) {
#if defined(__CUDA_ARCH__)
  return rsqrtf(x);
#else
  return 1.0f / std::sqrt(x);
#endif
}
#endif  // __CUDACC__

}  // namespace tilekit
