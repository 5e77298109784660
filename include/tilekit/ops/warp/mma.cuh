#pragma once
// Warp-level matrix multiply with mma.sync.aligned.m16n8k16 (fp32 accumulate,
// bf16 or fp16 inputs), on register tiles.
//
//   mma_AB  (acc, a, b)   acc += A   * B     a: rt<T, M, K, row>   b: rt<T, K, N, col>
//   mma_ABt (acc, a, b)   acc += A   * B^T   a: rt<T, M, K, row>   b: rt<T, N, K, row>
//   mma_AtB (acc, a, b)   acc += A^T * B     a: rt<T, K, M, col>   b: rt<T, K, N, col>
//   mma_AtBt(acc, a, b)   acc += A^T * B^T   a: rt<T, K, M, col>   b: rt<T, N, K, row>
//   mm_*    (acc, a, b)   the same with acc overwritten (zeroed first)
// acc: rt<float, M, N, row>; T = bf16 or fp16 (the same for a and b).
//
// Why the tiles need no shuffles (HOPPER_NOTES 8.3, layouts in rt.cuh):
//   * the four pairs of a row-layout 16x16 fragment are, in order, the A
//     registers a0a1, a2a3, a4a5, a6a7 of m16n8k16; a col-layout K x M tile of
//     A^T holds the same registers (rt.cuh: col layout = transposed row
//     layout), so both A forms are free.
//   * B (k x n, 16 x 8): in a col-layout K x N fragment, columns 0..7 are
//     pairs {0, 2} and columns 8..15 pairs {1, 3}; a row-layout N x K tile of
//     B^T holds the same registers.
//   * C/D (16 x 8, fp32): in a row-layout fragment of acc, columns 0..7 are
//     pairs {0, 1} (c0c1, c2c3) and columns 8..15 pairs {2, 3}.
// So one 16x16x16 fragment product is two m16n8k16 instructions.

#include "tilekit/ops/warp/common.cuh"
#include "tilekit/ops/warp/fill.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

