#pragma once
// In-place masks of register tiles: the elements outside the kept region are
// set to `value` (default -infinity, which exp2 turns into 0 in a softmax).
// Rows r and columns c are tile-local (0 <= r < Rows, 0 <= c < Cols).
//
//   mask_upper(tile, diagonal, value)   sets (r, c) with c - r > diagonal (keeps the lower part)
//   mask_lower(tile, diagonal, value)   sets (r, c) with c - r < diagonal (keeps the upper part)
//   mask_tail(tile, valid_rows, valid_cols, value)   sets r >= valid_rows or c >= valid_cols
//
// A tile at global offset (row0, col0) folds the offset into `diagonal`:
// global (row0 + r, col0 + c) has c - r > d  <=>  (col0 + c) - (row0 + r) > d + col0 - row0.
// Causal attention, bottom-right aligned (query i sees key j iff
// j <= i + Nk - Nq), for the score tile of queries q0.. and keys k0..:
//   mask_upper(scores, q0 - k0 + Nk - Nq);
// (Nq == Nk gives the usual top-left causal mask, diagonal q0 - k0.)

#include "tilekit/core/math.cuh"
#include "tilekit/ops/warp/common.cuh"
#include "tilekit/ops/warp/maps.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

template <register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void mask_upper(Tile& tile, int diagonal, float value = -infinity) {
  map_indexed(tile, tile, [diagonal, value](int r, int c, float x) { return c - r > diagonal ? value : x; });
}

template <register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void mask_lower(Tile& tile, int diagonal, float value = -infinity) {
  map_indexed(tile, tile, [diagonal, value](int r, int c, float x) { return c - r < diagonal ? value : x; });
}

template <register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void mask_tail(Tile& tile, int valid_rows, int valid_cols, float value = -infinity) {
  map_indexed(tile, tile, [valid_rows, valid_cols, value](int r, int c, float x) {
    return r >= valid_rows || c >= valid_cols ? value : x;
  });
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
