#pragma once
// TMA (tensor memory accelerator) moves of whole shared tiles, namespace tilekit::tma.
//
// Loads complete on an mbarrier; stores are tracked per thread in "bulk groups":
//
//   // one thread:                                  // everyone:
//   bar.arrive_expect_tx(transaction_bytes<ST>);    bar.wait(ph);   // tile is in smem
//   tma::load_async(tile, map, {.r = r0, .c = c0}, bar);
//
//   // all writers of `tile`:  write it, then tma::fence_shared_for_async(); barrier;
//   // one thread:
//   tma::store_async(map, tile, {.r = r0, .c = c0});
//   tma::store_commit();
//   tma::store_wait_read<0>();   // `tile` may be overwritten (the copy has read it)
//   tma::store_wait<0>();        // the writes are done in global memory (before exit
//                                // is not needed: the kernel's end waits for them)
//
// Coordinates are the element coordinate of the tile's top-left corner, coord{.b,.d,.r,.c}
// (signed: tiles may start before 0 or hang over the end). Loads fill elements outside the
// tensor with zeros (or the map's NaN fill) and still credit the barrier with the full tile
// bytes, so transaction_bytes<ST> is always right. Stores and reduce-stores drop
// out-of-bounds elements, but along the contiguous dimension only at 16-byte granularity
// (measured on an H200): maps used for stores are built with
// {.access = tma_access::load_and_store}, which checks that rows end on 16 bytes.
//
// Wide tiles (ST::panels > 1): one TMA instruction per panel, panel p at column
// origin.c + p * ST::panel_cols into the tile's bytes starting at p * ST::panel_bytes
// (see tiles/tma_descriptor.cuh). The bytes still add up to sizeof(ST).
//
// The map argument must refer to a `const __grid_constant__ tma_map<ST>` kernel parameter
// (or a map in global / constant memory), never a local copy (tiles/tma_descriptor.cuh).
// Destination tiles must be aligned to ST::alignment (st does it by itself).
//
// Multicast (clusters, sm_90a only): load_async_multicast writes the tile at the same shared
// offset in every CTA of `cta_mask` (bit i = cluster rank i) and credits, in each of them,
// the mbarrier at the same offset as `bar`. Every receiving CTA must arm its own barrier
// with the full tile bytes for every multicast it receives.

#include <cstdint>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"
#include "tilekit/tiles/tma_descriptor.cuh"

#if defined(__CUDACC__)
namespace tilekit::tma {

namespace detail {
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE uint64_t map_address(const tma_map<ST>& map) {
  return reinterpret_cast<uint64_t>(&map.map);
}
// Column origin of panel p of a tile whose left edge is at column c.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE int panel_col(int c, int p) {
  return c + p * ST::panel_cols;
}
}  // namespace detail

// Shared tile <- global, completing `bar` with sizeof(ST) bytes. Issue from one thread.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void load_async(ST& dst, const tma_map<ST>& map, coord origin, mbarrier& bar) {
  const uint64_t tmap = detail::map_address(map);
  const uint32_t bar_address = bar.address();
  const uint32_t dst_address = dst.address();
#pragma unroll
  for (int p = 0; p < ST::panels; ++p) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst_address + uint32_t(p * ST::panel_bytes)),
        "l"(tmap), "r"(detail::panel_col<ST>(origin.c, p)), "r"(origin.r), "r"(origin.d), "r"(origin.b),
        "r"(bar_address)
        : "memory");
  }
}

// Shared tile <- global in every CTA of `cta_mask` (bit i = cluster rank i), completing in
// each of them the mbarrier at the same shared offset as `bar`. Issue from one thread of one
// CTA; sm_90a only.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void load_async_multicast(ST& dst, const tma_map<ST>& map, coord origin, mbarrier& bar,
                                                        uint16_t cta_mask) {
#if TILEKIT_SM90A
  const uint64_t tmap = detail::map_address(map);
  const uint32_t bar_address = bar.address();
  const uint32_t dst_address = dst.address();
#pragma unroll
  for (int p = 0; p < ST::panels; ++p) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(dst_address + uint32_t(p * ST::panel_bytes)),
        "l"(tmap), "r"(detail::panel_col<ST>(origin.c, p)), "r"(origin.r), "r"(origin.d), "r"(origin.b),
        "r"(bar_address), "h"(cta_mask)
        : "memory");
  }
#else
  (void)dst, (void)map, (void)origin, (void)bar, (void)cta_mask;
  __trap();  // TMA multicast exists only on sm_90a: build with -gencode arch=compute_90a,code=sm_90a
#endif
}

// Global <- shared tile (out-of-bounds elements dropped). One thread; part of the current
// bulk group (store_commit / store_wait). Writers of `src` must have called
// fence_shared_for_async() and synchronized with the issuing thread first.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void store_async(const tma_map<ST>& map, const ST& src, coord origin) {
  const uint64_t tmap = detail::map_address(map);
  const uint32_t src_address = src.address();
#pragma unroll
  for (int p = 0; p < ST::panels; ++p) {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"
        " [%0, {%1, %2, %3, %4}], [%5];" ::"l"(tmap),
        "r"(detail::panel_col<ST>(origin.c, p)), "r"(origin.r), "r"(origin.d), "r"(origin.b),
        "r"(src_address + uint32_t(p * ST::panel_bytes))
        : "memory");
  }
}

