#pragma once
// Producer/consumer stage rings: a ring of `Stages` shared-memory buffers, each guarded by
// a "full" mbarrier (data has landed) and an "empty" mbarrier (consumers are done with it).
//
// Two parts:
//   stage_barriers<Stages>  in shared memory (a member of the kernel's storage struct):
//                           full[Stages], empty[Stages]; one thread calls init().
//   stage_ring<Stages>      in registers, one per thread that walks the ring: which stage
//                           (index) and which lap parity (phase) it is at. Producers and
//                           consumers each keep their own and advance() it after each stage.
//
// Protocol, stage s, lap k (phase = k & 1):
//
//   producer (one thread)                                  consumers
//   ---------------------                                  ---------
//   full = producer_acquire(ring, bars)
//     = wait empty[s] for "lap k-1 released"
//       (first lap: returns at once, HOPPER_NOTES 4.3)
//   full.arrive_expect_tx(transaction_bytes<A, B>)
//   tma::load_async(a[s], ..., full)   ---- bytes ---->    consumer_wait(ring, bars)
//   tma::load_async(b[s], ..., full)                         = wait full[s] for lap k
//   ring.advance()                                         compute on a[s], b[s]
//                                                          (wgmma: wait_group first!)
//        empty[s] <--------- one arrive per consumer ----  consumer_release(ring, bars)
//                                                          ring.advance()
//
//   full[s]  init count = producer_arrivals (usually 1: the thread that arms it); the phase
//            completes when that thread arrived AND all expected bytes landed.
//   empty[s] init count = consumer_arrivals (e.g. one elected thread per consumer warp, or
//            one per consumer warpgroup); the phase completes when all consumers released.
//
// Parities never appear in kernel code: producer_acquire waits with parity phase ^ 1 (a
// fresh barrier reports the phase "before" phase 0 as complete, so the producer's first lap
// does not block) and consumer_wait with parity phase; advance() flips phase when the index
// wraps.
//
// Clusters with multicast: when the producer of CTA j multicasts a stage into CTAs of
// `mask`, its empty[s] must count the consumers of all those CTAs (consumer_arrivals =
// consumers per CTA x CTAs in the mask), and each consumer releases the stage in every CTA
// that writes into its buffer: consumer_release_cluster(ring, bars, writer_mask) arrives
// remotely on empty[s] of each rank in the mask (including itself if present). Producers
// must not exit while peers may still arrive on their barriers: call producer_drain(ring,
// bars) at the end of the producer's loop (or end the kernel with cluster::sync()).

#include <cstdint>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"

namespace tilekit {

template <int Stages>
struct stage_barriers {
  static_assert(Stages >= 1, "a stage ring needs at least one stage");
  static constexpr int stages = Stages;
  mbarrier full[Stages];   // producer -> consumers: stage s holds data of the current lap
  mbarrier empty[Stages];  // consumers -> producer: stage s may be overwritten

#if defined(__CUDACC__)
  // One thread. Then init_barriers_fence() and __syncthreads() / cluster::sync().
  TILEKIT_DEVICE void init(uint32_t producer_arrivals, uint32_t consumer_arrivals) {
#pragma unroll
    for (int s = 0; s < Stages; ++s) {
      full[s].init(producer_arrivals);
      empty[s].init(consumer_arrivals);
    }
  }
#endif
};

template <int Stages>
struct stage_ring {
  static_assert(Stages >= 1, "a stage ring needs at least one stage");
  static constexpr int stages = Stages;
  int index = 0;       // stage this thread works on next
  uint32_t phase = 0;  // lap parity of `index` (flips every time index wraps to 0)

  TILEKIT_HOST_DEVICE constexpr void advance() {
    if (++index == Stages) {
      index = 0;
      phase ^= 1u;
    }
  }
  // Advance by `n` stages (a consumer that skips stages it does not read).
  TILEKIT_HOST_DEVICE constexpr void advance(int n) {
    for (int i = 0; i < n; ++i) advance();
  }
};

#if defined(__CUDACC__)
// Producer: wait until stage ring.index is free, return its full barrier (to arm with
// arrive_expect_tx and to pass to tma::load_async).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE mbarrier& producer_acquire(const stage_ring<Stages>& ring,
                                                         stage_barriers<Stages>& bars) {
  bars.empty[ring.index].wait(ring.phase ^ 1u);
  return bars.full[ring.index];
}

// Producer without TMA (data written by threads, e.g. cp.async or st.shared): after writing
// stage ring.index, arrive on its full barrier. (TMA producers arm it instead.)
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void producer_commit(const stage_ring<Stages>& ring, stage_barriers<Stages>& bars) {
  bars.full[ring.index].arrive();
}

// Consumer: wait until stage ring.index holds this lap's data.
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void consumer_wait(const stage_ring<Stages>& ring, stage_barriers<Stages>& bars) {
  bars.full[ring.index].wait(ring.phase);
}
// Consumer: non-blocking version of consumer_wait (true when the data is there).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE bool consumer_try_wait(const stage_ring<Stages>& ring, stage_barriers<Stages>& bars) {
  return bars.full[ring.index].try_wait(ring.phase);
}

// Consumer: done reading stage ring.index (one arrival; call it from as many threads as the
// empty barriers were initialised for, typically one per warp or warpgroup).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void consumer_release(const stage_ring<Stages>& ring, stage_barriers<Stages>& bars) {
  bars.empty[ring.index].arrive();
}
// Consumer in a cluster: release stage ring.index in the CTA of rank `producer_rank` (the
// CTA whose producer writes into this CTA's stage, e.g. with multicast).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void consumer_release(const stage_ring<Stages>& ring, stage_barriers<Stages>& bars,
                                                    uint32_t producer_rank) {
  bars.empty[ring.index].signal_remote(producer_rank);
}
// Consumer in a cluster: release stage ring.index in every CTA whose bit is set in
// `producer_mask` (bit i = cluster rank i).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void consumer_release_cluster(const stage_ring<Stages>& ring,
                                                            stage_barriers<Stages>& bars, uint32_t producer_mask) {
  // A release only says "done reading" (the data flows the other way), so the arrive needs
  // no cluster-scope ordering: mbarrier::signal_remote.
  for (uint32_t rank = 0; producer_mask != 0; ++rank, producer_mask >>= 1)
    if (producer_mask & 1u) bars.empty[ring.index].signal_remote(rank);
}

// Producer, after its last stage: wait until consumers released every stage once more, so
// that no (remote) consumer can still arrive on this CTA's barriers after it exits. Takes the
// producer's ring by value (it continues from where the producer stopped).
template <int Stages>
TILEKIT_DEVICE TILEKIT_INLINE void producer_drain(stage_ring<Stages> ring, stage_barriers<Stages>& bars) {
#pragma unroll 1
  for (int s = 0; s < Stages; ++s) {
    (void)producer_acquire(ring, bars);
    ring.advance();
  }
}
#endif

}  // namespace tilekit
