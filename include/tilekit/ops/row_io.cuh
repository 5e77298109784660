#pragma once
// Row chunk <-> registers: the global-memory side of the memory-bound kernels.
//
// A group of `Threads` threads (a warp, a CTA, or one CTA's share of a cluster) holds a chunk of
// one row in registers, as floats (or, for 16-bit rows, as packed pairs: load_row_pairs_aligned,
// store_row_pairs, store_row_from_pairs), between a reduction and the output pass. row_layout
// fixes which columns each thread owns: the chunk is cut into groups of GroupElements consecutive
// columns (one 16-byte vector of the narrowest dtype involved, e.g. 8 for bf16), dealt out
// round-robin so that each warp-wide access is contiguous (coalesced):
//
//   Threads = 4, GroupElements = 8, Groups = 2        (columns of the chunk)
//     thread 0: registers 0..7  = cols   0..7,   registers 8..15 = cols 32..39
//     thread 1: registers 0..7  = cols   8..15,  registers 8..15 = cols 40..47
//     thread 2: registers 0..7  = cols  16..23,  ...
//     thread 3: registers 0..7  = cols  24..31,  registers 8..15 = cols 56..63
//   column(thread, j) = ((j / GroupElements) * Threads + thread) * GroupElements + j % GroupElements
//
// The layout depends only on column indices, never on the dtype or the alignment of the row, so
// x, the weight (bf16 or fp32), the output and the gradient of one row all land in the same
// registers: a group of 8 bf16 is one 16-byte access, of 8 fp32 two 16-byte accesses.
//
// Tails and alignment. `cols` is the number of valid columns of the chunk (any value; <= 0
// means none). A group that lies entirely inside [0, cols) moves with vector accesses; a group
// cut by `cols` moves element by element; registers beyond `cols` are set to `fill` on loads
// (the identity of the reduction that follows, e.g. 0 for a sum) and are never stored. A row
// pointer that is not aligned to the vector access (strided rows whose stride is not a multiple
// of the vector width, or views at an odd column offset) keeps the same register layout, so
// results do not depend on alignment: loads go element by element (rows staged in shared memory
// by a shifted stream are read through shifted_row instead, below), stores too, or, where a
// kernel asks for it (store_row's Realign), as realigned 16-byte units.
//
//   using layout = row_layout<256, 4, vector_elements<bf16>>;     // 256 threads x 32 values
//   float x[layout::elements];
//   load_row<layout>(x, x_row, cols, threadIdx.x);                 // bf16 -> float, 0-filled
//   ...
//   store_row<layout>(y_row, x, cols, threadIdx.x);                // float -> bf16, rounded

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/ptx_memory.cuh"

namespace tilekit {

// Widest single global access (LDG.128 / STG.128).
inline constexpr int max_access_bytes = 16;

// Elements of T in one 16-byte vector: the natural GroupElements for rows of T.
template <class T>
inline constexpr int vector_elements = max_access_bytes / int(sizeof(T));

// The layout above deals the groups round-robin over all `Threads` threads. A layout may also
// deal them over BLOCKS of BlockThreads threads (a divisor of Threads), each block owning a
// stretch of its own: block b = thread / BlockThreads covers BlockGroups x BlockThreads groups
// from column b x block_columns, dealt round-robin over its threads. With blocks of one warp
// (warp_blocked_row_layout below), each warp's columns are one stretch, so lane 31's group g is
// followed by lane 0's group g + 1 of the same warp, not by another warp's lane 0: what the
// realigned stores of unaligned rows exploit (store_row's Realign). Every warp access stays
// contiguous, so loads and stores are coalesced as in the round-robin layout.
//
//   Threads = 64, BlockThreads = 32, GroupElements = 8, Groups = 2
//     warp 0: lane l group 0 = cols 8 l .. 8 l + 7,        group 1 = cols 256 + 8 l ..
//     warp 1: lane l group 0 = cols 512 + 8 l ..,           group 1 = cols 768 + 8 l ..
//
// BlockGroups > Groups describes a PIECE of a wider layout (row_piece below): its first Groups
// groups, the block stride still that of BlockGroups groups.
template <int Threads, int Groups, int GroupElements, int BlockThreads = Threads, int BlockGroups = Groups>
struct row_layout {
  static_assert(Threads >= 1 && Groups >= 1, "row_layout needs at least one thread and one group per thread");
  static_assert(is_pow2(GroupElements) && GroupElements <= max_access_bytes,
                "GroupElements must be a power of two (use vector_elements<T> of the narrowest row dtype)");
  static_assert(BlockThreads >= 1 && Threads % BlockThreads == 0, "row_layout: blocks of threads tile the threads");
  static_assert(BlockGroups >= Groups, "row_layout: a block's stretch holds at least the layout's groups");
  static constexpr int threads = Threads;
  static constexpr int groups = Groups;                   // groups per thread
  static constexpr int group_elements = GroupElements;    // consecutive columns per group
  static constexpr int elements = Groups * GroupElements;  // registers per thread
  static constexpr int block_threads = BlockThreads;
  static constexpr int block_groups = BlockGroups;
  static constexpr int blocks = Threads / BlockThreads;
  static constexpr int block_columns = BlockThreads * BlockGroups * GroupElements;  // a block's stretch
  static constexpr int group_stride = BlockThreads * GroupElements;  // from a thread's group g to g + 1
  // One past the layout's last column (Threads x elements: every column below is held, unless
  // the layout is a piece).
  static constexpr int columns = (blocks - 1) * block_columns + Groups * group_stride;

