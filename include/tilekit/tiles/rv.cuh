#pragma once
// Register vectors: rv<T, N, vec_layout>, the results of row/column
// reductions and the operands of row/column broadcasts.
//
// A vector is distributed over the warp the way one dimension of a register
// tile is, so that reductions and broadcasts need no shuffles beyond the
// reduction itself. Two distributions exist (lane = 4*g + q as in rt.cuh):
//
//   vec_layout::grouped   2 values per 16 entries, chosen by the lane group g:
//                         data[i][s] = v[16*i + g + 8*s],  s = 0, 1
//                         (replicated over the 4 lanes q of a group).
//                         = the rows of a row-layout tile, the columns of a
//                           col-layout tile.
//   vec_layout::paired    4 values per 16 entries, chosen by q:
//                         data[i][k] = v[16*i + 2*q + (k&1) + 8*(k>>1)], k = 0..3
//                         (replicated over the 8 groups g).
//                         = the columns of a row-layout tile, the rows of a
//                           col-layout tile.
//
//     entry:   0 1 2 3 4 5 6 7 | 8 9 10 11 12 13 14 15
//   grouped:   g=0 1 2 3 4 5 6 7 (s=0) | g=0 ... 7 (s=1)
//   paired:    q=0 0 1 1 2 2 3 3 (k=0,1) | q=0 0 1 1 2 2 3 3 (k=2,3)
//
// row_vec<Tile> / col_vec<Tile> name the vector that holds one value per row /
// per column of a tile; reductions return them and broadcasts take them.

#include "tilekit/tiles/rt.cuh"

namespace tilekit {

enum class vec_layout { grouped, paired };

template <class T, int N, vec_layout VL>
struct rv {
  static_assert(N % fragment_dim == 0, "register vector length must be a multiple of 16");
  using element = T;
  static constexpr int length = N;
  static constexpr vec_layout layout_kind = VL;
  static constexpr int fragments = N / fragment_dim;
  static constexpr int per_fragment = VL == vec_layout::grouped ? 2 : 4;  // values per lane per 16 entries

  T data[fragments][per_fragment];

  // Which entry data[i][e] of `lane` holds.
  TILEKIT_HOST_DEVICE static constexpr int index(int lane, int i, int e) {
    if constexpr (VL == vec_layout::grouped) return fragment_dim * i + lane / 4 + 8 * e;
    else return fragment_dim * i + 2 * (lane % 4) + (e & 1) + 8 * (e >> 1);
  }
};

template <class Tile>
inline constexpr vec_layout row_vec_layout =
    Tile::tile_layout == layout::row ? vec_layout::grouped : vec_layout::paired;
template <class Tile>
inline constexpr vec_layout col_vec_layout =
    Tile::tile_layout == layout::row ? vec_layout::paired : vec_layout::grouped;

// One value per row of Tile (what row_max / row_sum produce), element type U.
template <class Tile, class U = float>
using row_vec = rv<U, Tile::rows, row_vec_layout<Tile>>;
// One value per column of Tile.
template <class Tile, class U = float>
using col_vec = rv<U, Tile::cols, col_vec_layout<Tile>>;

}  // namespace tilekit
