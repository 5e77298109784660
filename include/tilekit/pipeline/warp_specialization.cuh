#pragma once
// Warp specialization: one producer warpgroup (TMA issue, few registers) and one or more
// consumer warpgroups (wgmma + softmax/epilogue, many registers) in the same CTA, moving
// registers from the producer to the consumers with setmaxnreg (sm_90a only).
//
//   __global__ void __launch_bounds__(384, 1) kernel(...) {      // 1 producer + 2 consumer WGs
//     if (warpgroupid() == 0) {
//       decrease_registers<24>();
//       if (warp_in_warpgroup() == 0 && laneid() == 0) { ... producer loop ... }
//     } else {
//       increase_registers<240>();
//       ... consumer loop ...
//     }
//   }
//
// Register budget (HOPPER_NOTES 6). The CTA's register pool is fixed at launch as
// (registers per thread at entry) x (threads); setmaxnreg only moves registers between
// warpgroups, so sum over warpgroups of 128 * N_wg must not exceed it, or the .inc side waits
// forever. The entry cap comes from __launch_bounds__(threads, 1) (or -maxrregcount):
// without a cap ptxas ignores setmaxnreg (info C7508) and consumers may spill.
//
//   | layout (threads)                 | entry cap | producer / consumer | check                       |
//   |----------------------------------|-----------|---------------------|-----------------------------|
//   | 1 producer + 2 consumer WG (384) | 168       | 24 / 240            | 24*128 + 240*256 = 64,512   |
//   | same                             | 168       | 40 / 232            | 40*128 + 232*256 = 64,512   |
//   | 1 producer + 3 consumer WG (512) | 128       | 32 / 160            | 32*128 + 160*384 = 65,536   |
//   | 1 producer + 1 consumer WG (256) | 256 (255) | 56 / 256            | 56*128 + 256*128 = 39,936   |
//
// Rules: every warp of the warpgroup executes the same setmaxnreg (warpgroup-uniform
// control flow); .dec requires the current count >= Regs and .inc <= Regs; registers gained
// by .inc are uninitialised. Call these first thing in each branch, before live values
// accumulate.

#include "tilekit/core/util.cuh"

namespace tilekit {

inline constexpr int setmaxnreg_min = 24;
inline constexpr int setmaxnreg_max = 256;
inline constexpr int setmaxnreg_granularity = 8;

namespace detail {
template <int Regs>
constexpr bool valid_setmaxnreg = Regs >= setmaxnreg_min && Regs <= setmaxnreg_max && Regs % setmaxnreg_granularity == 0;
}  // namespace detail

#if defined(__CUDACC__)
// Raise this warpgroup's per-thread register limit to Regs (blocks until the CTA's pool has them).
template <int Regs>
TILEKIT_DEVICE TILEKIT_INLINE void increase_registers() {
  static_assert(detail::valid_setmaxnreg<Regs>, "setmaxnreg takes 24..256 registers in steps of 8");
#if TILEKIT_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
#else
  __trap();  // setmaxnreg exists only on sm_90a: build with -gencode arch=compute_90a,code=sm_90a
#endif
}

// Lower this warpgroup's per-thread register limit to Regs, returning the rest to the CTA's pool.
template <int Regs>
TILEKIT_DEVICE TILEKIT_INLINE void decrease_registers() {
  static_assert(detail::valid_setmaxnreg<Regs>, "setmaxnreg takes 24..256 registers in steps of 8");
#if TILEKIT_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
#else
  __trap();  // setmaxnreg exists only on sm_90a: build with -gencode arch=compute_90a,code=sm_90a
#endif
}

// One lane of the calling warp (the same for every thread of the warp), chosen by the
// hardware (elect.sync); true in exactly one lane of a fully active warp. Use it to pick the
// thread that issues TMA / arrives for the warp.
TILEKIT_DEVICE TILEKIT_INLINE bool elect_one() {
  uint32_t elected;
  asm volatile(
      "{\n\t.reg .pred p;\n\t.reg .b32 leader;\n\t"
      "elect.sync leader|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  return elected != 0;
}
#endif

}  // namespace tilekit