  // First column of group g of `thread`.
  TILEKIT_HOST_DEVICE static constexpr int group_column(int thread, int g) {
    if constexpr (blocks == 1) return (g * Threads + thread) * GroupElements;
    else return thread / BlockThreads * block_columns + (g * BlockThreads + thread % BlockThreads) * GroupElements;
  }
  // Column (in the chunk) of register j of `thread`.
  TILEKIT_HOST_DEVICE static constexpr int column(int thread, int j) {
    if constexpr (blocks == 1) return ((j / GroupElements) * Threads + thread) * GroupElements + j % GroupElements;
    else return group_column(thread, j / GroupElements) + j % GroupElements;
  }
  // The thread that holds `column` (0 <= column < columns, a column the layout holds; any
  // integer type), unsigned: divisions by powers of two are then shifts.
  template <class Integer>
  TILEKIT_HOST_DEVICE static constexpr uint32_t owner(Integer column) {
    const uint32_t c = uint32_t(column);
    if constexpr (blocks == 1) return c / GroupElements % Threads;
    else return c / block_columns * BlockThreads + c / GroupElements % BlockThreads;
  }
  // Whether every column of `thread` is < cols (no register holds padding): kernels take an
  // unchecked path for such rows and test columns only in the thread that holds the tail.
  TILEKIT_HOST_DEVICE static constexpr bool full(int thread, int cols) {
    return group_column(thread, Groups - 1) + GroupElements <= cols;
  }
};

// Groups dealt over blocks of one warp (see above): each warp's columns are one stretch.
template <int Threads, int Groups, int GroupElements>
using warp_blocked_row_layout = row_layout<Threads, Groups, GroupElements, (Threads < warp_threads ? Threads : warp_threads)>;

// Piece n of a layout: registers [n GroupElements, (n + 1) GroupElements), group n of every
// thread, are exactly the registers of row_piece<Layout> applied to the chunk shifted by
// n x Layout::group_stride columns, so pieces can be loaded, stored and computed one at a time
// with the same row_io functions.
template <class Layout>
using row_piece = std::conditional_t<Layout::blocks == 1, row_layout<Layout::threads, 1, Layout::group_elements>,
                                     row_layout<Layout::threads, 1, Layout::group_elements, Layout::block_threads,
                                                Layout::block_groups>>;

// Cache behaviour of the accesses. normal: default caching (data that other rows reuse, e.g.
// the weight). streaming: ld.global.cs / st.global.cs, evict-first, for data touched exactly
// once, so it does not push reused data out of L2.
enum class cache_policy { normal, streaming };

#if defined(__CUDACC__)

namespace detail {
template <int Bytes>
struct access_word;
template <> struct access_word<2> { using type = unsigned short; };
template <> struct access_word<4> { using type = unsigned int; };
template <> struct access_word<8> { using type = uint2; };
template <> struct access_word<16> { using type = uint4; };

template <cache_policy Policy, class W>
TILEKIT_DEVICE TILEKIT_INLINE W load_word(const W* address) {
  if constexpr (Policy == cache_policy::streaming) return __ldcs(address);
  else return *address;
}
template <cache_policy Policy, class W>
TILEKIT_DEVICE TILEKIT_INLINE void store_word(W* address, W value) {
  if constexpr (Policy == cache_policy::streaming) __stcs(address, value);
  else *address = value;
}

// How a group of GroupElements values of T moves: `accesses` accesses of `bytes` each.
template <class T, int GroupElements>
struct group_access {
  static constexpr int group_bytes = GroupElements * int(sizeof(T));
  static constexpr int bytes = group_bytes < max_access_bytes ? group_bytes : max_access_bytes;
  static constexpr int elements = bytes / int(sizeof(T));  // elements per access
  static constexpr int accesses = group_bytes / bytes;
  using word = typename access_word<bytes>::type;
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "row_io moves 16- or 32-bit elements (bf16, fp16, fp32)");
};

template <class T>
TILEKIT_DEVICE TILEKIT_INLINE bool is_aligned(const T* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}
}  // namespace detail

namespace detail {
// Unpack one access word of T into floats. 16-bit types go through 32-bit halves of the word
// (unpack_pair: a bf16 pair with one shift and one AND), half the instructions of extracting
// each 16-bit value first.
template <class T, class W>
TILEKIT_DEVICE TILEKIT_INLINE void unpack_word(const W& w, float* out) {
  constexpr int n = int(sizeof(W) / sizeof(T));
  if constexpr (is_16bit_float<T> && sizeof(W) % 4 == 0) {
    packed_t<T> pairs[sizeof(W) / 4];
    memcpy(pairs, &w, sizeof(W));
#pragma unroll
    for (int i = 0; i < int(sizeof(W) / 4); ++i) {
      const float2 f = unpack_pair(pairs[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else {
    T e[n];
    memcpy(e, &w, sizeof(W));
#pragma unroll
    for (int i = 0; i < n; ++i) out[i] = convert<float>(e[i]);
  }
}

// The vector path of load_row: `row` is aligned to the access size.
template <class Layout, cache_policy Policy, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_vectors(float (&dst)[Layout::elements], const T* row, int cols, int thread,
                                                    float fill) {
  using access = group_access<T, Layout::group_elements>;
  using word = typename access::word;
  if (Layout::full(thread, cols)) {  // the common case: one test for the whole row
#pragma unroll
    for (int g = 0; g < Layout::groups; ++g)
#pragma unroll
      for (int a = 0; a < access::accesses; ++a) {
        const word w = load_word<Policy>(reinterpret_cast<const word*>(row + Layout::group_column(thread, g)) + a);
        unpack_word<T>(w, dst + g * Layout::group_elements + a * access::elements);
      }
    return;
  }
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g) {
    const int c0 = Layout::group_column(thread, g);
    float* out = dst + g * Layout::group_elements;
    if (c0 + Layout::group_elements <= cols) {
#pragma unroll
      for (int a = 0; a < access::accesses; ++a) {
        const word w = load_word<Policy>(reinterpret_cast<const word*>(row + c0) + a);
        unpack_word<T>(w, out + a * access::elements);
      }
    } else {
#pragma unroll
      for (int i = 0; i < Layout::group_elements; ++i)
        out[i] = c0 + i < cols ? convert<float>(load_word<Policy>(row + c0 + i)) : fill;
    }
  }
}
}  // namespace detail

// Load the thread's registers of a row chunk (see the layout above), converting T -> float.
// `row` = first column of the chunk; registers of columns >= cols get `fill`.
template <class Layout, cache_policy Policy = cache_policy::normal, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row(float (&dst)[Layout::elements], const T* row, int cols, int thread,
                                            float fill = 0.0f) {
  using access = detail::group_access<T, Layout::group_elements>;
  if (detail::is_aligned(row, access::bytes)) {
    detail::load_row_vectors<Layout, Policy>(dst, row, cols, thread, fill);
  } else {
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) {
      const int c = Layout::column(thread, j);
      dst[j] = c < cols ? convert<float>(detail::load_word<Policy>(row + c)) : fill;
    }
  }
}

// load_row for a chunk that is known to start 16-byte aligned (e.g. a row staged in shared
// memory by a row_stream): no run-time alignment test and no element-by-element fallback code,
// which keeps register-hungry kernels from spilling.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_aligned(float (&dst)[Layout::elements], const T* row, int cols, int thread,
                                                    float fill = 0.0f) {
  detail::load_row_vectors<Layout, cache_policy::normal>(dst, row, cols, thread, fill);
}

// The thread's columns of a 16-bit row chunk as raw packed pairs (bf16x2 / f16x2), in the
// layout's order (pair i = registers 2i and 2i + 1 of load_row), not converted: for kernels
// that work on the pairs before they need floats (a max with one HMNMX2 per two elements) or
// convert each pair once, late (unpack_pair in core/dtypes.cuh), so the row costs half the
// registers. The chunk
// starts 16-byte aligned (a staged row, as load_row_aligned); columns >= cols get `fill`.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_pairs_aligned(packed_t<T> (&dst)[Layout::elements / 2], const T* row,
                                                          int cols, int thread, T fill) {
  static_assert(is_16bit_float<T>, "load_row_pairs_aligned: 16-bit rows (bf16, fp16)");
  static_assert(Layout::group_elements % 8 == 0, "load_row_pairs_aligned: groups of whole 16-byte vectors");
  constexpr int vectors = Layout::group_elements / 8;  // 16-byte vectors per group
  constexpr int pairs_per_group = Layout::group_elements / 2;
  if (Layout::full(thread, cols)) {  // the common case: one test for the whole row
#pragma unroll
    for (int g = 0; g < Layout::groups; ++g)
#pragma unroll
      for (int v = 0; v < vectors; ++v) {
        const uint4 w = reinterpret_cast<const uint4*>(row + Layout::group_column(thread, g))[v];
        memcpy(dst + g * pairs_per_group + 4 * v, &w, sizeof(w));
      }
    return;
  }
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g) {
    const int c0 = Layout::group_column(thread, g);
    packed_t<T>* out = dst + g * pairs_per_group;
    if (c0 + Layout::group_elements <= cols) {
#pragma unroll
      for (int v = 0; v < vectors; ++v) {
        const uint4 w = reinterpret_cast<const uint4*>(row + c0)[v];
        memcpy(out + 4 * v, &w, sizeof(w));
      }
    } else {
#pragma unroll
      for (int i = 0; i < pairs_per_group; ++i) {
        const int c = c0 + 2 * i;
        out[i] = make_pair<T>(c < cols ? row[c] : fill, c + 1 < cols ? row[c + 1] : fill);
      }
    }
  }
}

