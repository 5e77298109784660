#pragma once
// Row streams: rows of global matrices flowing through a ring of shared-memory stages, for
// persistent memory-bound kernels (norms, softmax, cross-entropy).
//
// Why. A memory-bound kernel reaches HBM bandwidth only with enough bytes in flight per SM
// (Little's law: ~4.8 TB/s x ~1 us / 132 SMs = tens of KiB). Loading rows into registers ties
// that amount to the register file and to the phase each CTA is in (load, reduce, store); a
// stream instead keeps `Stages - 1` work items of bulk copies (cp.async.bulk, one instruction
// per row) in flight while the CTA computes on the current one, so the load of the next rows
// overlaps the reductions and stores of this one, whatever the computation's register use.
//
// Shape. A work item is `Rows` consecutive rows; each stage holds, for each of `Inputs`
// matrices of element type T, those rows' `Cols`-column chunk starting at column col0 (a
// cluster splits wide rows: CTA rank r streams columns [r * Cols, (r + 1) * Cols)):
//
//   stage s:  [input 0: row 0 | row 1 | ... | row Rows-1][input 1: ...] ...   (each Cols x T)
//   data(s, input, r) = stage s, input, row r: Cols contiguous elements, 16-byte aligned
//
// Protocol (one ring per CTA, every thread runs the same loop; see row_kernel in
// kernels/common for the loop that uses it):
//
//   init(consumers): thread 0; then init_barriers_fence() + __syncthreads()/cluster::sync()
//   issue(s, item, ...): thread 0 arms full[s] with the item's byte count and issues one bulk
//                copy per (input, row) that exists (rows past the matrix end and empty column
//                chunks are not copied: their bytes are not expected either)
//   wait(ring):  all threads; full[ring.index] for lap ring.phase (stage_ring keeps parities)
//   ... compute on data(ring.index, ...) ...
//   release:     once every consumer is done reading the stage, ONE thread re-issues it for
//                the item Stages ahead: after a CTA barrier; after a fenced count (each warp
//                fences its reads and counts itself out with a shared atomic, the last one
//                refills: what the row kernel does with several row groups per CTA); or after
//                the stage's empty mbarrier: every consumer thread release()s, the refilling
//                thread wait_released() (init(consumers) sets how many arrivals close a lap).
//
// Proxies: the stage is written by the async proxy (bulk copy) and read by ordinary loads
// after the mbarrier wait, which is what makes the bytes visible (HOPPER_NOTES 3.6). The refill
// must be issued after every consumer's last ordinary read of the stage: the same
// read-then-overwrite ordering as a consumer's empty-barrier release in a TMA pipeline.
// compute-sanitizer's racecheck follows CTA barriers and mbarriers, but not a fence plus an
// atomic count (it reports such refills as races; see kernels/common/row_kernel.cuh for what
// that means for the row kernel).
//
// Alignment: bulk copies need 16-byte aligned global addresses and byte counts. A matrix can be
// streamed only when its base address, its row stride in bytes and the chunk bytes of every
// CTA are multiples of 16 (bulk_copyable()); kernels check it on the host and read rows
// straight from global memory otherwise. Nothing outside [row start, row start + cols) is read.

#include <cstddef>
#include <cstdint>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/tma.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/pipeline/stage_ring.cuh"

namespace tilekit {

// One input of a stream: a row-major matrix with `stride` elements between rows.
template <class T>
struct row_source {
  const T* base;
  int64_t stride;
};

// Host check: can rows [*, col0, col0 + chunk) of this matrix be bulk-copied, for every row
// and for chunks cut at multiples of `chunk_cols` up to `cols`? (16-byte rule above.)
template <class T>
TILEKIT_HOST_DEVICE inline bool bulk_copyable(const T* base, int64_t stride, int64_t cols, int64_t chunk_cols) {
  constexpr int64_t align = 16;
  const int64_t size = int64_t(sizeof(T));
  return reinterpret_cast<uintptr_t>(base) % uintptr_t(align) == 0 && (stride * size) % align == 0 &&
         (cols * size) % align == 0 && (chunk_cols * size) % align == 0;
}

template <class T, int Inputs, int Rows, int Cols, int Stages>
struct row_stream {
  static_assert(Inputs >= 1 && Rows >= 1 && Stages >= 1, "a row stream needs inputs, rows and stages");
  static_assert((Cols * sizeof(T)) % 16 == 0, "a stage row must be a whole number of 16-byte bulk-copy units");
  static constexpr int inputs = Inputs;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;
  static constexpr int stages = Stages;
  static constexpr size_t row_bytes = size_t(Cols) * sizeof(T);
  static constexpr size_t stage_bytes = row_bytes * Rows * Inputs;
  // Dynamic shared memory of the stream: the stages, then the full and empty mbarriers of each
  // stage, rounded up to 128 bytes so that whatever a kernel places after the stream stays
  // 16-byte (vector) aligned.
  static constexpr size_t shared_bytes = (stage_bytes * Stages + 2 * sizeof(mbarrier) * Stages + 127) / 128 * 128;

#if defined(__CUDACC__)
  T* data_;           // Stages x Inputs x Rows x Cols
  mbarrier* full_;    // Stages: the stage holds this lap's item (the bulk copies complete it)
  mbarrier* empty_;   // Stages: every consumer released this lap's item (release() only)

