#pragma once
// Row streams: rows of global matrices flowing through a ring of shared-memory stages, for
// persistent memory-bound kernels (norms, softmax, cross-entropy).
//
// Why. A memory-bound kernel reaches HBM bandwidth only with enough bytes in flight per SM
// (Little's law: ~4.8 TB/s x ~1 us / 132 SMs = tens of KiB). Loading rows into registers ties
// that amount to the register file and to the phase each CTA is in (load, reduce, store); a
// stream instead keeps `Stages - 1` work items of bulk copies (cp.async.bulk: one per input and
// item for whole rows of a dense matrix, else one per row) in flight while the CTA computes on
// the current one, so the load of the next rows overlaps the reductions and stores of this one,
// whatever the computation's register use.
//
// Shape. A work item is `Rows` consecutive rows; each stage holds, for each of `Inputs`
// matrices of element type T, those rows' chunk of up to `Cols` columns starting at column col0
// (a cluster splits wide rows: each CTA streams its share, e.g. kernels/common/row_kernel.cuh's
// row_cluster_span):
//
//   stage s:  [input 0: row 0 | row 1 | ... | row Rows-1][input 1: ...] ...   (each pitch x T)
//   data(s, input, r) = stage s, input, row r: Cols contiguous elements, 16-byte aligned
//   (shifted streams, below: row r's chunk sits `shift` elements into its stage row, whose
//   pitch is Cols + one 16-byte unit; row(s, input, r, ...) gives it as a shifted_row)
//
// Protocol (one ring per CTA, every thread runs the same loop; see row_kernel in
// kernels/common for the loop that uses it):
//
//   init(consumers): thread 0; then init_barriers_fence() + __syncthreads()/cluster::sync()
//   issue(s, item, ...): thread 0 arms full[s] with the item's byte count and issues one bulk
//                copy per (input, row) that exists, or per input when the item is whole rows of
//                a dense matrix (one contiguous block); rows past the matrix end and empty column
//                chunks are not copied: their bytes are not expected either
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
// after the mbarrier wait, which is what makes the bytes visible (HOPPER_NOTES 3.6). (A shifted
// stream's issuing thread also writes a few elements of the matrix's first and last units with
// ordinary stores, before its arrival on full[s]: the arrival releases them to the waiters.)
// The refill must be issued after every consumer's last ordinary read of the stage: the same
// read-then-overwrite ordering as a consumer's empty-barrier release in a TMA pipeline.
// compute-sanitizer's racecheck follows CTA barriers and mbarriers, but not a fence plus an
// atomic count (it reports such refills as races; see kernels/common/row_kernel.cuh for what
// that means for the row kernel).
//
// Alignment: bulk copies need 16-byte aligned global addresses and byte counts. A matrix whose
// base address, row stride in bytes and chunk bytes are all multiples of 16 (bulk_copyable())
// is copied row chunk by row chunk, each landing 16-byte aligned in its stage row. Any other
// matrix (odd widths such as a 50257-token vocabulary, odd strides, views at an odd column)
// takes a SHIFTED stream (Shifted = true): each row chunk is copied as the aligned 16-byte units
// that hold it, so it lands in the stage as it lies in global memory, `shift` elements past a
// unit boundary, and consumers read it through shifted_row (tilekit/ops/row_io.cuh), which
// realigns each 16-byte group from the two units it straddles. Stage rows are one unit longer
// for it (`pitch`). The units around a chunk hold up to 15 bytes of the neighbouring row or of
// the gap between rows, which are read and ignored: a strided matrix lies in one allocation from
// its first element to its last, so those bytes are inside it. Outside [first element, last
// element] nothing is read: the matrix's first and last units, where they reach beyond it,
// are moved element by element by the issuing thread instead (shifted_span).
//
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/tma.cuh"
#include "tilekit/ops/row_io.cuh"
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
// and for chunks cut at multiples of `chunk_cols` up to `cols`? (16-byte rule above.) Chunks cut
// elsewhere need their cut points 16-byte aligned as well (the row kernel's cluster spans:
// multiples of row_span_granule, static_assert there).
template <class T>
TILEKIT_HOST_DEVICE inline bool bulk_copyable(const T* base, int64_t stride, int64_t cols, int64_t chunk_cols) {
  constexpr int64_t align = 16;
  const int64_t size = int64_t(sizeof(T));
  return reinterpret_cast<uintptr_t>(base) % uintptr_t(align) == 0 && (stride * size) % align == 0 &&
         (cols * size) % align == 0 && (chunk_cols * size) % align == 0;
}

