#pragma once
// Row and column reductions of register tiles into register vectors.
//
//   row_max(dst, src)          dst[r] = max_c src(r, c)         (dst: row_vec<Tile, U>)
//   row_max(dst, src, prev)    dst[r] = max(prev[r], max_c src(r, c))
//   row_sum / row_min          the same with + / min
//   col_max / col_sum / col_min (+ prev forms)   over rows, dst: col_vec<Tile, U>
//   row_reduce(dst, src, op, init)   dst[r] = op(init, op over row r); op: (float, float) -> float,
//   col_reduce(dst, src, op, init)   associative and commutative (the order is a tree)
//   row_reduce / col_reduce(dst, src, op, prev)  with prev a vector: per-entry initial values
//
// The arithmetic is float whatever the tile's element type; the result is
// rounded once to the vector's element type U. Every lane that holds a vector
// entry (see rv.cuh) receives the full result: the partial results of the
// lanes that share a row (or column) are combined with a butterfly of
// __shfl_xor_sync, so no lane is left with a partial value.
//   * vector entries indexed by the "across" coordinate of the fragment
//     (g + 8*(k&1), vec_layout::grouped): the 4 lanes q of a group share it
//     -> xor 1, 2.
//   * entries indexed by the "along pair" coordinate (2q + 8*(k>>1) + h,
//     vec_layout::paired): the 8 groups g share it -> xor 4, 8, 16.
// dst may alias prev (row_max(m, s, m) is the online-softmax update).

#include "tilekit/ops/warp/common.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

namespace detail {

// lane = lanes_per_group * g + q (rt.cuh). The lanes that hold the same entry
// of a grouped vector differ only in q (lane bits below lanes_per_group), those
// of a paired vector only in g (the bits above).
inline constexpr int lanes_per_group = 4;

// The pair k of the fragment at (vector fragment v, other fragment o) of a
// row (PerRow) or column reduction.
template <bool PerRow, class Tile>
TILEKIT_DEVICE TILEKIT_INLINE float2 reduction_pair(const Tile& t, int v, int o, int k) {
  if constexpr (PerRow) return pair_to_float2(t.data[v][o][k]);
  else return pair_to_float2(t.data[o][v][k]);
}

template <bool PerRow, class Vec, class Tile>
inline constexpr bool reduction_vector_fits =
    Vec::length == (PerRow ? Tile::rows : Tile::cols) &&
    Vec::layout_kind == (PerRow ? row_vec_layout<Tile> : col_vec_layout<Tile>);

// Reduce src along its rows (PerRow) or columns; entry (v, e) of the result
// is then combined as fold(entry, e_index) before it is stored, which lets the
// callers fold in an initial scalar or a previous vector.
template <bool PerRow, class Vec, class Tile, class Op, class Fold>
TILEKIT_DEVICE TILEKIT_INLINE void reduce(Vec& dst, const Tile& src, Op op, Fold fold) {
  static_assert(reduction_vector_fits<PerRow, Vec, Tile>,
                "reduction: the destination must be row_vec<Tile, U> for row_* and col_vec<Tile, U> for col_* "
                "(same length and vec_layout as the tile's rows / columns)");
  constexpr int vector_fragments = PerRow ? Tile::height : Tile::width;
  constexpr int other_fragments = PerRow ? Tile::width : Tile::height;
  using U = typename Vec::element;
#pragma unroll
  for (int v = 0; v < vector_fragments; ++v) {
    if constexpr (Vec::layout_kind == vec_layout::grouped) {
      // Entry s = across coordinate g + 8s: pairs k = s and s + 2, both halves.
#pragma unroll
      for (int s = 0; s < Vec::per_fragment; ++s) {
        float2 x = reduction_pair<PerRow>(src, v, 0, s);
        float acc = op(x.x, x.y);
        x = reduction_pair<PerRow>(src, v, 0, s + 2);
        acc = op(acc, op(x.x, x.y));
#pragma unroll
        for (int o = 1; o < other_fragments; ++o) {
          x = reduction_pair<PerRow>(src, v, o, s);
          acc = op(acc, op(x.x, x.y));
          x = reduction_pair<PerRow>(src, v, o, s + 2);
          acc = op(acc, op(x.x, x.y));
        }
#pragma unroll
        for (int mask = 1; mask < lanes_per_group; mask *= 2) acc = op(acc, shuffle_xor(acc, mask));
        dst.data[v][s] = convert<U>(fold(acc, v, s));
      }
    } else {
      // Entry e = along coordinate 2q + (e&1) + 8(e>>1): half e&1 of pairs k = 2(e>>1) and 2(e>>1) + 1.
#pragma unroll
      for (int e = 0; e < Vec::per_fragment; ++e) {
        const int k0 = 2 * (e >> 1);
        const bool high_half = e & 1;
        float2 x = reduction_pair<PerRow>(src, v, 0, k0);
        float2 y = reduction_pair<PerRow>(src, v, 0, k0 + 1);
        float acc = high_half ? op(x.y, y.y) : op(x.x, y.x);
#pragma unroll
        for (int o = 1; o < other_fragments; ++o) {
          x = reduction_pair<PerRow>(src, v, o, k0);
          y = reduction_pair<PerRow>(src, v, o, k0 + 1);
          acc = op(acc, high_half ? op(x.y, y.y) : op(x.x, y.x));
        }
#pragma unroll
        for (int mask = lanes_per_group; mask < warp_threads; mask *= 2) acc = op(acc, shuffle_xor(acc, mask));
        dst.data[v][e] = convert<U>(fold(acc, v, e));
      }
    }
  }
}

// Fold a previous vector into the reduction: dst = op(prev, reduction).
template <bool PerRow, class Vec, class Tile, class Op, class Prev>
TILEKIT_DEVICE TILEKIT_INLINE void reduce_with_prev(Vec& dst, const Tile& src, Op op, const Prev& prev) {
  static_assert(same_vector_shape<Vec, Prev>, "reduction: prev must have the type of dst (up to element type)");
  reduce<PerRow>(dst, src, op, [&](float acc, int v, int e) { return op(convert<float>(prev.data[v][e]), acc); });
}
// Fold a scalar initial value (taken by value: a constexpr scalar may be passed).
template <bool PerRow, class Vec, class Tile, class Op, class S>
TILEKIT_DEVICE TILEKIT_INLINE void reduce_with_init(Vec& dst, const Tile& src, Op op, S init) {
  const float initial = scalar_to_float(init);
  reduce<PerRow>(dst, src, op, [&](float acc, int, int) { return op(initial, acc); });
}

struct no_fold {
  TILEKIT_DEVICE TILEKIT_INLINE float operator()(float acc, int, int) const { return acc; }
};
struct sum_reduction { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return x + y; } };
struct max_reduction { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return fmaxf(x, y); } };
struct min_reduction { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return fminf(x, y); } };

}  // namespace detail

