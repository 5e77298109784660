#pragma once
// Warp-scope moves between global memory and registers, without shared memory.
//
//   warp::load(tile, g, {.b, .d, .r, .c})   rt <- gl (element type converted)
//   warp::store(g, tile, {.b, .d, .r, .c})  gl <- rt (element type converted)
//   warp::load(vec, ptr, n_valid)           rv <- ptr[0 .. n_valid), zeros after
//   warp::store(ptr, vec, n_valid)          ptr[0 .. n_valid) <- rv
//
// All 32 lanes of the warp must call these together. Each lane touches
// exactly the elements rt::position() assigns to it (rt.cuh).
//
// Access pattern: in a row-layout tile a lane's packed pair is two adjacent
// elements of a row, so when the tile lies inside the tensor and the rows are
// pair-aligned each pair is one 2*sizeof(U)-byte load (4 B for 16-bit, 8 B
// for fp32). Col-layout pairs run down a column and are read element-wise.
// Tiles that hang over the tensor edge (or misaligned views) take an
// element-wise, bounds-checked path: zeros are loaded outside the tensor and
// stores outside it are dropped. The choice is warp-uniform.
//
// For bandwidth-bound kernels prefer global -> shared (cp.async / TMA, 16-B
// accesses) -> registers; these direct moves issue narrower accesses but need
// no shared memory (epilogues, per-row statistics).

#include <cstdint>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/bounds.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

// dst <- the Rows x Cols window of src whose top-left element is `origin`.
template <class T, int Rows, int Cols, layout L, class U>
TILEKIT_DEVICE TILEKIT_INLINE void load(rt<T, Rows, Cols, L>& dst, const gl<U>& src, coord origin) {
  static_assert(is_element<U>, "global element type must be bf16, fp16, fp32 or fp8");
  using tile = rt<T, Rows, Cols, L>;
  using global_pair = packed_t<U>;
  using register_pair = packed_t<T>;
  const int lane = laneid();
  const U* tile_origin = src.data + src.offset(origin);  // not dereferenced outside the tensor
  const int64_t row_stride = src.row_stride();
  const tilekit::detail::extent in_bounds = tilekit::detail::clipped_extent<Rows, Cols>(src, origin);

  if constexpr (L == layout::row) {
    const bool pairs_aligned =
        tilekit::detail::is_aligned(tile_origin, row_stride * int64_t(sizeof(U)), int(sizeof(global_pair)));
    if (in_bounds.covers<Rows, Cols>() && pairs_aligned) {
#pragma unroll
      for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int j = 0; j < tile::width; ++j)
#pragma unroll
          for (int k = 0; k < fragment_pairs; ++k) {
            const fragment_position p = tile::position(lane, i, j, k, 0);
            const global_pair pair = *reinterpret_cast<const global_pair*>(tile_origin + p.row * row_stride + p.col);
            dst.data[i][j][k] = tilekit::detail::convert_pair<register_pair>(pair);
          }
      return;
    }
  } else if (in_bounds.covers<Rows, Cols>()) {
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
      for (int j = 0; j < tile::width; ++j)
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k) {
          const fragment_position p0 = tile::position(lane, i, j, k, 0);
          const fragment_position p1 = tile::position(lane, i, j, k, 1);
          dst.data[i][j][k] = make_pair(convert<T>(tile_origin[p0.row * row_stride + p0.col]),
                                        convert<T>(tile_origin[p1.row * row_stride + p1.col]));
        }
    return;
  }

  // Edge tile (or misaligned view): element by element, zeros outside.
  auto element_at = [&](fragment_position p) -> T {
    if (!in_bounds.contains(p.row, p.col)) return tilekit::detail::zero<T>();
    return convert<T>(tile_origin[p.row * row_stride + p.col]);
  };
#pragma unroll
  for (int i = 0; i < tile::height; ++i)