namespace detail {

// The mma.sync instruction shape; one 16x16x16 register-fragment product uses
// fragment_dim / mma_n of them along N.
inline constexpr int mma_n = 8;
inline constexpr int mma_per_fragment = fragment_dim / mma_n;

// One m16n8k16: d += a * b with a = 4 packed 16-bit registers, b = 2, d = 4 floats.
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE void mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1,
                                                uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  static_assert(is_16bit_float<T>, "mma.sync m16n8k16 inputs must be bf16 or fp16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#else
  __trap();  // mma.sync with bf16/fp16 inputs needs sm_80 or newer
#endif
}

// acc fragment += A fragment * B fragment, 16x16x16. a_frag: the 4 pairs of a
// row-layout A fragment (or col-layout A^T fragment); b_frag: the 4 pairs of a
// col-layout B fragment (or row-layout B^T fragment).
template <class P>
TILEKIT_DEVICE TILEKIT_INLINE void mma_fragment(float2 (&acc)[fragment_pairs], const P (&a_frag)[fragment_pairs],
                                                const P (&b_frag)[fragment_pairs]) {
  using T = element_t<P>;
  // N columns 8n..8n+7 of the fragment: B pairs {n, n + 2}, accumulator pairs {2n, 2n + 1}.
#pragma unroll
  for (int n = 0; n < mma_per_fragment; ++n) {
    float2& c_top = acc[2 * n];         // rows g,     cols 8n + 2q, +1
    float2& c_bottom = acc[2 * n + 1];  // rows g + 8, cols 8n + 2q, +1
    mma_m16n8k16<T>(c_top.x, c_top.y, c_bottom.x, c_bottom.y, as_u32(a_frag[0]), as_u32(a_frag[1]),
                    as_u32(a_frag[2]), as_u32(a_frag[3]), as_u32(b_frag[n]), as_u32(b_frag[n + 2]));
  }
}

// Fragment (r, c) of an operand matrix whose tile holds it directly
// (data[r][c]) or holds its transpose (data[c][r]).
template <bool HoldsTranspose, class Tile>
TILEKIT_DEVICE TILEKIT_INLINE const typename Tile::packed (&operand_fragment(const Tile& t, int r,
                                                                             int c))[fragment_pairs] {
  if constexpr (HoldsTranspose) return t.data[c][r];
  else return t.data[r][c];
}

// The shapes, with the A / B operand tiles described by their roles.
// ATransposed: a holds A^T (K x M, col layout) instead of A (M x K, row layout).
// BTransposed: b holds B^T (N x K, row layout) instead of B (K x N, col layout).
template <bool ATransposed, bool BTransposed, class Acc, class ATile, class BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mma_tiles(Acc& acc, const ATile& a, const BTile& b) {
  using T = typename ATile::element;
  static_assert(std::is_same_v<typename Acc::element, float> && Acc::tile_layout == layout::row,
                "mma: the accumulator must be rt<float, M, N, layout::row>");
  static_assert(is_16bit_float<T> && std::is_same_v<T, typename BTile::element>,
                "mma: a and b must both be bf16 or both fp16 tiles (convert with warp::copy)");
  static_assert(ATile::tile_layout == (ATransposed ? layout::col : layout::row),
                "mma: A must be rt<T, M, K, row> for mma_AB/mma_ABt and rt<T, K, M, col> for mma_AtB/mma_AtBt "
                "(use swap_layout to change the layout)");
  static_assert(BTile::tile_layout == (BTransposed ? layout::row : layout::col),
                "mma: B must be rt<T, K, N, col> for mma_AB/mma_AtB and rt<T, N, K, row> for mma_ABt/mma_AtBt "
                "(use swap_layout to change the layout)");
  constexpr int m_frags = ATransposed ? ATile::width : ATile::height;
  constexpr int k_frags_a = ATransposed ? ATile::height : ATile::width;
  constexpr int k_frags_b = BTransposed ? BTile::width : BTile::height;
  constexpr int n_frags = BTransposed ? BTile::height : BTile::width;
  static_assert(m_frags == Acc::height, "mma: A's M (rows of A, cols of A^T) must equal the accumulator's rows");
  static_assert(n_frags == Acc::width, "mma: B's N (cols of B, rows of B^T) must equal the accumulator's cols");
  static_assert(k_frags_a == k_frags_b, "mma: A and B must have the same K");
  // k outermost: consecutive instructions write different accumulators, so
  // they do not wait on each other.
#pragma unroll
  for (int kk = 0; kk < k_frags_a; ++kk)
#pragma unroll
    for (int m = 0; m < m_frags; ++m)
#pragma unroll
      for (int n = 0; n < n_frags; ++n) {
        mma_fragment(acc.data[m][n], operand_fragment<ATransposed>(a, m, kk), operand_fragment<BTransposed>(b, kk, n));
      }
}

}  // namespace detail

template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AB(Acc& acc, const ATile& a, const BTile& b) {
  detail::mma_tiles<false, false>(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mma_ABt(Acc& acc, const ATile& a, const BTile& b) {
  detail::mma_tiles<false, true>(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AtB(Acc& acc, const ATile& a, const BTile& b) {
  detail::mma_tiles<true, false>(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AtBt(Acc& acc, const ATile& a, const BTile& b) {
  detail::mma_tiles<true, true>(acc, a, b);
}

template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AB(Acc& acc, const ATile& a, const BTile& b) {
  zero(acc);
  mma_AB(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mm_ABt(Acc& acc, const ATile& a, const BTile& b) {
  zero(acc);
  mma_ABt(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AtB(Acc& acc, const ATile& a, const BTile& b) {
  zero(acc);
  mma_AtB(acc, a, b);
}
template <register_tile Acc, register_tile ATile, register_tile BTile>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AtBt(Acc& acc, const ATile& a, const BTile& b) {
  zero(acc);
  mma_AtBt(acc, a, b);
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