  // `memory`: shared_bytes of 16-byte aligned dynamic shared memory.
  TILEKIT_DEVICE TILEKIT_INLINE explicit row_stream(void* memory)
      : data_(static_cast<T*>(memory)),
        full_(reinterpret_cast<mbarrier*>(static_cast<unsigned char*>(memory) + stage_bytes * Stages)),
        empty_(full_ + Stages) {}

  // Thread 0, once; then init_barriers_fence() and a CTA / cluster barrier. `consumers`: the
  // release() calls that close a lap of a stage (unused if the kernel releases otherwise).
  TILEKIT_DEVICE TILEKIT_INLINE void init(uint32_t consumers) {
#pragma unroll
    for (int s = 0; s < Stages; ++s) {
      full_[s].init(1);
      empty_[s].init(consumers);
    }
  }

  TILEKIT_DEVICE TILEKIT_INLINE T* data(int stage, int input, int row) const {
    return data_ + ((size_t(stage) * Inputs + input) * Rows + row) * Cols;
  }

  // Thread 0: load rows [first_row, min(first_row + Rows, total_rows)) x columns
  // [col0, col0 + chunk) of every source into `stage` (chunk <= 0: nothing to copy).
  TILEKIT_DEVICE TILEKIT_INLINE void issue(int stage, const row_source<T> (&sources)[Inputs], int64_t first_row,
                                           int64_t total_rows, int col0, int chunk) {
    const int present = int(min(int64_t(Rows), total_rows - first_row));
    const uint32_t bytes = chunk > 0 ? uint32_t(chunk) * uint32_t(sizeof(T)) : 0u;
    full_[stage].arrive_expect_tx(bytes * uint32_t(present) * Inputs);
#pragma unroll
    for (int i = 0; i < Inputs; ++i) {
      const T* first = sources[i].base + first_row * sources[i].stride + col0;
      if (chunk == Cols && sources[i].stride == Cols) {
        // Whole rows of a dense matrix: the item is one contiguous block in global memory too,
        // laid out exactly like the stage, so one copy moves it. Per-copy overhead dominates
        // small rows: on the H200, 16 copies of 2 KiB per stage streamed 3.1 TB/s, one copy of
        // 32 KiB 4.4 TB/s (bench_row_stream, N = 1024).
        tma::load_bytes_async(data(stage, i, 0), first, bytes * uint32_t(present), full_[stage]);
      } else {
        for (int r = 0; r < present; ++r)
          tma::load_bytes_async(data(stage, i, r), first + r * sources[i].stride, bytes, full_[stage]);
      }
    }
  }

  // All threads: wait until the stage the ring points at holds its data.
  TILEKIT_DEVICE TILEKIT_INLINE void wait(const stage_ring<Stages>& ring) const { full_[ring.index].wait(ring.phase); }
  // Each consumer thread, after its last read of the stage the ring points at (this lap).
  TILEKIT_DEVICE TILEKIT_INLINE void release(const stage_ring<Stages>& ring) const { empty_[ring.index].arrive(); }
  // The refilling thread: wait until every consumer released the stage the ring points at
  // (this lap); then issue() may overwrite it.
  TILEKIT_DEVICE TILEKIT_INLINE void wait_released(const stage_ring<Stages>& ring) const {
    empty_[ring.index].wait(ring.phase);
  }
#endif
};

}  // namespace tilekit