// The copy of elements [first, end) of a matrix that spans [lo, hi) (byte addresses, element
// aligned; lo <= first < end <= hi) into stage memory that starts at the aligned unit `unit0`
// (first rounded down to 16 bytes), each byte landing at its address - unit0: bulk-copy the
// 16-byte units [bulk_begin, bulk_end) (none when bulk_end <= bulk_begin), and move the bytes
// [first, head_end) and [tail_begin, end) element by element. The units [unit0, ceil16(end))
// are bulk-copied whole unless one reaches outside [lo, hi): only the first unit can reach
// below lo and only the last one beyond hi, and those become the element-by-element head and
// tail. Host and device, so that a CPU test checks it for every case.
struct shifted_span {
  uintptr_t unit0, bulk_begin, bulk_end, head_end, tail_begin;
};
TILEKIT_HOST_DEVICE inline shifted_span plan_shifted_span(uintptr_t first, uintptr_t end, uintptr_t lo, uintptr_t hi) {
  constexpr uintptr_t unit = 16;
  const uintptr_t g0 = first / unit * unit, g1 = (end + unit - 1) / unit * unit;
  const bool head_out = g0 < lo, tail_out = g1 > hi;
  shifted_span s;
  s.unit0 = g0;
  s.bulk_begin = head_out ? g0 + unit : g0;
  s.bulk_end = tail_out ? g1 - unit : g1;
  s.head_end = head_out ? (end < g0 + unit ? end : g0 + unit) : first;
  s.tail_begin = tail_out ? (g1 - unit > s.head_end ? g1 - unit : s.head_end) : end;
  return s;
}

