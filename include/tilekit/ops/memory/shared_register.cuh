#pragma once
// Warp-scope moves between shared tiles / vectors and registers.
//
//   warp::load(tile, shared, row0, col0)   rt <- the rt-sized sub-tile of st at (row0, col0)
//   warp::store(shared, tile, row0, col0)  that sub-tile of st <- rt
//   warp::load(vec, shared_vec)            rv <- sv (the first rv::length entries)
//   warp::store(shared_vec, vec)           sv <- rv (each entry written by one lane)
//
// All 32 lanes of the warp call these together. A warpgroup whose warps each
// own a 16-row slice of a 64-row tile writes
//   warp::load(slice, shared, 16 * warp_in_warpgroup());
// These functions do not synchronize: whoever wrote the shared tile (cp.async,
// TMA, other warps) must have been made visible first (barrier, mbarrier wait).
//
// How 16-bit tiles move (bf16 / fp16 shared tiles):
//   One ldmatrix.x4 (stmatrix.x4) moves one 16x16 fragment: matrix m of the
//   four 8x8 matrices is register k = m of every lane (rt.cuh, pair k). Lane l
//   supplies the address of one 16-byte row segment:
//
//     layout::row  (no .trans)  k: rows 8(k&1)..,  cols 8(k>>1)..
//         lane l -> row l % 16,                 col 8 * (l / 16)
//     layout::col  (.trans)     k: rows 8(k>>1)..,  cols 8(k&1)..
//         lane l -> row l % 8 + 8 * (l / 16),   col 8 * ((l / 8) % 2)
//
//   With .trans, register k of lane 4g+q holds elements (2q, g) and (2q+1, g)
//   of its 8x8 matrix: the pair runs down a column, which is the col-layout
//   ownership map. Each 16-byte segment is 8 consecutive elements starting at
//   a multiple of 8 columns, so it sits inside one swizzle chunk (asserted
//   below) and st::offset() of its first element is its address. The eight
//   rows of one 8x8 matrix land in eight different bank groups on every
//   swizzle mode (st.cuh), so ldmatrix / stmatrix are conflict-free.
//   col0 must be a multiple of 8 (16 bytes); row0 any multiple of 8 keeps the
//   accesses conflict-free.
//
// fp32 shared tiles use 8-byte shared accesses for row-layout pairs (two
// adjacent floats of a row) and 4-byte accesses for col-layout pairs.
// The register and shared element types may differ (e.g. an fp32 tile loaded
// from a bf16 shared tile); values are converted in registers.

#include <cstdint>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/bounds.cuh"
#include "tilekit/ops/memory/ptx_memory.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"

