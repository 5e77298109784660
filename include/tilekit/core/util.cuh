#pragma once
// Compile-time helpers and the small set of macros every tilekit header uses.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TILEKIT_HOST_DEVICE __host__ __device__
#define TILEKIT_DEVICE __device__
#define TILEKIT_INLINE __forceinline__
#else
#define TILEKIT_HOST_DEVICE
#define TILEKIT_DEVICE
#define TILEKIT_INLINE inline
#endif

// True only in the sm_90a device pass: wgmma, setmaxnreg and TMA multicast
// exist only there (see HOPPER_NOTES 9.2). Code that uses them is compiled to
// a trap elsewhere so that a host pass or a plain sm_90 pass still builds.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEKIT_SM90A 1
#else
#define TILEKIT_SM90A 0
#endif

namespace tilekit {

inline constexpr int warp_threads = 32;
inline constexpr int warpgroup_warps = 4;
inline constexpr int warpgroup_threads = warp_threads * warpgroup_warps;

template <class T>
TILEKIT_HOST_DEVICE constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}
template <class T>
TILEKIT_HOST_DEVICE constexpr T round_up(T a, T b) {
  return ceil_div(a, b) * b;
}
template <class T>
TILEKIT_HOST_DEVICE constexpr bool is_pow2(T x) {
  return x > 0 && (x & (x - 1)) == 0;
}
TILEKIT_HOST_DEVICE constexpr int log2_floor(uint64_t x) {
  int r = -1;
  while (x) { x >>= 1; ++r; }
  return r;
}

// A value that depends on a template parameter, for static_assert(dependent_false<T>).
template <class...>
inline constexpr bool dependent_false = false;

#if defined(__CUDACC__)
TILEKIT_DEVICE TILEKIT_INLINE int laneid() { return threadIdx.x % warp_threads; }
TILEKIT_DEVICE TILEKIT_INLINE int warpid() { return threadIdx.x / warp_threads; }
// Index of this thread's warpgroup in the block, and of its warp inside the warpgroup.
TILEKIT_DEVICE TILEKIT_INLINE int warpgroupid() { return threadIdx.x / warpgroup_threads; }
TILEKIT_DEVICE TILEKIT_INLINE int warp_in_warpgroup() { return warpid() % warpgroup_warps; }

// Bytes [shift, shift + 16) of the 32 bytes lo:hi (lo at the lower addresses): a 16-byte unit of
// a row that starts `shift` bytes past a 16-byte boundary, from the two aligned units it
// straddles. `shift` < 16, a multiple of 2, ideally warp-uniform. The words are picked in two
// selects by the bits of shift / 4 (11 selects, where a 4-way select per word takes 15), then
// one funnel shift per word.
TILEKIT_DEVICE TILEKIT_INLINE uint4 funnel_bytes(uint4 lo, uint4 hi, int shift) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const bool by_two = shift & 8, by_one = shift & 4;
  const int bits = shift % 4 * 8;
  uint32_t t[6], s[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) t[i] = by_two ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) s[i] = by_one ? t[i + 1] : t[i];
  return {__funnelshift_r(s[0], s[1], bits), __funnelshift_r(s[1], s[2], bits), __funnelshift_r(s[2], s[3], bits),
          __funnelshift_r(s[3], s[4], bits)};
}
// A 16-byte value from `lane` of the warp (every lane calls it).
TILEKIT_DEVICE TILEKIT_INLINE uint4 shuffle_unit(uint4 v, int lane) {
  return {__shfl_sync(~0u, v.x, lane), __shfl_sync(~0u, v.y, lane), __shfl_sync(~0u, v.z, lane),
          __shfl_sync(~0u, v.w, lane)};
}
#endif

}  // namespace tilekit