#pragma unroll
    for (int j = 0; j < tile::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k)
        dst.data[i][j][k] = make_pair(element_at(tile::position(lane, i, j, k, 0)),
                                      element_at(tile::position(lane, i, j, k, 1)));
}

// The Rows x Cols window of dst at `origin` <- src; elements outside dst are not written.
template <class U, class T, int Rows, int Cols, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void store(const gl<U>& dst, const rt<T, Rows, Cols, L>& src, coord origin) {
  static_assert(is_element<U>, "global element type must be bf16, fp16, fp32 or fp8");
  using tile = rt<T, Rows, Cols, L>;
  using global_pair = packed_t<U>;
  const int lane = laneid();
  U* tile_origin = dst.data + dst.offset(origin);
  const int64_t row_stride = dst.row_stride();
  const tilekit::detail::extent in_bounds = tilekit::detail::clipped_extent<Rows, Cols>(dst, origin);

  if constexpr (L == layout::row) {
    const bool pairs_aligned =
        tilekit::detail::is_aligned(tile_origin, row_stride * int64_t(sizeof(U)), int(sizeof(global_pair)));
    if (in_bounds.covers<Rows, Cols>() && pairs_aligned) {
#pragma unroll
      for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int j = 0; j < tile::width; ++j)
#pragma unroll
          for (int k = 0; k < fragment_pairs; ++k) {
            const fragment_position p = tile::position(lane, i, j, k, 0);
            *reinterpret_cast<global_pair*>(tile_origin + p.row * row_stride + p.col) =
                convert<global_pair>(src.data[i][j][k]);
          }
      return;
    }
  } else if (in_bounds.covers<Rows, Cols>()) {
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
      for (int j = 0; j < tile::width; ++j)
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k) {
          const fragment_position p0 = tile::position(lane, i, j, k, 0);
          const fragment_position p1 = tile::position(lane, i, j, k, 1);
          tile_origin[p0.row * row_stride + p0.col] = convert<U>(low(src.data[i][j][k]));
          tile_origin[p1.row * row_stride + p1.col] = convert<U>(high(src.data[i][j][k]));
        }
    return;
  }

  // Edge tile (or misaligned view): element by element, nothing outside.
  auto store_element = [&](fragment_position p, T value) {
    if (in_bounds.contains(p.row, p.col)) tile_origin[p.row * row_stride + p.col] = convert<U>(value);
  };
#pragma unroll
  for (int i = 0; i < tile::height; ++i)
#pragma unroll
    for (int j = 0; j < tile::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) {
        store_element(tile::position(lane, i, j, k, 0), low(src.data[i][j][k]));
        store_element(tile::position(lane, i, j, k, 1), high(src.data[i][j][k]));
      }
}

// dst <- src[0 .. N), entries at index >= n_valid read as zero (and src is not
// read there). Every replica lane reads its entries (broadcast-friendly).
template <class T, int N, vec_layout VL, class U>
TILEKIT_DEVICE TILEKIT_INLINE void load(rv<T, N, VL>& dst, const U* src, int n_valid) {
  using vec = rv<T, N, VL>;
  const int lane = laneid();
#pragma unroll
  for (int i = 0; i < vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < vec::per_fragment; ++e) {
      const int index = vec::index(lane, i, e);
      dst.data[i][e] = index < n_valid ? convert<T>(src[index]) : tilekit::detail::zero<T>();
    }
}

// dst[0 .. n_valid) <- src; each entry is written by exactly one lane.
template <class U, class T, int N, vec_layout VL>
TILEKIT_DEVICE TILEKIT_INLINE void store(U* dst, const rv<T, N, VL>& src, int n_valid) {
  using vec = rv<T, N, VL>;
  const int lane = laneid();
  if (!tilekit::detail::writes_vector_entries<VL>(lane)) return;
#pragma unroll
  for (int i = 0; i < vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < vec::per_fragment; ++e) {
      const int index = vec::index(lane, i, e);
      if (index < n_valid) dst[index] = convert<U>(src.data[i][e]);
    }
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
