#pragma once
// Layout changes of register tiles (layouts: rt.cuh).
//
//   swap_layout(dst, src)     dst = src, held in the other layout
//                             (dst: rt_swapped<Src>; needs data movement between lanes)
//   transpose(dst, src)       dst = src^T, held in the other layout
//                             (dst: rt_transposed<Src>; free: only fragments are re-indexed)
//   transpose_swap(dst, src)  dst = src^T, held in the same layout as src
//                             (dst: rt<T, Cols, Rows, L>; transpose + swap_layout)
//
// How swap_layout works. A 16x16 fragment is four 8x8 blocks (block row b_r,
// block column b_c). In both layouts each register pair holds one block in
// the standard m8n8 fragment order (lane 4g + q holds entries (g, 2q), (g, 2q+1)):
//   row layout: pair k = b_r + 2*b_c holds the block itself,
//   col layout: pair k = 2*b_r + b_c holds the block's transpose.
// So changing the layout transposes every 8x8 block in its standard fragment
// (movmatrix.sync.aligned.m8n8.trans.b16 for 16-bit pairs, two shuffles for
// float pairs) and swaps pairs 1 and 2. The same code serves both directions.

#include "tilekit/ops/warp/common.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

namespace detail {

// Pair k of one layout and pair swapped_pair(k) of the other hold the same
// 8x8 block (b_r + 2*b_c <-> 2*b_r + b_c): pairs 0 and 3 stay, 1 and 2 trade.
TILEKIT_HOST_DEVICE constexpr int swapped_pair(int k) { return (k >> 1) | ((k & 1) << 1); }

// Transpose one 8x8 block held as a standard m8n8 fragment (lane 4g + q holds
// (g, 2q) low, (g, 2q + 1) high): afterwards the lane holds (2q, g), (2q + 1, g).
TILEKIT_DEVICE TILEKIT_INLINE uint32_t transpose_8x8_b16(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// The float version with shuffles. Lane (g, q) needs element (2q + h, g) for
// h = 0, 1, held by lane (2q + h, g/2) in half g&1. A shuffle reads one
// variable of the source lane, so the value a source offers must not depend
// on who asks: in round 1 the lanes with even g fetch their h = 0 element and
// those with odd g their h = 1 element; both want the source half that equals
// the source's own g parity. Round 2 fetches the other element, for which the
// wanted half is the opposite of the source's g parity.
TILEKIT_DEVICE TILEKIT_INLINE float2 transpose_8x8_f32(float2 x) {
  constexpr int lanes_per_group = 4;
  const int lane = laneid();
  const int g = lane / lanes_per_group, q = lane % lanes_per_group;
  const bool g_odd = g & 1;
  const int first_h = g_odd ? 1 : 0;
  const int source_first = lanes_per_group * (2 * q + first_h) + g / 2;
  const int source_second = lanes_per_group * (2 * q + 1 - first_h) + g / 2;
  const float offer_first = g_odd ? x.y : x.x;   // my half equal to my g parity
  const float offer_second = g_odd ? x.x : x.y;  // the other half
  const float first = __shfl_sync(full_warp_mask, offer_first, source_first);
  const float second = __shfl_sync(full_warp_mask, offer_second, source_second);
  return g_odd ? make_float2(second, first) : make_float2(first, second);
}

template <class P>
TILEKIT_DEVICE TILEKIT_INLINE P transpose_8x8(P x) {
  if constexpr (std::is_same_v<P, float2>) return transpose_8x8_f32(x);
  else return from_u32<P>(transpose_8x8_b16(as_u32(x)));
}

}  // namespace detail

template <class T, int R, int C, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void swap_layout(rt_swapped<rt<T, R, C, L>>& dst, const rt<T, R, C, L>& src) {
#pragma unroll
  for (int i = 0; i < src.height; ++i)
#pragma unroll
    for (int j = 0; j < src.width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k)
        dst.data[i][j][k] = detail::transpose_8x8(src.data[i][j][detail::swapped_pair(k)]);
}

template <class T, int R, int C, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void transpose(rt_transposed<rt<T, R, C, L>>& dst, const rt<T, R, C, L>& src) {
  // rt<T, C, R, other> holds exactly the registers of rt<T, R, C, L> of the
  // transposed matrix (rt.cuh), fragment (i, j) becoming fragment (j, i).
#pragma unroll
  for (int i = 0; i < src.height; ++i)
#pragma unroll
    for (int j = 0; j < src.width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) dst.data[j][i][k] = src.data[i][j][k];
}

template <class T, int R, int C, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void transpose_swap(rt<T, C, R, L>& dst, const rt<T, R, C, L>& src) {
  rt_transposed<rt<T, R, C, L>> transposed;  // a copy: dst may be src when the tile is square
  transpose(transposed, src);
  swap_layout(dst, transposed);
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
