#pragma once
// mbarrier: the shared-memory barrier that TMA, st.async and producer/consumer pipelines
// complete on.
//
// An mbarrier is an opaque 8-byte object in shared memory (HOPPER_NOTES 4.1). It counts two
// things per phase:
//   * pending arrivals: reloaded from the init() count at the start of every phase;
//     arrive() takes one away;
//   * a transaction count in bytes: expect_tx(n) adds n, and every TMA load / st.async that
//     names the barrier subtracts the bytes it delivered (complete_tx).
// A phase completes when both reach zero; the barrier then flips its phase bit and starts
// the next phase. Waiting is by parity: wait(p) returns once the phase with parity p has
// completed. A fresh barrier is in phase 0, so wait(1) returns at once and wait(0) blocks
// until the first completion (HOPPER_NOTES 4.3).
//
// Typical TMA use (one thread arms the barrier, everyone waits):
//
//   struct storage { st_bf<64, 64> a; st_bf<64, 64> b; mbarrier loaded; };
//   if (threadIdx.x == 0) s.loaded.init(1);
//   init_barriers_fence(); __syncthreads();
//   phase loaded_phase;
//   if (threadIdx.x == 0) {
//     s.loaded.arrive_expect_tx(transaction_bytes<decltype(s.a), decltype(s.b)>);
//     tma::load_async(s.a, map_a, {.r = row0}, s.loaded);
//     tma::load_async(s.b, map_b, {.r = row0}, s.loaded);
//   }
//   s.loaded.wait(loaded_phase);   // wait_and_flip(loaded_phase) when the barrier is reused
//
// Rules:
//   * init() exactly once by one thread, then init_barriers_fence() and a CTA (or cluster)
//     barrier before anyone else, a TMA unit, or a peer CTA uses it. Re-initialising a live
//     barrier is undefined: invalidate() first.
//   * The transaction count is always the full tile bytes, even when TMA zero-fills
//     out-of-bounds parts of the box (HOPPER_NOTES 3.3): use transaction_bytes<Tiles...>.
//   * Only threads of the owning CTA may wait; peers may only arrive (arrive_remote) or
//     complete transactions (multicast TMA, st.async).
//   * Consume a try_wait() result before arriving on the same barrier yourself
//     (HOPPER_NOTES 4.4).

#include <cstdint>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit {

// Bytes that TMA delivers when it loads one of each of Tiles (shared tiles / vectors): the
// argument of arrive_expect_tx / expect_tx, so that kernels never write byte counts by hand.
// It is each type's payload (Tile::bytes), not sizeof: an sv<float, 1000> is 4000 bytes of
// data in a 4096-byte object (128-byte alignment), and expecting 4096 would never complete.
template <class... Tiles>
inline constexpr uint32_t transaction_bytes = (uint32_t(Tiles::bytes) + ... + 0u);
// Same quantity, spelled as what it is for the reader of a kernel.
template <class... Tiles>
inline constexpr uint32_t bytes_of = transaction_bytes<Tiles...>;

// The largest count init / arrive / expect_tx accept (20 bits, HOPPER_NOTES 4.2).
inline constexpr uint32_t mbarrier_max_count = (1u << 20) - 1;

// The parity a thread waits for next on a barrier it reuses. Kernels keep one per barrier
// (or per ring, see pipeline/stage_ring.cuh) and never compute parities themselves.
struct phase {
  uint32_t bit = 0;
  TILEKIT_HOST_DEVICE constexpr void flip() { bit ^= 1u; }
};

// Suspend-time hint for try_wait, in nanoseconds: the thread may sleep this long inside one
// try_wait before it re-polls. A large value lets the hardware wake the thread when the phase
// completes rather than spinning (CUTLASS uses the same 10 ms value, HOPPER_NOTES 4.4).
inline constexpr uint32_t mbarrier_suspend_hint_ns = 10'000'000;

struct alignas(8) mbarrier {
  uint64_t opaque;

#if defined(__CUDACC__)
  // 32-bit shared-window address of the barrier (what the PTX operands take).
  TILEKIT_DEVICE TILEKIT_INLINE uint32_t address() const {
    return static_cast<uint32_t>(__cvta_generic_to_shared(this));
  }