// A row chunk in shared memory that starts `shift` elements past a 16-byte boundary: what a
// row_stream holds for a matrix whose rows are not 16-byte aligned (it copies the aligned
// 16-byte units around each row, so the row keeps its offset inside them). Column c is element
// shift + c of `units`. The loads below read the two aligned units that each 16-byte group
// straddles and funnel-shift the group out of them (2 shared loads per group instead of 1); the
// layout, and so every result, is that of the aligned loads.
template <class T>
struct shifted_row {
  const T* units;  // 16-byte aligned, in shared memory (the loads use ld.shared)
  int shift;       // 0 <= shift < vector_elements<T>; uniform over the threads of a row
  // The chunk `columns` further on (a multiple of vector_elements<T>: a piece of a layout).
  TILEKIT_HOST_DEVICE shifted_row operator+(int columns) const { return {units + columns, shift}; }
  TILEKIT_HOST_DEVICE const T& operator[](int c) const { return units[shift + c]; }
};

namespace detail {
// The thread's groups of a shifted row as 16-byte units: f(g, k, unit) for each unit k of group g
// (columns [group_column(thread, g) + k E, + E)), in order. Full (every unit lies below `cols`,
// or the caller overwrites those past it: overread_row below): straight-line code; otherwise
// units from `cols` on are skipped (a branch per unit; the warp that holds a row's last column)
// and not read. The row is read with ld.shared on its 32-bit shared-window address (through a
// generic pointer each unit cost a 64-bit address and a generic load). (Reading the units past
// `cols` in every load, for straight-line code on both paths, was tried with another form of the
// edge stores and spilled more where kernels sit at the register cap, e.g. the bf16 softmax
// forward at 32K 340 bytes, the LayerNorm backward at 1K 820.)
template <class Layout, bool Full, class T, class F>
TILEKIT_DEVICE TILEKIT_INLINE void for_each_shifted_unit(shifted_row<T> row, int cols, int thread, F f) {
  constexpr int E = vector_elements<T>;
  static_assert(Layout::group_elements % E == 0, "shifted rows move groups of whole 16-byte units");
  constexpr int units_per_group = Layout::group_elements / E;
  const uint32_t units = static_cast<uint32_t>(__cvta_generic_to_shared(row.units));
  const int shift = row.shift * int(sizeof(T));
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g) {
    const int u0 = Layout::group_column(thread, g) / E;
    if (!Full && u0 * E >= cols) continue;
    uint4 lo = ptx::ld_shared_16(units + 16 * u0);
#pragma unroll
    for (int k = 0; k < units_per_group; ++k) {
      if (!Full && (u0 + k) * E >= cols) break;
      const uint4 hi = ptx::ld_shared_16(units + 16 * (u0 + k + 1));
      f(g, k, funnel_bytes(lo, hi, shift));
      lo = hi;
    }
  }
}

// Whether every thread of the warp holds its columns of the row whole (Layout::full): then the
// warp takes the shifted loads' path with no column tests; otherwise all its threads take the
// tested one, so that the warp does not run both, one after the other.
template <class Layout>
TILEKIT_DEVICE TILEKIT_INLINE bool warp_full(int thread, int cols) {
  return __all_sync(__activemask(), Layout::full(thread, cols));
}
}  // namespace detail

// A shifted row with its warp's vote taken once (vote_rows below): whether every lane of the
// warp holds its columns of a whole layout (Layout::full). load_row_aligned of any piece of it
// then skips the vote that each load of a shifted_row takes, for an op that loads its row piece
// by piece (the norms backward: 16 or more loads per row and thread). Contract, not checked:
// load only with the voted Layout or row_piece<Layout>, at multiples of Layout::group_stride,
// with the voted cols less that offset. Anything else may skip column tests it needs.
template <class T>
struct voted_row {
  shifted_row<T> row;
  bool whole;
  // The piece `columns` further on: the vote holds for every piece of the layout.
  TILEKIT_HOST_DEVICE voted_row operator+(int columns) const { return {row + columns, whole}; }
};

// One vote for K shifted rows of the same layout and columns (x and dy of a row, say).
template <class Layout, class T, int K>
TILEKIT_DEVICE TILEKIT_INLINE void vote_rows(voted_row<T> (&out)[K], const shifted_row<T> (&in)[K], int cols,
                                             int thread) {
  const bool whole = detail::warp_full<Layout>(thread, cols);
#pragma unroll
  for (int i = 0; i < K; ++i) out[i] = {in[i], whole};
}

namespace detail {
// load_row_aligned of a shifted row; `whole`: the warp's vote already taken (voted_row), or every
// unit to be read whatever `cols` (overread_row, which overwrites the columns past it after).
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_shifted_row(float (&dst)[Layout::elements], shifted_row<T> row, bool whole,
                                                    int cols, int thread, float fill) {
  constexpr int E = vector_elements<T>;
  if (whole || warp_full<Layout>(thread, cols)) {
    for_each_shifted_unit<Layout, true>(row, cols, thread, [&](int g, int k, uint4 w) {
      unpack_word<T>(w, dst + g * Layout::group_elements + k * E);
    });
    return;
  }
#pragma unroll
  for (int j = 0; j < Layout::elements; ++j) dst[j] = fill;
  for_each_shifted_unit<Layout, false>(row, cols, thread, [&](int g, int k, uint4 w) {
    float* out = dst + g * Layout::group_elements + k * E;
    unpack_word<T>(w, out);
    const int c0 = Layout::group_column(thread, g) + k * E;
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (c0 + i >= cols) out[i] = fill;
  });
}
}  // namespace detail

