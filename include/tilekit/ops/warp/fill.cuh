#pragma once
// Fill register tiles and vectors with one value:
//   fill(x, value)          every element = value (converted to the element type)
//   zero(x)                 every element = 0
//   fill_neg_infinity(x)    every element = -infinity (the identity of max, e.g.
//                           the running row maximum of online softmax)

#include "tilekit/core/math.cuh"
#include "tilekit/ops/warp/common.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

template <register_tile Tile, scalar_value S>
TILEKIT_DEVICE TILEKIT_INLINE void fill(Tile& dst, S value) {
  using T = typename Tile::element;
  const T v = convert<T>(detail::scalar_to_float(value));
  const typename Tile::packed pair = make_pair(v, v);
#pragma unroll
  for (int i = 0; i < Tile::height; ++i)
#pragma unroll
    for (int j = 0; j < Tile::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) dst.data[i][j][k] = pair;
}

template <register_vector Vec, scalar_value S>
TILEKIT_DEVICE TILEKIT_INLINE void fill(Vec& dst, S value) {
  using T = typename Vec::element;
  const T v = convert<T>(detail::scalar_to_float(value));
#pragma unroll
  for (int i = 0; i < Vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Vec::per_fragment; ++e) dst.data[i][e] = v;
}

template <class X>
  requires register_tile<X> || register_vector<X>
TILEKIT_DEVICE TILEKIT_INLINE void zero(X& dst) {
  fill(dst, 0.0f);
}

template <class X>
  requires register_tile<X> || register_vector<X>
TILEKIT_DEVICE TILEKIT_INLINE void fill_neg_infinity(X& dst) {
  fill(dst, -infinity);
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
