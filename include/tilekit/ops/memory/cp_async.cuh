#pragma once
// cp.async (sm_80+): asynchronous global -> shared copies that bypass the
// registers. The protocol, per thread:
//
//   cp_async_16(...) x n      issue copies (they join the thread's open group)
//   cp_async_commit()         close the group
//   cp_async_wait<N>()        block until at most N of this thread's groups are
//                             still in flight (N = 0: all of them landed)
//   barrier                   only now may OTHER threads read what this thread
//                             copied: wait_group covers the issuing thread alone
//
// Tile-level copies (group<N>::load_async in global_shared.cuh) issue one
// 16-byte copy per thread per chunk; a pipeline commits one group per stage
// and waits with N = stages - 1.

#include <cstdint>

#include "tilekit/core/util.cuh"

#if defined(__CUDACC__)
namespace tilekit::ptx {

// Bytes moved by one cp.async.cg (the .cg form, which caches in L2 only,
// exists only with a 16-byte copy size).
inline constexpr int cp_async_bytes = 16;

// Copy 16 bytes global -> shared. Only the first `src_bytes` (1..16) bytes are
// read from global; the rest of the 16-byte destination is zero-filled, which
// is how a chunk crossing the tensor's right edge is copied without reading
// past it. `src` must be a 16-byte aligned global address, `dst_address` a
// 16-byte aligned shared-window address. (Chunks entirely outside the tensor
// are zeroed with a plain shared store by the callers, so no global address
// is ever formed for them.)
TILEKIT_DEVICE TILEKIT_INLINE void cp_async_16(uint32_t dst_address, const void* src, uint32_t src_bytes) {
  const uint64_t global_address = static_cast<uint64_t>(__cvta_generic_to_global(src));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst_address), "l"(global_address),
               "r"(src_bytes)
               : "memory");
}

// Close this thread's current group of cp.async copies.
TILEKIT_DEVICE TILEKIT_INLINE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Wait until at most `Pending` committed groups of this thread are unfinished.
template <int Pending>
TILEKIT_DEVICE TILEKIT_INLINE void cp_async_wait() {
  static_assert(Pending >= 0, "cp.async.wait_group takes a non-negative number of pending groups");
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

}  // namespace tilekit::ptx
#endif  // __CUDACC__