// load_row_aligned for a shifted row (see shifted_row): the same registers, columns >= cols
// get `fill`.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_aligned(float (&dst)[Layout::elements], shifted_row<T> row, int cols,
                                                    int thread, float fill = 0.0f) {
  detail::load_shifted_row<Layout>(dst, row, false, cols, thread, fill);
}
// The same for a voted row (voted_row): no vote of its own where the warp's row is whole.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_aligned(float (&dst)[Layout::elements], voted_row<T> row, int cols,
                                                    int thread, float fill = 0.0f) {
  detail::load_shifted_row<Layout>(dst, row.row, row.whole, cols, thread, fill);
}

// load_row_pairs_aligned for a shifted row.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_pairs_aligned(packed_t<T> (&dst)[Layout::elements / 2], shifted_row<T> row,
                                                          int cols, int thread, T fill) {
  static_assert(is_16bit_float<T>, "load_row_pairs_aligned: 16-bit rows (bf16, fp16)");
  constexpr int E = vector_elements<T>;
  if (detail::warp_full<Layout>(thread, cols)) {
    detail::for_each_shifted_unit<Layout, true>(row, cols, thread, [&](int g, int k, uint4 w) {
      memcpy(dst + (g * Layout::group_elements + k * E) / 2, &w, sizeof(w));
    });
    return;
  }
#pragma unroll
  for (int i = 0; i < Layout::elements / 2; ++i) dst[i] = make_pair<T>(fill, fill);
  detail::for_each_shifted_unit<Layout, false>(row, cols, thread, [&](int g, int k, uint4 w) {
    packed_t<T>* out = dst + (g * Layout::group_elements + k * E) / 2;
    T e[E];
    memcpy(e, &w, sizeof(w));
    const int c0 = Layout::group_column(thread, g) + k * E;
#pragma unroll
    for (int i = 0; i < E / 2; ++i)
      out[i] = make_pair<T>(c0 + 2 * i < cols ? e[2 * i] : fill, c0 + 2 * i + 1 < cols ? e[2 * i + 1] : fill);
  });
}

// A shifted row whose loads read every unit of the layout, also those at or past `cols`, in
// straight-line code for every thread, and then overwrite the registers of columns >= cols with
// the fill in the threads that hold such columns (a divergent branch, taken by the lanes of a
// row's tail), unit by unit, so that a unit below `cols` costs one compare. An op asks for it
// with overread(row); the loads of a plain shifted_row skip the units past `cols` instead.
// The units past `cols` lie inside the stage: a row's reads end at most Layout::columns plus one
// unit past its first unit, which is the end of its stage row (row_stream::pitch: one unit more
// than the layout), or, for row r > 0 of a dense item (rows back to back from row 0's shift,
// row 0 in the stage's first unit), at most r cols + Layout::columns + 2E - 1 elements in (E per
// unit), inside the item's rows x pitch. Those units hold another row's columns, stale bytes or
// a test's poison, all overwritten. (For row streams whose layout is their stage row: the row
// kernels'.)
// Why: skipping those units (a branch per unit) serialised the tail's shared loads, and the
// warp that holds a row's tail ran code of its own, 3.4x the instructions of the other warps'
// loads, while they waited for it at the row's reduction (ncu, CE forward + dlogits, bf16 16383
// columns, H100, 2026-12-06: the tail warp's load 1430 stall samples per row, another warp's
// 407). Why not for every kernel: where a kernel sits at the register cap, the straight-line
// reads spill (the norms backward: 0 -> 288-372 spill stores per thread at 32K-256K, up to 17%
// slower; the bf16 softmax forward at 32K and the LayerNorm backward at 1K spilled with an
// earlier form of it). docs/performance_log.md, "The tail warp's loads".
template <class T>
struct overread_row {
  shifted_row<T> row;
};
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE overread_row<T> overread(shifted_row<T> row) {
  return {row};
}

namespace detail {
// After a load of every unit: set(j, keep) for each unit (its first register j) of `thread`
// that holds a column >= cols, keep[i] whether its element i is a column below cols; nothing in
// a thread whose columns all lie below cols (Layout::full).
template <class Layout, int E, class Set>
TILEKIT_DEVICE TILEKIT_INLINE void fill_units_past(int cols, int thread, Set set) {
  if (Layout::full(thread, cols)) return;
#pragma unroll
  for (int j = 0; j < Layout::elements; j += E) {
    const int c0 = Layout::column(thread, j);
    if (c0 + E <= cols) continue;
    bool keep[E];
#pragma unroll
    for (int i = 0; i < E; ++i) keep[i] = c0 + i < cols;
    set(j, keep);
  }
}
}  // namespace detail

// load_row_aligned of an overread row: the registers of load_row_aligned.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_aligned(float (&dst)[Layout::elements], overread_row<T> row, int cols,
                                                    int thread, float fill = 0.0f) {
  constexpr int E = vector_elements<T>;
  detail::load_shifted_row<Layout>(dst, row.row, true, cols, thread, fill);  // as if whole: every unit
  detail::fill_units_past<Layout, E>(cols, thread, [&](int j, const bool (&keep)[E]) {
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (!keep[i]) dst[j + i] = fill;
  });
}

// load_row_pairs_aligned of an overread row.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE void load_row_pairs_aligned(packed_t<T> (&dst)[Layout::elements / 2],
                                                          overread_row<T> row, int cols, int thread, T fill) {
  static_assert(is_16bit_float<T>, "load_row_pairs_aligned: 16-bit rows (bf16, fp16)");
  constexpr int E = vector_elements<T>;
  detail::for_each_shifted_unit<Layout, true>(row.row, cols, thread, [&](int g, int k, uint4 w) {
    memcpy(dst + (g * Layout::group_elements + k * E) / 2, &w, sizeof(w));
  });
  detail::fill_units_past<Layout, E>(cols, thread, [&](int j, const bool (&keep)[E]) {
    T e[E];
    memcpy(e, dst + j / 2, sizeof(e));
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (!keep[i]) e[i] = fill;
    memcpy(dst + j / 2, e, sizeof(e));
  });
}