  // One thread: set the arrival count of every phase (1 .. mbarrier_max_count).
  TILEKIT_DEVICE TILEKIT_INLINE void init(uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(address()), "r"(arrivals) : "memory");
  }

  // Arrive once (release semantics at CTA scope).
  TILEKIT_DEVICE TILEKIT_INLINE void arrive() {
    asm volatile(
        "{\n\t.reg .b64 state;\n\t"
        "mbarrier.arrive.shared::cta.b64 state, [%0];\n\t}" ::"r"(address())
        : "memory");
  }
  // Arrive `count` times at once.
  TILEKIT_DEVICE TILEKIT_INLINE void arrive(uint32_t count) {
    asm volatile(
        "{\n\t.reg .b64 state;\n\t"
        "mbarrier.arrive.shared::cta.b64 state, [%0], %1;\n\t}" ::"r"(address()),
        "r"(count)
        : "memory");
  }

  // Announce `bytes` more of transactions in this phase, then arrive once. The usual way
  // a producer arms a barrier right before issuing its TMA loads.
  TILEKIT_DEVICE TILEKIT_INLINE void arrive_expect_tx(uint32_t bytes) {
    asm volatile(
        "{\n\t.reg .b64 state;\n\t"
        "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}" ::"r"(address()),
        "r"(bytes)
        : "memory");
  }
  // Announce `bytes` more of transactions in this phase without arriving.
  TILEKIT_DEVICE TILEKIT_INLINE void expect_tx(uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(address()), "r"(bytes) : "memory");
  }

  // Has the phase with this parity completed? May suspend the thread for up to the hint.
  TILEKIT_DEVICE TILEKIT_INLINE bool try_wait(uint32_t parity) const {
    uint32_t done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(address()), "r"(parity), "n"(mbarrier_suspend_hint_ns)
        : "memory");
    return done != 0;
  }
  // Non-blocking test of the same condition (never suspends).
  TILEKIT_DEVICE TILEKIT_INLINE bool test_wait(uint32_t parity) const {
    uint32_t done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(address()), "r"(parity)
        : "memory");
    return done != 0;
  }

  // Block until the phase with this parity has completed (acquire semantics: data
  // delivered by the transactions of that phase is visible afterwards).
  TILEKIT_DEVICE TILEKIT_INLINE void wait(uint32_t parity) const {
    while (!try_wait(parity)) {
    }
  }
  TILEKIT_DEVICE TILEKIT_INLINE void wait(phase p) const { wait(p.bit); }
  // Wait for the phase `p` names, then move `p` on to the next phase of this barrier.
  TILEKIT_DEVICE TILEKIT_INLINE void wait_and_flip(phase& p) const {
    wait(p.bit);
    p.flip();
  }

  // Arrive once on the barrier at the same shared offset in the cluster's CTA `cta_rank`
  // (release semantics at cluster scope). Works for cta_rank == own rank too.
  TILEKIT_DEVICE TILEKIT_INLINE void arrive_remote(uint32_t cta_rank) const {
    const uint32_t remote = cluster::map_shared(address(), cta_rank);
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  }

  // Arrive on the peer's barrier as a pure signal: release semantics only at CTA scope, so
  // this thread's earlier memory accesses are NOT made visible to the peer. Right for "I
  // am done reading this stage" (a pipeline consumer after wgmma.wait_group), where the
  // cluster-scope release of arrive_remote would be a costly fence in every main-loop
  // iteration (the 02_gemm main loop ran at 60% of its speed with it, H200 2026-11-29).
  // Use arrive_remote when the peer must see data this thread wrote.
  TILEKIT_DEVICE TILEKIT_INLINE void signal_remote(uint32_t cta_rank) const {
    const uint32_t remote = cluster::map_shared(address(), cta_rank);
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  }

  // Retire the barrier so its 8 bytes may be reused (or re-initialised).
  TILEKIT_DEVICE TILEKIT_INLINE void invalidate() {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(address()) : "memory");
  }
#endif
};
static_assert(sizeof(mbarrier) == 8 && alignof(mbarrier) == 8, "mbarrier must be exactly the hardware's 8 bytes");

#if defined(__CUDACC__)
// Publish barrier inits (by this thread) to the whole cluster, including the async proxy
// (TMA). Follow it with __syncthreads() / cluster::sync() before the barriers are used.
TILEKIT_DEVICE TILEKIT_INLINE void init_barriers_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
#endif

}  // namespace tilekit
