#pragma once
// Row and column broadcasts of register vectors over register tiles.
//
//   add_row(dst, src, v)   dst(r, c) = src(r, c) + v[r]     (v: row_vec<Tile, U>)
//   sub_row / mul_row / div_row                  - / * / (IEEE) division
//   add_col(dst, src, v)   dst(r, c) = src(r, c) + v[c]     (v: col_vec<Tile, U>)
//   sub_col / mul_col / div_col
//   broadcast_row(dst, v)  dst(r, c) = v[r]
//   broadcast_col(dst, v)  dst(r, c) = v[c]
//   map_rows(dst, src, v, f) / map_cols(dst, src, v, f)   dst(r, c) = f(src(r, c), v[r] or v[c])
//
// The vectors are distributed like the tile's rows / columns (rv.cuh), so
// every lane already holds the entries its elements need: no shuffles.
// Arithmetic in float, rounded once to dst's element type. dst may alias src.

#include "tilekit/ops/warp/common.cuh"
#include "tilekit/ops/warp/maps.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

namespace detail {
// The vector entry that element (pair k, half h) of fragment `frag` of a tile
// needs, when the vector runs along the fragment's across coordinate
// (grouped: g + 8*(k&1)) or along its pairs (paired: 2q + 8*(k>>1) + h).
template <class Vec>
TILEKIT_DEVICE TILEKIT_INLINE float vector_entry(const Vec& v, int frag, int k, int h) {
  if constexpr (Vec::layout_kind == vec_layout::grouped) return convert<float>(v.data[frag][k & 1]);
  else return convert<float>(v.data[frag][2 * (k >> 1) + h]);
}

template <bool PerRow, class Dst, class Src, class Vec, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map_broadcast(Dst& dst, const Src& src, const Vec& v, F f) {
  static_assert(same_tile_shape<Dst, Src>, "broadcast: dst and src must have the same rows, cols and layout");
  static_assert(Vec::length == (PerRow ? Dst::rows : Dst::cols) &&
                    Vec::layout_kind == (PerRow ? row_vec_layout<Dst> : col_vec_layout<Dst>),
                "broadcast: the vector must be row_vec<Tile, U> for *_row and col_vec<Tile, U> for *_col");
#pragma unroll
  for (int i = 0; i < Dst::height; ++i)
#pragma unroll
    for (int j = 0; j < Dst::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) {
        const int frag = PerRow ? i : j;
        const float2 x = pair_to_float2(src.data[i][j][k]);
        const float lo = f(x.x, vector_entry(v, frag, k, 0));
        const float hi = f(x.y, vector_entry(v, frag, k, 1));
        dst.data[i][j][k] = float2_to_pair<typename Dst::packed>(make_float2(lo, hi));
      }
}

struct take_vector_entry {
  TILEKIT_DEVICE TILEKIT_INLINE float operator()(float, float entry) const { return entry; }
};
}  // namespace detail

template <register_tile Dst, register_tile Src, register_vector Vec, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map_rows(Dst& dst, const Src& src, const Vec& row_values, F f) {
  detail::map_broadcast<true>(dst, src, row_values, f);
}
template <register_tile Dst, register_tile Src, register_vector Vec, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map_cols(Dst& dst, const Src& src, const Vec& col_values, F f) {
  detail::map_broadcast<false>(dst, src, col_values, f);
}

template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void add_row(Dst& dst, const Src& src, const Vec& row_values) {
  map_rows(dst, src, row_values, detail::add_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void sub_row(Dst& dst, const Src& src, const Vec& row_values) {
  map_rows(dst, src, row_values, detail::sub_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void mul_row(Dst& dst, const Src& src, const Vec& row_values) {
  map_rows(dst, src, row_values, detail::mul_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void div_row(Dst& dst, const Src& src, const Vec& row_values) {
  map_rows(dst, src, row_values, detail::div_op{});
}

template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void add_col(Dst& dst, const Src& src, const Vec& col_values) {
  map_cols(dst, src, col_values, detail::add_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void sub_col(Dst& dst, const Src& src, const Vec& col_values) {
  map_cols(dst, src, col_values, detail::sub_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void mul_col(Dst& dst, const Src& src, const Vec& col_values) {
  map_cols(dst, src, col_values, detail::mul_op{});
}
template <register_tile Dst, register_tile Src, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void div_col(Dst& dst, const Src& src, const Vec& col_values) {
  map_cols(dst, src, col_values, detail::div_op{});
}

template <register_tile Dst, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void broadcast_row(Dst& dst, const Vec& row_values) {
  // dst is also passed as the (ignored) source: its values are never used.
  map_rows(dst, dst, row_values, detail::take_vector_entry{});
}
template <register_tile Dst, register_vector Vec>
TILEKIT_DEVICE TILEKIT_INLINE void broadcast_col(Dst& dst, const Vec& col_values) {
  map_cols(dst, dst, col_values, detail::take_vector_entry{});
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