// Order-free loads, for reductions whose result does not depend on which register holds which
// column (a max, a sum of exponentials or of the values). A shifted row is then read unit by unit
// as it lies in its stage, one ld.shared per 16-byte unit, with no funnel shift (load_row_aligned
// of a shifted row takes two loads, 11 selects and 4 funnel shifts per unit). Register j of
// `thread` holds the element at stage position p = Layout::column(thread, j), column p - shift of
// the chunk. The positions below `shift` (the lead of the first unit, in the thread that owns
// column 0, registers 0 .. shift - 1) lie before the chunk: that thread takes the chunk's tail
// there instead, the element at position Layout::columns + p (the stage row is one unit longer
// than the layout, and a chunk of Layout::columns columns ends `shift` elements into that unit).
// So every column in [0, min(cols, Layout::columns)) lands in exactly one register and every other
// register holds `fill`:
//
//   row_layout<2, 2, 8> (2 threads x 2 groups of 8: 32 columns), bf16, shift 3, cols >= 32:
//   stage positions 3..34 hold columns 0..31. Thread 0 holds positions 0..7 and 16..23:
//   registers 8..15 = columns 13..20; registers 3..7 = columns 0..4, and its lead, registers
//   0..2, the tail's columns 29, 30, 31 (positions 32..34). Thread 1: columns 5..12 and 21..28.
//
// held_columns says which registers hold a column (and which one); for rows that are not shifted
// (a 16-byte aligned pointer) the same calls are the ordered loads above, register j holding
// column(thread, j), so an op's reduction code is the same for both.
template <class Layout, bool Shifted>
struct held_columns {
  int end;        // one past the last stage position that holds a column
  int shift = 0;  // Shifted only: the chunk's column 0 is stage position `shift`
  // Whether register j of `thread` holds a column (else it holds `fill`).
  TILEKIT_HOST_DEVICE constexpr bool holds(int thread, int j) const {
    const int p = Layout::column(thread, j);
    // Only registers of group 0 can lie below shift (< one 16-byte unit <= a group); in unrolled
    // loops j is a constant, so the other registers cost one compare.
    if constexpr (Shifted)
      if (j < Layout::group_elements && p < shift) return Layout::columns + p < end;
    return p < end;
  }
  // The column that register j of `thread` holds, where holds(thread, j).
  TILEKIT_HOST_DEVICE constexpr int column(int thread, int j) const {
    const int p = Layout::column(thread, j);
    if constexpr (Shifted)
      return p < shift ? Layout::columns + p - shift : p - shift;
    return p;
  }
  // Whether every register of `thread` holds a column.
  TILEKIT_HOST_DEVICE constexpr bool all(int thread) const {
    if constexpr (Shifted)
      if (shift != 0 && uint32_t(thread) == Layout::owner(0) && end < Layout::columns + shift) return false;
    return Layout::full(thread, end);
  }
  // all() for every thread of the warp: the test a reduction takes its unchecked path on, for the
  // whole warp or not at all. Chosen per thread, a warp with one thread of padding (every shifted
  // row has one, the lead's; so has a row's tail) runs both paths one after the other (ncu, CE
  // forward, bf16 1023 columns, H100, 2026-12-06: 338 of 840 warp instructions per row on one
  // thread).
  TILEKIT_DEVICE TILEKIT_INLINE bool warp_all(int thread) const { return __all_sync(__activemask(), all(thread)); }
};

namespace detail {
// The columns a shifted chunk's order-free load holds (see held_columns).
template <class Layout, class T>
TILEKIT_HOST_DEVICE constexpr held_columns<Layout, true> unordered_columns(shifted_row<T> row, int cols) {
  return {(cols < Layout::columns ? cols : Layout::columns) + row.shift, row.shift};
}
// f(register, unit) for the thread's 16-byte units of a shifted row's stage that lie below
// `end` (stage positions), as they lie: one ld.shared each. Full: every unit lies below end.
template <class Layout, bool Full, class T, class F>
TILEKIT_DEVICE TILEKIT_INLINE void for_each_stage_unit(shifted_row<T> row, int end, int thread, F f) {
  constexpr int E = vector_elements<T>;
  static_assert(Layout::group_elements % E == 0, "shifted rows move groups of whole 16-byte units");
  const uint32_t units = static_cast<uint32_t>(__cvta_generic_to_shared(row.units));
#pragma unroll
  for (int g = 0; g < Layout::groups; ++g)
#pragma unroll
    for (int k = 0; k < Layout::group_elements / E; ++k) {
      const int p = Layout::group_column(thread, g) + k * E;
      if (Full || p < end) f(g * Layout::group_elements + k * E, ptx::ld_shared_16(units + uint32_t(p) * sizeof(T)));
    }
}
// The lead of the first unit (registers 0 .. shift - 1 of the thread that owns column 0; see
// held_columns) takes the chunk's tail from the stage row's extra unit (stage positions
// Layout::columns ..): its first `tail` elements (0 <= tail <= shift: as many as the chunk reaches
// into that unit), the rest of the lead `fill`. Done as the first unit is loaded, so that no more
// of the row is live beside it.
template <class Layout, class T>
struct stage_lead {
  bool here;  // this thread holds the lead, and the shift is not 0
  int shift, tail;
  uint32_t extra;  // the extra unit's shared address
  TILEKIT_DEVICE TILEKIT_INLINE stage_lead(shifted_row<T> row, const held_columns<Layout, true>& held, int thread)
      : here(row.shift != 0 && uint32_t(thread) == Layout::owner(0)),
        shift(row.shift),
        tail(max(0, min(held.end - Layout::columns, row.shift))),
        extra(static_cast<uint32_t>(__cvta_generic_to_shared(row.units + Layout::columns))) {}
  // The extra unit, read whether or not the chunk reaches into it (it lies inside the stage row;
  // blend() takes none of it then).
  TILEKIT_DEVICE TILEKIT_INLINE uint4 tail_unit() const { return ptx::ld_shared_16(extra); }
  // Elements [0, n) from b, the others from a (a per-word select, or a byte permute for 16-bit T).
  TILEKIT_DEVICE TILEKIT_INLINE static uint4 blend(uint4 a, uint4 b, int n) {
    uint32_t x[4], y[4];
    memcpy(x, &a, sizeof(a));
    memcpy(y, &b, sizeof(b));
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if constexpr (sizeof(T) == 4) {
        x[w] = w < n ? y[w] : x[w];
      } else {  // __byte_perm(x, y, s): bytes 0-3 of x, 4-7 of y
        x[w] = __byte_perm(x[w], y[w], (2 * w < n ? 0x54u : 0x10u) | (2 * w + 1 < n ? 0x7600u : 0x3200u));
      }
    }
    uint4 r;
    memcpy(&r, x, sizeof(r));
    return r;
  }
  // The first unit as loaded -> with the lead: the tail's elements, then `fill` up to `shift`.
  TILEKIT_DEVICE TILEKIT_INLINE uint4 operator()(uint4 first, T fill) const {
    T f[vector_elements<T>];
#pragma unroll
    for (int i = 0; i < vector_elements<T>; ++i) f[i] = fill;
    uint4 fills;
    memcpy(&fills, f, sizeof(fills));
    return blend(blend(first, fills, shift), tail_unit(), tail);
  }
};
}  // namespace detail