// Global += shared tile, element-wise, performed by the TMA unit (atomic per element with
// respect to other TMA reductions). Same rules as store_async.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void store_add_async(const tma_map<ST>& map, const ST& src, coord origin) {
  const uint64_t tmap = detail::map_address(map);
  const uint32_t src_address = src.address();
#pragma unroll
  for (int p = 0; p < ST::panels; ++p) {
    asm volatile(
        "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
        " [%0, {%1, %2, %3, %4}], [%5];" ::"l"(tmap),
        "r"(detail::panel_col<ST>(origin.c, p)), "r"(origin.r), "r"(origin.d), "r"(origin.b),
        "r"(src_address + uint32_t(p * ST::panel_bytes))
        : "memory");
  }
}

// ---------------------------------------------------------------------------------------------
// Shared vectors: plain bulk copies (no tensor map), e.g. a norm's weight row. The global
// address must be 16-byte aligned and the vector a multiple of 16 bytes; there is no bounds
// handling, so the whole vector must lie inside the allocation.
template <class SV>
inline constexpr bool is_bulk_copyable = is_sv<SV> && SV::bytes % 16 == 0;

// Shared vector <- global (sizeof(SV) bytes from `src`), completing `bar`. One thread.
template <class SV>
TILEKIT_DEVICE TILEKIT_INLINE void load_async(SV& dst, const typename SV::element* src, mbarrier& bar) {
  static_assert(is_bulk_copyable<SV>, "bulk copies move sv<T, N> with N * sizeof(T) a multiple of 16 bytes");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   dst.address()),
               "l"(src), "n"(SV::bytes), "r"(bar.address())
               : "memory");
}

// Raw bulk copy: `bytes` bytes from global `src` to shared `dst`, completing `bar` with the byte
// count (one thread; the caller armed `bar` with arrive_expect_tx for the total). Both addresses
// and `bytes` must be multiples of 16, and every byte must lie inside the source allocation:
// nothing is clipped. A bytes == 0 call is a no-op (nothing is issued).
TILEKIT_DEVICE TILEKIT_INLINE void load_bytes_async(void* dst, const void* src, uint32_t bytes, mbarrier& bar) {
  if (bytes == 0) return;
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(bytes), "r"(bar.address())
               : "memory");
}

// Global <- shared vector (part of the current bulk group). Writers of `src` must have called
// fence_shared_for_async() and synchronized with the issuing thread first.
template <class SV>
TILEKIT_DEVICE TILEKIT_INLINE void store_async(typename SV::element* dst, const SV& src) {
  static_assert(is_bulk_copyable<SV>, "bulk copies move sv<T, N> with N * sizeof(T) a multiple of 16 bytes");
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src.address()),
               "n"(SV::bytes)
               : "memory");
}

// Raw bulk store: `bytes` bytes from shared `src` to global `dst`, part of this thread's current
// bulk group (store_commit / store_wait_read / store_wait as for tiles). Both addresses and
// `bytes` must be multiples of 16; writers of `src` must have called fence_shared_for_async()
// and synchronized with the issuing thread first. A bytes == 0 call is a no-op.
TILEKIT_DEVICE TILEKIT_INLINE void store_bytes_async(void* dst, const void* src, uint32_t bytes) {
  if (bytes == 0) return;
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(bytes)
               : "memory");
}

// Close this thread's not-yet-committed TMA stores into one bulk group.
TILEKIT_DEVICE TILEKIT_INLINE void store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until at most `Pending` of this thread's most recent bulk groups are unfinished
// (their global writes are complete and visible).
template <int Pending = 0>
TILEKIT_DEVICE TILEKIT_INLINE void store_wait() {
  static_assert(Pending >= 0, "Pending counts bulk groups, it cannot be negative");
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(Pending) : "memory");
}
// Wait until at most `Pending` of this thread's most recent bulk groups still read their
// shared source: the shared tiles of the older groups may be overwritten.
template <int Pending = 0>
TILEKIT_DEVICE TILEKIT_INLINE void store_wait_read() {
  static_assert(Pending >= 0, "Pending counts bulk groups, it cannot be negative");
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}

// Bring the descriptor into the TMA unit's cache (e.g. at kernel start, by the producer).
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void prefetch_map(const tma_map<ST>& map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(detail::map_address(map)) : "memory");
}

// Start fetching a tile into L2 without writing shared memory or touching a barrier.
template <class ST>
TILEKIT_DEVICE TILEKIT_INLINE void prefetch_tile(const tma_map<ST>& map, coord origin) {
  const uint64_t tmap = detail::map_address(map);
#pragma unroll
  for (int p = 0; p < ST::panels; ++p) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];" ::"l"(tmap),
                 "r"(detail::panel_col<ST>(origin.c, p)), "r"(origin.r), "r"(origin.d), "r"(origin.b)
                 : "memory");
  }
}

// Order this thread's earlier ordinary shared-memory writes (st.shared, stmatrix) before
// later async-proxy reads of that memory (TMA stores, wgmma). Every writing thread calls
// it, then the writers synchronize, then one thread issues the TMA store (HOPPER_NOTES 3.6).
TILEKIT_DEVICE TILEKIT_INLINE void fence_shared_for_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

}  // namespace tilekit::tma
#endif  // __CUDACC__