// ---------------------------------------------------------------------------
// Generic reductions.
// ---------------------------------------------------------------------------
template <register_vector Vec, register_tile Tile, class Op, scalar_value S>
TILEKIT_DEVICE TILEKIT_INLINE void row_reduce(Vec& dst, const Tile& src, Op op, S init) {
  detail::reduce_with_init<true>(dst, src, op, init);
}
template <register_vector Vec, register_tile Tile, class Op, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void row_reduce(Vec& dst, const Tile& src, Op op, const Prev& prev) {
  detail::reduce_with_prev<true>(dst, src, op, prev);
}
template <register_vector Vec, register_tile Tile, class Op, scalar_value S>
TILEKIT_DEVICE TILEKIT_INLINE void col_reduce(Vec& dst, const Tile& src, Op op, S init) {
  detail::reduce_with_init<false>(dst, src, op, init);
}
template <register_vector Vec, register_tile Tile, class Op, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void col_reduce(Vec& dst, const Tile& src, Op op, const Prev& prev) {
  detail::reduce_with_prev<false>(dst, src, op, prev);
}

// ---------------------------------------------------------------------------
// Named reductions, plain and accumulating (prev folded in).
// ---------------------------------------------------------------------------
template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void row_max(Vec& dst, const Tile& src) {
  detail::reduce<true>(dst, src, detail::max_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void row_max(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<true>(dst, src, detail::max_reduction{}, prev);
}
template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void row_min(Vec& dst, const Tile& src) {
  detail::reduce<true>(dst, src, detail::min_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void row_min(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<true>(dst, src, detail::min_reduction{}, prev);
}
template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void row_sum(Vec& dst, const Tile& src) {
  detail::reduce<true>(dst, src, detail::sum_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void row_sum(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<true>(dst, src, detail::sum_reduction{}, prev);
}

template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void col_max(Vec& dst, const Tile& src) {
  detail::reduce<false>(dst, src, detail::max_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void col_max(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<false>(dst, src, detail::max_reduction{}, prev);
}
template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void col_min(Vec& dst, const Tile& src) {
  detail::reduce<false>(dst, src, detail::min_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void col_min(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<false>(dst, src, detail::min_reduction{}, prev);
}
template <register_vector Vec, register_tile Tile>
TILEKIT_DEVICE TILEKIT_INLINE void col_sum(Vec& dst, const Tile& src) {
  detail::reduce<false>(dst, src, detail::sum_reduction{}, detail::no_fold{});
}
template <register_vector Vec, register_tile Tile, register_vector Prev>
TILEKIT_DEVICE TILEKIT_INLINE void col_sum(Vec& dst, const Tile& src, const Prev& prev) {
  detail::reduce_with_prev<false>(dst, src, detail::sum_reduction{}, prev);
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