// Order-free load of a shifted row as floats (see held_columns): columns [0, min(cols,
// Layout::columns)) each in one register, in an order of the row's shift, `fill` elsewhere.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE held_columns<Layout, true> load_row_unordered(float (&dst)[Layout::elements],
                                                                           shifted_row<T> row, int cols, int thread,
                                                                           float fill) {
  constexpr int E = vector_elements<T>;
  const held_columns<Layout, true> held = detail::unordered_columns<Layout>(row, cols);
  const detail::stage_lead<Layout, T> lead(row, held, thread);
  // The lead of unit 0 (registers 0 .. shift - 1) in floats: the tail's elements, then `fill`
  // (`fill` need not be a value of T). After the unit's unpack, which it overwrites; the end mask
  // below leaves it (its positions lie below end).
  auto with_lead = [&](int j) {
    if (j == 0 && lead.here) {
      float tail[E];
      detail::unpack_word<T>(lead.tail_unit(), tail);
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (i < lead.shift) dst[i] = i < lead.tail ? tail[i] : fill;
    }
  };
  // Warp-uniform (as load_row_pairs_unordered): a warp runs one of the two paths, never both.
  if (detail::warp_full<Layout>(thread, held.end)) {
    detail::for_each_stage_unit<Layout, true>(row, held.end, thread, [&](int j, uint4 w) {
      detail::unpack_word<T>(w, dst + j);
      with_lead(j);
    });
  } else {
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) dst[j] = fill;
    detail::for_each_stage_unit<Layout, false>(row, held.end, thread, [&](int j, uint4 w) {
      detail::unpack_word<T>(w, dst + j);
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (Layout::column(thread, j + i) >= held.end) dst[j + i] = fill;
      with_lead(j);
    });
  }
  return held;
}

// Order-free load of a shifted 16-bit row as raw packed pairs (see held_columns and
// load_row_pairs_aligned): register j (element j % 2 of pair j / 2) as in load_row_unordered.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE held_columns<Layout, true> load_row_pairs_unordered(
    packed_t<T> (&dst)[Layout::elements / 2], shifted_row<T> row, int cols, int thread, T fill) {
  static_assert(is_16bit_float<T>, "load_row_pairs_unordered: 16-bit rows (bf16, fp16)");
  constexpr int E = vector_elements<T>;
  const held_columns<Layout, true> held = detail::unordered_columns<Layout>(row, cols);
  const detail::stage_lead<Layout, T> lead(row, held, thread);
  if (detail::warp_full<Layout>(thread, held.end)) {
    detail::for_each_stage_unit<Layout, true>(row, held.end, thread, [&](int j, uint4 w) {
      if (j == 0 && lead.here) w = lead(w, fill);
      memcpy(dst + j / 2, &w, sizeof(w));
    });
  } else {
#pragma unroll
    for (int i = 0; i < Layout::elements / 2; ++i) dst[i] = make_pair<T>(fill, fill);
    detail::for_each_stage_unit<Layout, false>(row, held.end, thread, [&](int j, uint4 w) {
      T e[E];
      memcpy(e, &w, sizeof(w));
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (Layout::column(thread, j + i) >= held.end) e[i] = fill;
      memcpy(&w, e, sizeof(w));
      if (j == 0 && lead.here) w = lead(w, fill);
      memcpy(dst + j / 2, &w, sizeof(w));
    });
  }
  return held;
}

// The same calls for a 16-byte aligned chunk: the ordered loads (register j holds column(thread,
// j)), so that a reduction reads both kinds of stage row alike.
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE held_columns<Layout, false> load_row_unordered(float (&dst)[Layout::elements],
                                                                            const T* row, int cols, int thread,
                                                                            float fill) {
  load_row_aligned<Layout>(dst, row, cols, thread, fill);
  return {cols};
}
template <class Layout, class T>
TILEKIT_DEVICE TILEKIT_INLINE held_columns<Layout, false> load_row_pairs_unordered(
    packed_t<T> (&dst)[Layout::elements / 2], const T* row, int cols, int thread, T fill) {
  load_row_pairs_aligned<Layout>(dst, row, cols, thread, fill);
  return {cols};
}

// Store the thread's registers of a row chunk, converting float -> T (round to nearest even).
// Columns >= cols are not written.
namespace detail {
// One aligned access of a group of floats, converted to T (pairs of 16-bit values convert with
// one cvt.rn.{bf16x2,f16x2}.f32 each).
template <class T, class Access>
TILEKIT_DEVICE TILEKIT_INLINE typename Access::word pack_access(const float* in) {
  T e[Access::elements];
  if constexpr (is_16bit_float<T> && Access::elements % 2 == 0) {
#pragma unroll
    for (int i = 0; i < Access::elements; i += 2) {
      const packed_t<T> p = convert<packed_t<T>>(make_float2(in[i], in[i + 1]));
      memcpy(&e[i], &p, sizeof(p));
    }
  } else {
#pragma unroll
    for (int i = 0; i < Access::elements; ++i) e[i] = convert<T>(in[i]);
  }
  typename Access::word w;
  memcpy(&w, e, sizeof(w));
  return w;
}
template <class T, cache_policy Policy, class Access>
TILEKIT_DEVICE TILEKIT_INLINE void store_access(T* address, const float* in) {
  store_word<Policy>(reinterpret_cast<typename Access::word*>(address), pack_access<T, Access>(in));
}

// Whether store_row can realign the stores of an unaligned row: layouts of whole warps (a
// lane's neighbour holds the next 16-byte unit; blocks of whole warps) with groups of whole
// 16-byte units.
template <class Layout, class T>
inline constexpr bool realigns_stores = Layout::block_threads % warp_threads == 0 &&
                                        (Layout::group_elements * int(sizeof(T))) % max_access_bytes == 0;

// Pieces of a 16-byte unit v stored at p, a 16-byte aligned global address, in at most three
// naturally aligned stores of 8, 4 and 2 bytes: its first `bytes` bytes (prefix), its last
// `bytes` bytes (suffix); 0 <= bytes < 16, a multiple of the element size.
template <cache_policy Policy>
TILEKIT_DEVICE TILEKIT_INLINE void store_unit_prefix(unsigned char* p, uint4 v, int bytes) {
  if (bytes & 8) store_word<Policy>(reinterpret_cast<uint2*>(p), make_uint2(v.x, v.y));
  const int at4 = bytes & 8, at2 = bytes & 12;
  if (bytes & 4) store_word<Policy>(reinterpret_cast<unsigned*>(p + at4), at4 ? v.z : v.x);
  if (bytes & 2) {
    const unsigned w = at2 & 8 ? (at2 & 4 ? v.w : v.z) : (at2 & 4 ? v.y : v.x);
    store_word<Policy>(reinterpret_cast<unsigned short*>(p + at2), static_cast<unsigned short>(w));
  }
}
template <cache_policy Policy>
TILEKIT_DEVICE TILEKIT_INLINE void store_unit_suffix(unsigned char* p, uint4 v, int bytes) {
  const int at2 = 16 - bytes, at4 = 16 - (bytes & 12);  // at2 % 4 == 2 when bytes & 2
  if (bytes & 2) {
    const unsigned w = at2 & 8 ? (at2 & 4 ? v.w : v.z) : (at2 & 4 ? v.y : v.x);
    store_word<Policy>(reinterpret_cast<unsigned short*>(p + at2), static_cast<unsigned short>(w >> 16));
  }
  if (bytes & 4) store_word<Policy>(reinterpret_cast<unsigned*>(p + at4), at4 & 8 ? v.w : v.y);
  if (bytes & 8) store_word<Policy>(reinterpret_cast<uint2*>(p + 8), make_uint2(v.z, v.w));
}
// Elements [lo, hi) of the unit v of T at p (16-byte aligned), one by one.
template <class T, cache_policy Policy>
TILEKIT_DEVICE TILEKIT_INLINE void store_unit_elements(T* p, uint4 v, int lo, int hi) {
  using bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>;
  constexpr int E = max_access_bytes / int(sizeof(T));
  constexpr int per_word = 4 / int(sizeof(T));
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int t = 0; t < E; ++t)
    if (lo <= t && t < hi)
      store_word<Policy>(reinterpret_cast<bits*>(p + t),
                         static_cast<bits>(w[t / per_word] >> (t % per_word * 8 * int(sizeof(T)))));
}