template <class T, int Inputs, int Rows, int Cols, int Stages, bool Shifted = false>
struct row_stream {
  static_assert(Inputs >= 1 && Rows >= 1 && Stages >= 1, "a row stream needs inputs, rows and stages");
  static_assert((Cols * sizeof(T)) % 16 == 0, "a stage row must be a whole number of 16-byte bulk-copy units");
  static_assert(!Shifted || sizeof(T) == 2 || sizeof(T) == 4, "shifted streams move 16- or 32-bit elements");
  static constexpr int inputs = Inputs;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;
  static constexpr int stages = Stages;
  static constexpr bool shifted = Shifted;
  static constexpr int unit_elements = 16 / int(sizeof(T));
  // Elements from one stage row to the next: a shifted row chunk spans one unit more.
  static constexpr int pitch = Cols + (Shifted ? unit_elements : 0);
  static constexpr size_t row_bytes = size_t(pitch) * sizeof(T);
  static constexpr size_t stage_bytes = row_bytes * Rows * Inputs;
  // Dynamic shared memory of the stream: the stages, then the full and empty mbarriers of each
  // stage, rounded up to 128 bytes so that whatever a kernel places after the stream stays
  // 16-byte (vector) aligned.
  static constexpr size_t shared_bytes = (stage_bytes * Stages + 2 * sizeof(mbarrier) * Stages + 127) / 128 * 128;

#if defined(__CUDACC__)
  T* data_;           // Stages x Inputs x Rows x pitch
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
    return data_ + ((size_t(stage) * Inputs + input) * Rows + row) * pitch;
  }

  // Thread 0 (or the one thread that refills the stage): load rows
  // [first_row, min(first_row + Rows, total_rows)) x columns [col0, col0 + chunk) of every source
  // into `stage` (chunk <= 0: nothing to copy). `cols`: the matrices' row length (a shifted
  // stream reads nothing past the last row's end).
  TILEKIT_DEVICE TILEKIT_INLINE void issue(int stage, const row_source<T> (&sources)[Inputs], int64_t first_row,
                                           int64_t total_rows, int col0, int chunk, int cols) {
    const int present = int(min(int64_t(Rows), total_rows - first_row));
    if constexpr (Shifted) {
      issue_shifted(stage, sources, first_row, total_rows, present, col0, chunk, cols);
      return;
    }
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

  // Shifted streams: row r of input i of `stage` (the item's rows from first_row, the chunk at
  // col0 of `chunk` columns, as issue() was given them), for shifted_row's loads.
  TILEKIT_DEVICE TILEKIT_INLINE shifted_row<T> row(int stage, int input, int r, const row_source<T>& source,
                                                   int64_t first_row, int col0, int chunk, int cols) const {
    static_assert(Shifted, "row_stream::row: shifted streams (aligned ones: data())");
    const T* start = source.base + (first_row + r) * source.stride + col0;
    const int shift = int(reinterpret_cast<uintptr_t>(start) % 16 / sizeof(T));
    if (dense(source, chunk, cols)) {  // the item's rows back to back from the first row's shift
      const int position = int(reinterpret_cast<uintptr_t>(source.base + first_row * source.stride) % 16 / sizeof(T)) +
                           r * cols;
      return {data(stage, input, 0) + (position - shift), shift};
    }
    return {data(stage, input, r), shift};
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
  // Whole rows of a dense matrix (as in issue()): one copy for the item, its rows back to back.
  TILEKIT_DEVICE TILEKIT_INLINE static bool dense(const row_source<T>& source, int chunk, int cols) {
    return chunk == cols && source.stride == cols;
  }

  // issue() of a shifted stream. Each copy (one per row chunk, or one per input for dense items)
  // is a shifted_span; the element-by-element head and tail are stored before the barrier is
  // armed (the arrival releases them to the waiting threads), the bulk copies after.
  TILEKIT_DEVICE TILEKIT_INLINE void issue_shifted(int stage, const row_source<T> (&sources)[Inputs], int64_t first_row,
                                                   int64_t total_rows, int present, int col0, int chunk, int cols) {
    using bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>;
    // Calls f(destination, first, end, lo, hi) for each copy of the item.
    auto for_each_copy = [&](auto f) {
      if (chunk <= 0) return;
#pragma unroll
      for (int i = 0; i < Inputs; ++i) {
        const row_source<T>& source = sources[i];
        const uintptr_t lo = reinterpret_cast<uintptr_t>(source.base);
        const uintptr_t hi = reinterpret_cast<uintptr_t>(source.base + (total_rows - 1) * source.stride + cols);
        const T* first = source.base + first_row * source.stride + col0;
        if (dense(source, chunk, cols)) {
          f(data(stage, i, 0), reinterpret_cast<uintptr_t>(first),
            reinterpret_cast<uintptr_t>(first + int64_t(present) * cols), lo, hi);
        } else {
          for (int r = 0; r < present; ++r) {
            const T* start = first + r * source.stride;
            f(data(stage, i, r), reinterpret_cast<uintptr_t>(start), reinterpret_cast<uintptr_t>(start + chunk), lo,
              hi);
          }
        }
      }
    };
    uint32_t bytes = 0;
    for_each_copy([&](T* destination, uintptr_t first, uintptr_t end, uintptr_t lo, uintptr_t hi) {
      const shifted_span s = plan_shifted_span(first, end, lo, hi);
      if (s.bulk_end > s.bulk_begin) bytes += uint32_t(s.bulk_end - s.bulk_begin);
      unsigned char* stage_bytes = reinterpret_cast<unsigned char*>(destination);
      auto move = [&](uintptr_t from, uintptr_t to) {
        for (uintptr_t a = from; a < to; a += sizeof(T))
          *reinterpret_cast<bits*>(stage_bytes + (a - s.unit0)) = *reinterpret_cast<const bits*>(a);
      };
      move(first, s.head_end);
      move(s.tail_begin, end);
    });
    full_[stage].arrive_expect_tx(bytes);
    for_each_copy([&](T* destination, uintptr_t first, uintptr_t end, uintptr_t lo, uintptr_t hi) {
      const shifted_span s = plan_shifted_span(first, end, lo, hi);
      if (s.bulk_end > s.bulk_begin)
        tma::load_bytes_async(reinterpret_cast<unsigned char*>(destination) + (s.bulk_begin - s.unit0),
                              reinterpret_cast<const void*>(s.bulk_begin), uint32_t(s.bulk_end - s.bulk_begin),
                              full_[stage]);
    });
  }
#endif
};

}  // namespace tilekit