#if defined(__CUDACC__)
namespace tilekit {
namespace detail {

// ldmatrix / stmatrix move 8x8 matrices of b16: 8 elements (16 bytes) per row segment.
inline constexpr int ldmatrix_segment_elements = 8;

template <class Shared>
constexpr void check_ldmatrix_compatible() {
  static_assert(sizeof(typename Shared::element) == 2, "ldmatrix / stmatrix move 16-bit elements");
  static_assert(Shared::panel_cols % ldmatrix_segment_elements == 0,
                "a 16-byte ldmatrix row segment must not straddle a swizzle panel");
  static_assert(Shared::swizzle_bytes == 0 || Shared::swizzle_bytes % 16 == 0,
                "swizzle chunks are 16 bytes: one ldmatrix row segment each");
}

// Byte distance between fragment row i and i+1 (16 rows) at the same column.
// Adding 16 rows moves the 128-byte line index by a multiple of the swizzle
// period (16*S bytes = 2 repeats of 8*S), so the XOR pattern is unchanged and
// offset(r + 16, c) == offset(r, c) + this. Saves the swizzle math per fragment.
template <class Shared>
inline constexpr uint32_t fragment_row_step_bytes =
    uint32_t(fragment_dim) * uint32_t(Shared::swizzle_bytes ? Shared::swizzle_bytes : Shared::row_bytes);

// The (row, col) whose address lane `lane` gives to ldmatrix / stmatrix x4
// for one 16x16 fragment (see the table at the top of this file).
template <layout L>
TILEKIT_HOST_DEVICE constexpr fragment_position ldmatrix_lane_position(int lane) {
  constexpr int half = ldmatrix_segment_elements;  // 8: one 8x8 matrix
  if constexpr (L == layout::row) return {lane % (2 * half), half * (lane / (2 * half))};
  else return {lane % half + half * (lane / (2 * half)), half * ((lane / half) % 2)};
}

}  // namespace detail

namespace warp {

// dst <- rows [row0, row0 + Rows), cols [col0, col0 + Cols) of src.
template <class T, int Rows, int Cols, layout L, class S, int SharedRows, int SharedCols>
TILEKIT_DEVICE TILEKIT_INLINE void load(rt<T, Rows, Cols, L>& dst, const st<S, SharedRows, SharedCols>& src,
                                        int row0 = 0, int col0 = 0) {
  using tile = rt<T, Rows, Cols, L>;
  using shared = st<S, SharedRows, SharedCols>;
  using register_pair = packed_t<T>;
  static_assert(Rows <= SharedRows && Cols <= SharedCols,
                "the register tile must fit inside the shared tile; load a smaller rt or use a larger st");
  static_assert(std::is_same_v<S, float> || is_16bit_float<S>,
                "shared -> register loads need a bf16, fp16 or fp32 shared tile (convert fp8 elsewhere)");
  const int lane = laneid();
  const uint32_t base = src.address();

  if constexpr (sizeof(S) == 2) {
    tilekit::detail::check_ldmatrix_compatible<shared>();
    const fragment_position lane_pos = tilekit::detail::ldmatrix_lane_position<L>(lane);
#pragma unroll
    for (int j = 0; j < tile::width; ++j) {
      const uint32_t column_address =
          base + shared::offset(row0 + lane_pos.row, col0 + j * fragment_dim + lane_pos.col);
#pragma unroll
      for (int i = 0; i < tile::height; ++i) {
        uint32_t regs[fragment_pairs];
        const uint32_t address = column_address + uint32_t(i) * tilekit::detail::fragment_row_step_bytes<shared>;
        if constexpr (L == layout::row) tilekit::ptx::ldmatrix_x4(regs, address);
        else tilekit::ptx::ldmatrix_x4_trans(regs, address);
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k)
          dst.data[i][j][k] = convert<register_pair>(from_u32<packed_t<S>>(regs[k]));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
      for (int j = 0; j < tile::width; ++j)
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k) {
          const fragment_position p0 = tile::position(lane, i, j, k, 0);
          float2 pair;
          if constexpr (L == layout::row) {
            // The pair is two adjacent floats of one row: one 8-byte access
            // (c is even and chunks hold 4 floats, so it never straddles a chunk).
            const uint2 bits = tilekit::ptx::ld_shared_8(base + shared::offset(row0 + p0.row, col0 + p0.col));
            pair = make_float2(__uint_as_float(bits.x), __uint_as_float(bits.y));
          } else {
            // The pair runs down a column: two 4-byte accesses.
            const fragment_position p1 = tile::position(lane, i, j, k, 1);
            const uint32_t low_bits = tilekit::ptx::ld_shared_4(base + shared::offset(row0 + p0.row, col0 + p0.col));
            const uint32_t high_bits = tilekit::ptx::ld_shared_4(base + shared::offset(row0 + p1.row, col0 + p1.col));
            pair = make_float2(__uint_as_float(low_bits), __uint_as_float(high_bits));
          }
          dst.data[i][j][k] = convert<register_pair>(pair);
        }
  }
}

// Rows [row0, row0 + Rows), cols [col0, col0 + Cols) of dst <- src.
template <class S, int SharedRows, int SharedCols, class T, int Rows, int Cols, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void store(st<S, SharedRows, SharedCols>& dst, const rt<T, Rows, Cols, L>& src,
                                         int row0 = 0, int col0 = 0) {
  using tile = rt<T, Rows, Cols, L>;
  using shared = st<S, SharedRows, SharedCols>;
  static_assert(Rows <= SharedRows && Cols <= SharedCols,
                "the register tile must fit inside the shared tile; store a smaller rt or use a larger st");
  static_assert(std::is_same_v<S, float> || is_16bit_float<S>,
                "register -> shared stores need a bf16, fp16 or fp32 shared tile");
  const int lane = laneid();
  const uint32_t base = dst.address();

  if constexpr (sizeof(S) == 2) {
    tilekit::detail::check_ldmatrix_compatible<shared>();
    const fragment_position lane_pos = tilekit::detail::ldmatrix_lane_position<L>(lane);
#pragma unroll
    for (int j = 0; j < tile::width; ++j) {
      const uint32_t column_address =
          base + shared::offset(row0 + lane_pos.row, col0 + j * fragment_dim + lane_pos.col);
#pragma unroll
      for (int i = 0; i < tile::height; ++i) {
        uint32_t regs[fragment_pairs];
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k) regs[k] = as_u32(convert<packed_t<S>>(src.data[i][j][k]));
        const uint32_t address = column_address + uint32_t(i) * tilekit::detail::fragment_row_step_bytes<shared>;
        if constexpr (L == layout::row) tilekit::ptx::stmatrix_x4(address, regs);
        else tilekit::ptx::stmatrix_x4_trans(address, regs);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
      for (int j = 0; j < tile::width; ++j)
#pragma unroll
        for (int k = 0; k < fragment_pairs; ++k) {
          const float2 pair = convert<float2>(src.data[i][j][k]);
          const fragment_position p0 = tile::position(lane, i, j, k, 0);
          if constexpr (L == layout::row) {
            tilekit::ptx::st_shared_8(base + shared::offset(row0 + p0.row, col0 + p0.col),
                             make_uint2(__float_as_uint(pair.x), __float_as_uint(pair.y)));
          } else {
            const fragment_position p1 = tile::position(lane, i, j, k, 1);
            tilekit::ptx::st_shared_4(base + shared::offset(row0 + p0.row, col0 + p0.col), __float_as_uint(pair.x));
            tilekit::ptx::st_shared_4(base + shared::offset(row0 + p1.row, col0 + p1.col), __float_as_uint(pair.y));
          }
        }
  }
}

// dst <- src[0 .. N) (every replica lane reads its entries; shared broadcasts make that free).
template <class T, int N, vec_layout VL, class S, int SharedN>
TILEKIT_DEVICE TILEKIT_INLINE void load(rv<T, N, VL>& dst, const sv<S, SharedN>& src) {
  static_assert(N <= SharedN, "the register vector must not be longer than the shared vector");
  using vec = rv<T, N, VL>;
  const int lane = laneid();
#pragma unroll
  for (int i = 0; i < vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < vec::per_fragment; ++e) dst.data[i][e] = convert<T>(src[vec::index(lane, i, e)]);
}

// dst[0 .. N) <- src; each entry is written by exactly one lane (bounds.cuh).
template <class S, int SharedN, class T, int N, vec_layout VL>
TILEKIT_DEVICE TILEKIT_INLINE void store(sv<S, SharedN>& dst, const rv<T, N, VL>& src) {
  static_assert(N <= SharedN, "the register vector must not be longer than the shared vector");
  using vec = rv<T, N, VL>;
  const int lane = laneid();
  if (!tilekit::detail::writes_vector_entries<VL>(lane)) return;
#pragma unroll
  for (int i = 0; i < vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < vec::per_fragment; ++e) dst[vec::index(lane, i, e)] = convert<S>(src.data[i][e]);
}

}  // namespace warp
}  // namespace tilekit
#endif  // __CUDACC__
