#pragma once
// Shared vocabulary of the warp-scope register operations (tilekit::warp):
// traits and concepts that tell tiles, vectors and scalars apart, and the
// element/pair accessors the operation headers are written with.
//
// Every warp:: operation is executed by all 32 lanes of a warp, each lane
// working on the registers it owns; the ownership maps are documented once,
// in tiles/rt.cuh (tiles) and tiles/rv.cuh (vectors).
//
// Arithmetic convention: element-wise operations load each element as float,
// compute in float, and round once to the destination's element type (packed
// conversions for pairs). For fp32 tiles the conversions vanish.
//
// Naming caveat: tilekit::warp declares max, min, abs, exp, exp2, log, log2,
// div and copy for tiles/vectors. Inside this namespace they hide the global
// scalar functions of the same names, so code written in tilekit::warp must
// spell scalar math fmaxf / fminf / fabsf / std::max ..., never plain max(a, b).

#include <concepts>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"

namespace tilekit::warp {

namespace detail {
template <class T>
inline constexpr bool is_rv = false;
template <class T, int N, vec_layout VL>
inline constexpr bool is_rv<rv<T, N, VL>> = true;
}  // namespace detail

// A register tile rt<...> / register vector rv<...> (cv-ref qualifiers ignored).
template <class T>
concept register_tile = is_rt<std::remove_cvref_t<T>>;
template <class T>
concept register_vector = detail::is_rv<std::remove_cvref_t<T>>;
// A single value applied to every element: a C++ arithmetic type or a tilekit element type.
template <class T>
concept scalar_value = std::is_arithmetic_v<std::remove_cvref_t<T>> || is_element<std::remove_cvref_t<T>>;

// Two tiles with the same logical shape and layout (element types may differ).
template <class A, class B>
inline constexpr bool same_tile_shape = A::rows == B::rows && A::cols == B::cols && A::tile_layout == B::tile_layout;
// Two vectors with the same length and distribution (element types may differ).
template <class A, class B>
inline constexpr bool same_vector_shape = A::length == B::length && A::layout_kind == B::layout_kind;

namespace detail {

// Any scalar (C++ arithmetic or tilekit element type) -> float.
template <class S>
TILEKIT_HOST_DEVICE TILEKIT_INLINE float scalar_to_float(S s) {
  if constexpr (std::is_arithmetic_v<S>) return static_cast<float>(s);
  else return convert<float>(s);
}

#if defined(__CUDACC__)
// Packed pair <-> float2 (a no-op for float tiles, one packed cvt for 16-bit pairs).
template <class P>
TILEKIT_DEVICE TILEKIT_INLINE float2 pair_to_float2(P p) {
  return convert<float2>(p);
}
template <class P>
TILEKIT_DEVICE TILEKIT_INLINE P float2_to_pair(float2 f) {
  return convert<P>(f);
}

// The shuffle every lane of the warp takes part in.
inline constexpr unsigned full_warp_mask = 0xffffffffu;
TILEKIT_DEVICE TILEKIT_INLINE float shuffle_xor(float x, int lane_mask) {
  return __shfl_xor_sync(full_warp_mask, x, lane_mask);
}
#endif  // __CUDACC__

}  // namespace detail
}  // namespace tilekit::warp