// Writes a row that starts `a` elements (0 < a < E = 16 / sizeof(T)) past a 16-byte boundary as
// realigned 16-byte units, group by group (put(g, values) for g = 0, 1, ..., Layout::groups - 1,
// then finish()), every lane of the warp together. Global unit u of the row holds columns
// [E u - a, E u - a + E), so the lane's unit at column c (columns [c, c + E)) straddles two of
// them. The lane writes the one after: its own last a columns, then the next unit's first E - a,
// funnel-shifted out of the two. The next unit is the lane's own next unit of the group or, after
// the group's last, lane + 1's first (a shuffle); lane 31's is lane 0's first of the NEXT group
// when the warp's groups follow one another (blocks of one warp: `chained`, see row_layout).
// Where the unit after reaches past `cols`, only its columns below `cols` are written
// (store_unit_prefix). A group is written when the next one is put (lane 0 sends lane 31 its new
// unit), so one group is held packed in between.
// Pieces remain at the two ends of each stretch of consecutive units a warp holds (the whole
// layout's columns of the warp when chained, else each group): after the stretch's last unit,
// lane 31 writes only its own last a columns (a prefix), and the head of lane 0's first unit,
// its first E - a columns, is the tail of the unit before (a suffix): at most three naturally
// aligned stores each. Lane 31 writes that head too, from its unit after, whose shuffle wrapped
// around to lane 0's unit, where that unit is the stretch's first (every group a stretch, or one
// group); otherwise (chained groups) lane 0 writes its head itself, once per stretch. So
// each column is written once, by 16-byte stores except at the stretches' ends and at `cols`.
template <class Layout, cache_policy Policy, class T>
class realigned_writer {
  using access = group_access<T, Layout::group_elements>;
  static_assert(access::bytes == max_access_bytes, "realigned_writer: 16-byte units");
  static constexpr int E = access::elements, A = access::accesses;  // per unit; units per group
  static constexpr int size = int(sizeof(T));

 public:
  static constexpr bool chained = Layout::block_threads == warp_threads;
  // Whether lane 31 writes lane 0's head at each stretch's end: lane 0's unit it received there is
  // that of the stretch's first group (every group is a stretch, or there is one group).
  static constexpr bool tail_heads = !chained || Layout::groups == 1;

  TILEKIT_DEVICE TILEKIT_INLINE realigned_writer(T* row, int cols, int thread)
      : a_(int(reinterpret_cast<uintptr_t>(row) % max_access_bytes) / size),
        units_(reinterpret_cast<unsigned char*>(row) - a_ * size),
        cols_(cols),
        thread_(thread),
        lane_(laneid()) {}

  TILEKIT_DEVICE TILEKIT_INLINE void put(int g, const float* in) {
    uint4 unit[A];
#pragma unroll
    for (int k = 0; k < A; ++k) unit[k] = pack_access<T, access>(in + k * E);
    put_units(g, unit);
  }
  // The same for a group already converted to T: its A 16-byte units.
  TILEKIT_DEVICE TILEKIT_INLINE void put_units(int g, const uint4 (&unit)[A]) {
    if constexpr (!chained) {
      write(g, unit, shuffle_unit(unit[0], (lane_ + 1) % warp_threads), true, true);
    } else {
      if (g > 0)
        write(g - 1, held_, shuffle_unit(lane_ == 0 ? unit[0] : held_[0], (lane_ + 1) % warp_threads), false, g == 1);
#pragma unroll
      for (int k = 0; k < A; ++k) held_[k] = unit[k];
    }
  }
  TILEKIT_DEVICE TILEKIT_INLINE void finish() {
    if constexpr (chained)
      write(Layout::groups - 1, held_, shuffle_unit(held_[0], (lane_ + 1) % warp_threads), true, Layout::groups == 1);
  }

 private:
  // Group g's units; `next`: lane + 1's first unit (lane 31: lane 0's, of the next group unless
  // `last`). last: the group ends the warp's stretch; first: it starts it.
  TILEKIT_DEVICE TILEKIT_INLINE void write(int g, const uint4 (&unit)[A], uint4 next, bool last, bool first) const {
    const int shift = (E - a_) * size;  // bytes of the lane's unit before the unit after
    const int c0 = Layout::group_column(thread_, g);
#pragma unroll
    for (int k = 0; k < A; ++k) {
      const int c = c0 + k * E;
      const int begins = c + E - a_;  // the unit after's first column
      const bool edge = last && k + 1 == A && lane_ == warp_threads - 1;
      const uint4 after = funnel_bytes(unit[k], k + 1 < A ? unit[k + 1] : next, shift);
      unsigned char* const after_at = units_ + (c + E) * size;  // (c + E - a) + a elements
      if (!edge && begins + E <= cols_) {
        store_word<Policy>(reinterpret_cast<uint4*>(after_at), after);
        continue;
      }
      // Columns [begins, cols) of the unit after, at most E - 1 (at a stretch's end, the lane's own a).
      store_unit_prefix<Policy>(after_at, after, min(max(cols_ - begins, 0), edge ? a_ : E - 1) * size);
      if constexpr (tail_heads)
        if (edge) head(c0 - (warp_threads - 1) * Layout::group_elements, after);
    }
    if constexpr (!tail_heads)
      if (first && lane_ == 0) head(c0, funnel_bytes(unit[0], unit[0], shift));
  }
  // Columns [h, h + E - a) (a lane 0's first unit's head; those below cols) from bytes
  // [a size, 16) of v into the unit before, which holds columns [h - a, h - a + E).
  TILEKIT_DEVICE TILEKIT_INLINE void head(int h, uint4 v) const {
    unsigned char* const before_at = units_ + h * size;
    const int valid = min(max(cols_ - h, 0), E - a_);
    if (valid == E - a_) store_unit_suffix<Policy>(before_at, v, valid * size);
    else store_unit_elements<T, Policy>(reinterpret_cast<T*>(before_at), v, a_, a_ + valid);
  }

  int a_;
  unsigned char* units_;  // 16-byte aligned: the unit of the row's first column
  int cols_, thread_, lane_;
  uint4 held_[A];  // chained: the group put last, packed
};
}  // namespace detail

