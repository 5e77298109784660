#pragma once
// Element-type conversions between register tiles / vectors of the same shape
// and distribution:
//   copy(dst, src)   dst = src rounded to dst's element type (nearest even).
//
// Because both tiles share the layout, every lane converts only its own
// registers: pair for pair, with the packed cvt (one cvt.rn.bf16x2.f32 per
// float2 -> bf16 pair). This is how a wgmma / mma fp32 accumulator
// rt<float, 16, N> becomes the 16-bit A operand rt<bf16, 16, N> of the next
// GEMM (HOPPER_NOTES 1.9): the register layouts coincide, so no shuffles.

#include "tilekit/ops/warp/common.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

template <register_tile Dst, register_tile Src>
TILEKIT_DEVICE TILEKIT_INLINE void copy(Dst& dst, const Src& src) {
  static_assert(same_tile_shape<Dst, Src>,
                "copy: dst and src must have the same rows, cols and layout (use swap_layout to change the "
                "layout, transpose to transpose)");
  using DstPair = typename Dst::packed;
#pragma unroll
  for (int i = 0; i < Dst::height; ++i)
#pragma unroll
    for (int j = 0; j < Dst::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) dst.data[i][j][k] = convert<DstPair>(src.data[i][j][k]);
}

template <register_vector Dst, register_vector Src>
TILEKIT_DEVICE TILEKIT_INLINE void copy(Dst& dst, const Src& src) {
  static_assert(same_vector_shape<Dst, Src>,
                "copy: dst and src vectors must have the same length and vec_layout (row_vec / col_vec of the "
                "same tile)");
  using DstElement = typename Dst::element;
#pragma unroll
  for (int i = 0; i < Dst::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Dst::per_fragment; ++e) dst.data[i][e] = convert<DstElement>(src.data[i][e]);
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
