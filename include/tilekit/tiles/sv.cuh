#pragma once
// Shared vectors: sv<T, N>, a contiguous vector in shared memory (per-row
// statistics, weights, bias). 128-byte aligned so that TMA and bulk copies can
// target it; N * sizeof(T) should be a multiple of 16 for bulk copies.

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit {

template <class T, int N>
struct sv {
  static_assert(N > 0, "shared vector must not be empty");
  using element = T;
  static constexpr int length = N;
  static constexpr int bytes = N * int(sizeof(T));
  static constexpr int alignment = 128;

  alignas(alignment) T data[N];

  TILEKIT_HOST_DEVICE T& operator[](int i) { return data[i]; }
  TILEKIT_HOST_DEVICE const T& operator[](int i) const { return data[i]; }
#if defined(__CUDACC__)
  TILEKIT_DEVICE TILEKIT_INLINE uint32_t address() const {
    return static_cast<uint32_t>(__cvta_generic_to_shared(data));
  }
#endif
};

template <class T>
inline constexpr bool is_sv = false;
template <class T, int N>
inline constexpr bool is_sv<sv<T, N>> = true;

}  // namespace tilekit