// Realign: rows that are not aligned to the vector access are stored as realigned 16-byte units
// (detail::realigned_writer; layouts of whole warps whose lanes all call it) instead of
// element by element. Kernels ask for it where such rows are expected (the row kernels'
// shifted streams), so that the others do not carry its code.
template <class Layout, cache_policy Policy = cache_policy::normal, bool Realign = false, class T>
TILEKIT_DEVICE TILEKIT_INLINE void store_row(T* row, const float (&src)[Layout::elements], int cols, int thread) {
  using access = detail::group_access<T, Layout::group_elements>;
  if (detail::is_aligned(row, access::bytes)) {
    if (Layout::full(thread, cols)) {  // the common case: one test for the whole row
#pragma unroll
      for (int g = 0; g < Layout::groups; ++g)
#pragma unroll
        for (int a = 0; a < access::accesses; ++a)
          detail::store_access<T, Policy, access>(row + Layout::group_column(thread, g) + a * access::elements,
                                                  src + g * Layout::group_elements + a * access::elements);
      return;
    }
#pragma unroll
    for (int g = 0; g < Layout::groups; ++g) {
      const int c0 = Layout::group_column(thread, g);
      const float* in = src + g * Layout::group_elements;
      if (c0 + Layout::group_elements <= cols) {
#pragma unroll
        for (int a = 0; a < access::accesses; ++a)
          detail::store_access<T, Policy, access>(row + c0 + a * access::elements, in + a * access::elements);
      } else {
#pragma unroll
        for (int i = 0; i < Layout::group_elements; ++i)
          if (c0 + i < cols) detail::store_word<Policy>(row + c0 + i, convert<T>(in[i]));
      }
    }
  } else {
    if constexpr (Realign && detail::realigns_stores<Layout, T>) {
      if (__activemask() == ~0u) {  // the shuffles need the whole warp
        detail::realigned_writer<Layout, Policy, T> out(row, cols, thread);
#pragma unroll
        for (int g = 0; g < Layout::groups; ++g) out.put(g, src + g * Layout::group_elements);
        out.finish();
        return;
      }
    }
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) {
      const int c = Layout::column(thread, j);
      if (c < cols) detail::store_word<Policy>(row + c, convert<T>(src[j]));
    }
  }
}

// Store f(x) for each element x of the thread's packed pairs (the layout of
// load_row_pairs_aligned), converted to T like store_row; columns >= cols are not written. The
// floats are computed and stored BlockGroups groups at a time: a block of groups is a layout of
// its own, shifted by its first column, so only one block's floats are live next to the pairs
// (the whole row's floats can push a kernel at its register cap into spills), while
// BlockGroups = Layout::groups computes the whole row first (more independent work in flight,
// where the registers allow it). Realigned rows of layouts whose warps hold consecutive groups
// go one group at a time through the realigned writer instead (pieces only at each warp's ends).
template <class Layout, int BlockGroups = Layout::groups, cache_policy Policy = cache_policy::normal,
          bool Realign = false, class T, class F>
TILEKIT_DEVICE TILEKIT_INLINE void store_row_from_pairs(T* row, const packed_t<T> (&pairs)[Layout::elements / 2], F f,
                                                        int cols, int thread) {
  static_assert(BlockGroups >= 1 && Layout::groups % BlockGroups == 0, "store_row_from_pairs: blocks of whole groups");
  constexpr int V = Layout::group_elements;
  constexpr bool chained = Realign && detail::realigns_stores<Layout, T> && Layout::block_threads == warp_threads;
  if constexpr (chained) {
    if (!detail::is_aligned(row, max_access_bytes) && __activemask() == ~0u) {
      detail::realigned_writer<Layout, Policy, T> out(row, cols, thread);
#pragma unroll
      for (int g = 0; g < Layout::groups; ++g) {
        float values[V];
#pragma unroll
        for (int i = 0; i < V / 2; ++i) {
          const float2 x = unpack_pair(pairs[g * V / 2 + i]);
          values[2 * i] = f(x.x);
          values[2 * i + 1] = f(x.y);
        }
        out.put(g, values);
      }
      out.finish();
      return;
    }
  }
  using block = std::conditional_t<Layout::blocks == 1, row_layout<Layout::threads, BlockGroups, V>,
                                   row_layout<Layout::threads, BlockGroups, V, Layout::block_threads, Layout::block_groups>>;
#pragma unroll
  for (int b = 0; b < Layout::groups / BlockGroups; ++b) {
    float values[block::elements];
#pragma unroll
    for (int i = 0; i < block::elements / 2; ++i) {
      const float2 x = unpack_pair(pairs[b * block::elements / 2 + i]);
      values[2 * i] = f(x.x);
      values[2 * i + 1] = f(x.y);
    }
    const int offset = b * BlockGroups * Layout::group_stride;
    store_row<block, Policy, Realign && !chained>(row + offset, values, cols - offset, thread);
  }
}

// Store the thread's packed pairs (the layout of load_row_pairs_aligned) as they are: what
// store_row_from_pairs stores with f the identity, without unpacking and converting them again.
// For an op that computes its outputs as pairs first, so that its floats are not live at the
// store (the realigned writer's shuffles and pieces need registers of their own).
template <class Layout, cache_policy Policy = cache_policy::normal, bool Realign = false, class T>
TILEKIT_DEVICE TILEKIT_INLINE void store_row_pairs(T* row, const packed_t<T> (&pairs)[Layout::elements / 2], int cols,
                                                   int thread) {
  static_assert(Layout::group_elements % 8 == 0, "store_row_pairs: groups of whole 16-byte vectors");
  constexpr int vectors = Layout::group_elements / 8;  // 16-byte units per group
  constexpr bool chained = Realign && detail::realigns_stores<Layout, T> && Layout::block_threads == warp_threads;
  const auto unit = [&](int g, int v) {
    uint4 w;
    memcpy(&w, pairs + g * Layout::group_elements / 2 + 4 * v, sizeof(w));
    return w;
  };
  if (detail::is_aligned(row, max_access_bytes) && Layout::full(thread, cols)) {
#pragma unroll
    for (int g = 0; g < Layout::groups; ++g)
#pragma unroll
      for (int v = 0; v < vectors; ++v)
        detail::store_word<Policy>(reinterpret_cast<uint4*>(row + Layout::group_column(thread, g)) + v, unit(g, v));
    return;
  }
  if constexpr (chained) {
    if (!detail::is_aligned(row, max_access_bytes) && __activemask() == ~0u) {
      detail::realigned_writer<Layout, Policy, T> out(row, cols, thread);
#pragma unroll
      for (int g = 0; g < Layout::groups; ++g) {
        uint4 units[vectors];
#pragma unroll
        for (int v = 0; v < vectors; ++v) units[v] = unit(g, v);
        out.put_units(g, units);
      }
      out.finish();
      return;
    }
  }
  store_row_from_pairs<Layout, 1, Policy, Realign>(row, pairs, [](float x) { return x; }, cols, thread);
}

#endif  // __CUDACC__

}  // namespace tilekit
