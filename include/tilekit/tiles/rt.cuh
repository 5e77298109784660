#pragma once
// Register tiles: rt<T, Rows, Cols, Layout>, owned by one warp.
//
// A register tile is a grid of 16x16 fragments. Each of the 32 lanes of the
// warp holds 8 elements of every fragment, as 4 packed pairs (`data[i][j][k]`,
// k = 0..3, for fragment row i and fragment column j). Which 8 elements a lane
// holds is the tensor-core operand layout, so tiles feed mma.sync and wgmma
// without shuffles. With lane = 4*g + q (g = lane/4 in 0..7, q = lane%4):
//
//   layout::row  (mma A operand, mma/wgmma accumulator; pairs run along a row)
//
//          cols 0..7                       cols 8..15
//        +-------------------------------+-------------------------------+
//   rows | k=0: (g,   2q), (g,   2q+1)   | k=2: (g,   2q+8), (g,   2q+9) |  row g
//   0..7 |                               |                               |
//        +-------------------------------+-------------------------------+
//   8..15| k=1: (g+8, 2q), (g+8, 2q+1)   | k=3: (g+8, 2q+8), (g+8, 2q+9) |  row g+8
//        +-------------------------------+-------------------------------+
//        row = g + 8*(k&1),  col = 2q + 8*(k>>1) + h   (h = 0 low half, 1 high half)
//
//   layout::col  (mma B operand "col"; pairs run down a column). It is the
//   register image of the transposed row-layout fragment:
//        col = g + 8*(k&1),  row = 2q + 8*(k>>1) + h
//
// Consequences used throughout the library:
//   * A row-layout 16xK tile is the m16n8k16 A fragment; a row-layout NxK tile
//     is the B fragment of A*B^T; a col-layout KxN tile is the B fragment of A*B.
//   * The wgmma m64nN accumulator of warp w of a warpgroup is, register for
//     register, a row-layout rt<float, 16, N> holding rows 16w..16w+15
//     (HOPPER_NOTES 1.8), and a 16-bit row-layout rt<bf16, 16, K> is the
//     register A operand of the next wgmma (HOPPER_NOTES 1.9).
//   * An rt<T, R, C, col> holds exactly the registers of rt<T, C, R, row> of the
//     transposed matrix, so a logical transpose across layouts is free.

#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit {

enum class layout { row, col };

inline constexpr int fragment_dim = 16;      // fragments are 16x16
inline constexpr int fragment_pairs = 4;     // packed pairs per lane per fragment

// Where pair k, half h of lane `lane` sits inside a 16x16 fragment.
struct fragment_position {
  int row;
  int col;
};
template <layout L>
TILEKIT_HOST_DEVICE constexpr fragment_position fragment_element(int lane, int k, int h) {
  const int g = lane / 4, q = lane % 4;
  const int along_pair = 2 * q + 8 * (k >> 1) + h;  // the coordinate a pair runs along
  const int across = g + 8 * (k & 1);
  if constexpr (L == layout::row) return {across, along_pair};
  else return {along_pair, across};
}

template <class T, int Rows, int Cols, layout L = layout::row>
struct rt {
  static_assert(std::is_same_v<T, float> || is_16bit_float<T>,
                "register tiles hold float, bf16 or fp16 (convert fp8 data on load)");
  static_assert(Rows % fragment_dim == 0 && Cols % fragment_dim == 0,
                "register tile dimensions must be multiples of 16 (the fragment size)");

  using element = T;
  using packed = packed_t<T>;
  static constexpr layout tile_layout = L;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;
  static constexpr int height = Rows / fragment_dim;  // fragments down
  static constexpr int width = Cols / fragment_dim;   // fragments across
  static constexpr int elements_per_lane = height * width * fragment_pairs * 2;

  packed data[height][width][fragment_pairs];

  // Logical (row, col) of the element held in data[i][j][k], half h, by `lane`.
  TILEKIT_HOST_DEVICE static constexpr fragment_position position(int lane, int i, int j, int k, int h) {
    auto p = fragment_element<L>(lane, k, h);
    return {i * fragment_dim + p.row, j * fragment_dim + p.col};
  }
};

template <class T>
inline constexpr bool is_rt = false;
template <class T, int R, int C, layout L>
inline constexpr bool is_rt<rt<T, R, C, L>> = true;

// Common spellings.
template <int R, int C, layout L = layout::row> using rt_fl = rt<float, R, C, L>;
template <int R, int C, layout L = layout::row> using rt_bf = rt<bf16, R, C, L>;
template <int R, int C, layout L = layout::row> using rt_hf = rt<fp16, R, C, L>;

// The same shape and layout with another element type.
template <class Tile, class U>
using rt_retype = rt<U, Tile::rows, Tile::cols, Tile::tile_layout>;
// The logical transpose, held in the other layout (a free re-interpretation).
template <class Tile>
using rt_transposed = rt<typename Tile::element, Tile::cols, Tile::rows,
                         Tile::tile_layout == layout::row ? layout::col : layout::row>;
// The same logical matrix in the other layout (needs a register shuffle).
template <class Tile>
using rt_swapped = rt<typename Tile::element, Tile::rows, Tile::cols,
                      Tile::tile_layout == layout::row ? layout::col : layout::row>;

}  // namespace tilekit
