#pragma once
// Named (hardware) barriers: 16 per CTA, ids 0..15, each synchronising a chosen number of
// threads (a multiple of the warp size) instead of the whole block (HOPPER_NOTES 5).
//
//   named_barrier<Id, Threads>::sync()    arrive and wait until Threads threads have arrived
//   named_barrier<Id, Threads>::arrive()  arrive without waiting (a producer signalling)
//
// Id allocation:
//   0      reserved: __syncthreads() uses barrier 0 with the whole block. Using it with a
//          different thread count while another part of the kernel calls __syncthreads()
//          deadlocks or corrupts both; tilekit code never uses it.
//   1..15  free for kernels. tilekit's own primitives that need one take the id as a
//          template parameter so that a kernel keeps all its ids in one place, e.g.
//            enum barrier_ids : int { consumers_done = 1, warpgroup0_turn = 2, warpgroup1_turn = 3 };
//
// Semantics: the barrier completes once Threads threads arrived (sync counts as an arrive);
// completion orders the participants' earlier shared/global accesses before everything
// after their sync. Whole warps participate: every thread of a warp that reaches the
// instruction counts, so call it warp-uniformly. A warp must not arrive twice on the same
// barrier before it completes.
//
// Warpgroup ping-pong (FlashAttention-3 style scheduling): warpgroup k waits on its own id
// with sync(), issues its GEMMs, then arrive()s on the other warpgroup's id, with Threads =
// 2 * warpgroup_threads. The first warpgroup arrives once on its own id at start.

#include <cstdint>

#include "tilekit/core/util.cuh"

namespace tilekit {

inline constexpr int named_barrier_count = 16;
// The first id kernels should use (0 belongs to __syncthreads).
inline constexpr int first_free_barrier_id = 1;

template <int Id, int Threads>
struct named_barrier {
  static_assert(Id >= 0 && Id < named_barrier_count, "named barrier ids are 0..15 (0 is __syncthreads'; use 1..15)");
  static_assert(Threads > 0 && Threads % warp_threads == 0,
                "a named barrier counts whole warps: Threads must be a positive multiple of 32");
  static_assert(Threads <= 1024, "a named barrier cannot wait for more threads than a block has (1024)");
  static constexpr int id = Id;
  static constexpr int threads = Threads;

#if defined(__CUDACC__)
  TILEKIT_DEVICE static TILEKIT_INLINE void sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(Id), "n"(Threads) : "memory");
  }
  TILEKIT_DEVICE static TILEKIT_INLINE void arrive() {
    asm volatile("bar.arrive %0, %1;" ::"n"(Id), "n"(Threads) : "memory");
  }
#endif
};

#if defined(__CUDACC__)
// Run-time id variants, for ids computed from the warpgroup index (ping-pong). The id must be
// warp-uniform, in 0..15, and threads a multiple of 32.
TILEKIT_DEVICE TILEKIT_INLINE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
TILEKIT_DEVICE TILEKIT_INLINE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
#endif

// The barrier __syncthreads() is, as a type (for templates that take a barrier type, e.g.
// pipeline/scheduler.cuh's atomic_scheduler).
struct block_barrier {
#if defined(__CUDACC__)
  TILEKIT_DEVICE static TILEKIT_INLINE void sync() { __syncthreads(); }
#endif
};

}  // namespace tilekit
