#pragma once
// Warpgroup-scope register tiles: a warpgroup holds a (4*R) x C tile as one
// rt<T, R, C> per warp, warp w of the warpgroup holding rows [w*R, (w+1)*R).
// This is the shape of a wgmma accumulator (R = 16: the 64 x N result, see
// ops/warpgroup/mma.cuh) and of a register A operand. The functions below move
// such a distributed tile as a whole, so kernels do not compute per-warp row
// offsets by hand; each is executed by all 128 threads of the warpgroup and is
// the warp-scope operation (ops/warp/memory.cuh) applied to the warp's slice.

#include "tilekit/core/util.cuh"
#include "tilekit/ops/warp/memory.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/st.cuh"

#if defined(__CUDACC__)
namespace tilekit::warpgroup {

// First row of this warp's slice inside the warpgroup tile of R-row slices.
template <int R>
TILEKIT_DEVICE TILEKIT_INLINE int slice_row() {
  return warp_in_warpgroup() * R;
}

// Global (4R x C tile with top-left `origin`) -> registers; zero fill outside the tensor.
template <class T, int R, int C, layout L, class U>
TILEKIT_DEVICE TILEKIT_INLINE void load(rt<T, R, C, L>& dst, const gl<U>& src, coord origin) {
  origin.r += slice_row<R>();
  warp::load(dst, src, origin);
}
// Registers -> global (4R x C tile with top-left `origin`); elements outside the tensor dropped.
template <class U, class T, int R, int C, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void store(const gl<U>& dst, const rt<T, R, C, L>& src, coord origin) {
  origin.r += slice_row<R>();
  warp::store(dst, src, origin);
}
// Shared tile of exactly 4R x C -> registers.
template <class T, int R, int C, layout L, class S>
TILEKIT_DEVICE TILEKIT_INLINE void load(rt<T, R, C, L>& dst, const st<S, warpgroup_warps * R, C>& src) {
  warp::load(dst, src, slice_row<R>(), 0);
}
// Registers -> shared tile of exactly 4R x C. Writers must fence (tma::fence_shared_for_async)
// and synchronize before TMA or wgmma read the tile.
template <class S, class T, int R, int C, layout L>
TILEKIT_DEVICE TILEKIT_INLINE void store(st<S, warpgroup_warps * R, C>& dst, const rt<T, R, C, L>& src) {
  warp::store(dst, src, slice_row<R>(), 0);
}

}  // namespace tilekit::warpgroup
#endif
