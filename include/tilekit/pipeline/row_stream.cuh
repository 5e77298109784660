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
// CTA are multiples of 16 (bulk_copyable()); kernels check it on the host and otherwise move
// each item with copy() (every thread, ordinary loads realigned in registers; no prefetch).
// Either way nothing outside [row start, row start + cols) is read.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

  // Every thread of the CTA (Threads of them), then a CTA barrier before anyone reads the stage:
  // the same rows and columns as issue(), for matrices that bulk copies cannot move (any
  // alignment of T). Stage row r gets the chunk's elements as 16-byte units, unit j = elements
  // [E j, E j + E) (E = 16 / sizeof(T)); the last unit's elements past the chunk become 0.
  //
  // A row that starts `a` elements past a 16-byte boundary is read as the 16-byte units of
  // global memory that hold it: unit k holds the row's elements [E k - a, E k - a + E), so stage
  // unit j is the last E - a elements of unit j and the first a of unit j + 1 (a funnel shift).
  // A warp moves 32 x copy_units consecutive stage units per step: lane l loads units
  // u0 + 32 i + l (i < copy_units; all loads in flight before the first use), takes unit k + 1
  // from lane l + 1 by a shuffle (lane 31 from lane 0 of the next group, the last group's lane
  // 31 loads it), and stores 16 bytes. Units that reach outside the chunk are loaded element by
  // element, so nothing outside the chunk is read. The warps take (input, row, step) jobs in
  // turn, so a 1K-column item of 16 rows keeps every warp busy.
  //
  // Measured (H200, bf16, 2026-12-04, bench_* *_odd, x copy): against the element-by-element
  // copy it replaced (one 2-byte load per thread and step), the direct path's items of 16 rows
  // of 1K columns went from 0.07-0.10 to 0.18-0.28, 4K rows by 8-43%, wider rows mostly by
  // under 10%: there the copy was not what held that path at 0.1-0.4x (docs/performance.md,
  // "Unaligned rows").
  static constexpr int copy_units = 4;
  template <int Threads>
  TILEKIT_DEVICE TILEKIT_INLINE void copy(int stage, const row_source<T> (&sources)[Inputs], int64_t first_row,
                                          int64_t total_rows, int col0, int chunk) const {
    static_assert(Threads % warp_threads == 0, "row_stream::copy: whole warps");
    constexpr int warps = Threads / warp_threads;
    constexpr int step = warp_threads * copy_units;
    if (chunk <= 0) return;
    const int present = int(min(int64_t(Rows), total_rows - first_row));
    const int steps = ceil_div(ceil_div(chunk, unit_elements), step);  // per row
#pragma unroll
    for (int i = 0; i < Inputs; ++i)
      for (int job = warpid(); job < present * steps; job += warps) {
        const int r = job / steps;
        copy_step(data(stage, i, r), sources[i].base + (first_row + r) * sources[i].stride + col0, chunk,
                  job % steps * step);
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

 private:
  static constexpr int unit_elements = 16 / int(sizeof(T));
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "row_stream::copy: 16- or 32-bit elements");
  using bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>;

  // 16-byte unit k of the global row `src` (elements [E k - a, E k - a + E), see copy()), with
  // the elements outside [0, count) as 0 and never read.
  TILEKIT_DEVICE TILEKIT_INLINE static uint4 load_unit(const T* src, int a, int count, int k) {
    constexpr int E = unit_elements;
    const int first = E * k - a;
    if (first >= 0 && first + E <= count)
      return __ldcs(reinterpret_cast<const uint4*>(reinterpret_cast<uintptr_t>(src) - uintptr_t(a) * sizeof(T)) + k);
    bits e[E];
#pragma unroll
    for (int t = 0; t < E; ++t) {
      const int c = first + t;
      e[t] = c >= 0 && c < count ? __ldcs(reinterpret_cast<const bits*>(src) + c) : bits(0);
    }
    uint4 v;
    memcpy(&v, e, sizeof(v));
    return v;
  }

  // Bytes [shift, shift + 16) of lo:hi (shift < 16, a multiple of sizeof(T), warp-uniform).
  TILEKIT_DEVICE TILEKIT_INLINE static uint4 funnel(uint4 lo, uint4 hi, int shift) {
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int words = shift / 4, bits_in = shift % 4 * 8;
    uint32_t s[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) s[i] = words == 0 ? w[i] : words == 1 ? w[i + 1] : words == 2 ? w[i + 2] : w[i + 3];
    return {__funnelshift_r(s[0], s[1], bits_in), __funnelshift_r(s[1], s[2], bits_in),
            __funnelshift_r(s[2], s[3], bits_in), __funnelshift_r(s[3], s[4], bits_in)};
  }

  TILEKIT_DEVICE TILEKIT_INLINE static uint4 shuffle(uint4 v, int lane) {
    return {__shfl_sync(~0u, v.x, lane), __shfl_sync(~0u, v.y, lane), __shfl_sync(~0u, v.z, lane),
            __shfl_sync(~0u, v.w, lane)};
  }

  // One warp: stage units [u0, u0 + 32 x copy_units) of one row (copy()).
  TILEKIT_DEVICE TILEKIT_INLINE static void copy_step(T* dst, const T* src, int count, int u0) {
    constexpr int E = unit_elements;
    const int a = int(reinterpret_cast<uintptr_t>(src) % 16 / sizeof(T));
    const int units = ceil_div(count, E), lane = laneid();
    uint4 unit[copy_units];
#pragma unroll
    for (int i = 0; i < copy_units; ++i) unit[i] = load_unit(src, a, count, u0 + i * warp_threads + lane);
    uint4* out = reinterpret_cast<uint4*>(dst);
    if (a == 0) {  // the row is aligned: unit j is stage unit j
#pragma unroll
      for (int i = 0; i < copy_units; ++i)
        if (const int j = u0 + i * warp_threads + lane; j < units) out[j] = unit[i];
      return;
    }
    const uint4 after = lane == warp_threads - 1 ? load_unit(src, a, count, u0 + copy_units * warp_threads) : uint4{};
#pragma unroll
    for (int i = 0; i < copy_units; ++i) {
      uint4 next = shuffle(unit[i], (lane + 1) % warp_threads);
      if (i + 1 < copy_units) {
        const uint4 first = shuffle(unit[i + 1], 0);
        if (lane == warp_threads - 1) next = first;
      } else if (lane == warp_threads - 1) {
        next = after;
      }
      if (const int j = u0 + i * warp_threads + lane; j < units) out[j] = funnel(unit[i], next, a * int(sizeof(T)));
    }
  }
#endif
};

}  // namespace tilekit
