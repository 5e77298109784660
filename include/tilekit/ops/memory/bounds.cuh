#pragma once
// Bounds and ownership helpers shared by the memory moves.
//
// Edge handling convention (every load/store in ops/memory): a tile is placed
// with its top-left element at `origin` (non-negative coordinates); elements
// outside the tensor read as zero on loads and are not written on stores.
// `clipped_extent` says how many rows / cols of a Rows x Cols window are in
// bounds, so the per-element test is just `row < rows && col < cols`.

#include <cstdint>
#include <cstring>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rv.cuh"

namespace tilekit::detail {

struct extent {
  int rows;
  int cols;
  // The whole Rows x Cols window is inside the tensor.
  template <int Rows, int Cols>
  TILEKIT_HOST_DEVICE constexpr bool covers() const {
    return rows >= Rows && cols >= Cols;
  }
  TILEKIT_HOST_DEVICE constexpr bool contains(int row, int col) const { return row < rows && col < cols; }
};

// In-bounds rows / cols of the Rows x Cols window at `origin` of `g`
// (0 x 0 when the batch / depth coordinate is outside the tensor).
template <int Rows, int Cols, class T>
TILEKIT_HOST_DEVICE constexpr extent clipped_extent(const gl<T>& g, const coord& origin) {
  const bool slice_inside = origin.b < g.batch() && origin.d < g.depth();
  if (!slice_inside) return {0, 0};
  auto clip = [](int64_t left, int limit) -> int {
    return left <= 0 ? 0 : (left >= limit ? limit : int(left));
  };
  return {clip(g.rows() - origin.r, Rows), clip(g.cols() - origin.c, Cols)};
}

// Is `address` (and, for a strided walk, every `stride_bytes` step from it) a
// multiple of `alignment` bytes?
TILEKIT_HOST_DEVICE inline bool is_aligned(const void* address, int64_t stride_bytes, int alignment) {
  return ((reinterpret_cast<uintptr_t>(address) | static_cast<uintptr_t>(stride_bytes)) &
          static_cast<uintptr_t>(alignment - 1)) == 0;
}

// +0 of any element type (all bits clear), without a run-time conversion.
template <class T>
TILEKIT_HOST_DEVICE TILEKIT_INLINE T zero() {
  T value;
  memset(&value, 0, sizeof(T));
  return value;
}

// convert<ToPair>(pair), with fp8 pairs widened through their explicit
// operator float2 (core convert() spells that `float2(x)`, which C++20 parses
// as aggregate initialization of float2 and rejects).
template <class ToPair, class FromPair>
TILEKIT_HOST_DEVICE TILEKIT_INLINE ToPair convert_pair(FromPair pair) {
  if constexpr (is_fp8<element_t<FromPair>>) return convert<ToPair>(static_cast<float2>(pair));
  else return convert<ToPair>(pair);
}

// Register vectors replicate each entry over 4 (grouped) or 8 (paired) lanes.
// Stores write every entry exactly once: from the replica with q == 0
// (grouped) or g == 0 (paired), lane = 4*g + q as in rt.cuh.
template <vec_layout VL>
TILEKIT_HOST_DEVICE constexpr bool writes_vector_entries(int lane) {
  if constexpr (VL == vec_layout::grouped) return lane % 4 == 0;
  else return lane / 4 == 0;
}

}  // namespace tilekit::detail
