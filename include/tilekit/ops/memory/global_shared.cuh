#pragma once
// Cooperative global <-> shared copies by a group of threads.
//
//   using g = tilekit::group<256>;           // or warp:: (32), warpgroup:: (128)
//   g::load_async(tile, src, {.b, .d, .r, .c});  // cp.async, 16 B per thread per chunk
//   g::async_commit();                       // close this thread's group of copies
//   g::async_wait<0>();                      // this thread's copies have landed
//   __syncthreads();                         // ... and now everyone's (CALLER syncs)
//
//   g::load(tile, src, origin);              // = load_async + commit + wait<0>
//   g::store(dst, tile, origin);             // 16-B vector stores, predicated
//   g::load(shared_vec, ptr, n);  g::store(ptr, shared_vec, n);
//
// Synchronization contract: every function here only orders the calling
// thread's own accesses. The group (or block) must synchronize before a thread
// reads what another thread wrote: after load/async_wait and before the tile
// is read (ldmatrix, wgmma operands...), and after the tile was last written
// (stmatrix, other warps) before store(). Use __syncthreads() when the group
// is the whole block, or a named barrier for a part of it; wgmma / TMA readers
// additionally need fence.proxy.async (generic -> async proxy).
//
// Thread mapping: group thread t = threadIdx.x % NumThreads (1-D blocks) takes
// the 16-byte chunks t, t + NumThreads, ... of the tile in row-major order, so
// consecutive threads read consecutive 16-byte pieces of a row (coalesced) and
// eight consecutive threads fill one 128-byte swizzle line: their eight chunks
// land in eight distinct bank groups on every swizzle mode (conflict-free).
//
// Edges and alignment: chunks entirely outside the tensor become zeros (a
// 16-byte st.shared, no global access); chunks that cross the right edge copy only
// the in-bounds bytes and zero the rest (src-size < 16). When the view is not
// 16-byte aligned (pointer, tile origin or row stride), 16-byte global
// accesses are impossible and every chunk is gathered element by element
// (synchronous ld.global + one 16-byte st.shared), so any shape and stride
// works, only slower. Stores write full chunks with one 16-byte store and edge
// or misaligned chunks element by element, never outside the tensor.

#include <cstdint>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/memory/bounds.cuh"
#include "tilekit/ops/memory/cp_async.cuh"
#include "tilekit/ops/memory/ptx_memory.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"

#if defined(__CUDACC__)
namespace tilekit {
namespace detail {

// 16 bytes viewed as elements (for the element-wise edge / misaligned paths).
template <class T>
union chunk_of {
  static constexpr int elements = ptx::cp_async_bytes / int(sizeof(T));
  uint4 bits;
  T values[elements];
};

// The chunk layout of a shared tile: 16-byte pieces of its rows.
template <class Shared>
struct tile_chunks {
  using element = typename Shared::element;
  static constexpr int elements_per_chunk = ptx::cp_async_bytes / int(sizeof(element));
  static constexpr int per_row = Shared::row_bytes / ptx::cp_async_bytes;
  static constexpr int total = Shared::rows * per_row;
  // Loop trips for a group of `Threads` (the last one may be partial).
  template <int Threads>
  static constexpr int steps = ceil_div(total, Threads);
  static_assert(Shared::row_bytes % ptx::cp_async_bytes == 0,
                "shared tile rows must be a whole number of 16-byte chunks (st.cuh guarantees it)");
  static_assert(Shared::panel_cols % elements_per_chunk == 0, "a 16-byte chunk must not straddle a swizzle panel");
};

}  // namespace detail

template <int NumThreads>
struct group {
  static_assert(NumThreads > 0 && NumThreads % warp_threads == 0,
                "a copy group is a whole number of warps (32, 128 for a warpgroup, or the block size)");
  static constexpr int threads = NumThreads;

  // This thread's index in the group (1-D blocks: consecutive threads form groups).
  TILEKIT_DEVICE TILEKIT_INLINE static int thread_index() { return int(threadIdx.x % NumThreads); }

  // ---------------------------------------------------------------- tiles

  // Issue cp.async copies of the Rows x Cols window of src at `origin` into dst
  // (zeros outside the tensor). Completes after async_commit + async_wait.
  template <class T, int Rows, int Cols, class U>
  TILEKIT_DEVICE static void load_async(st<T, Rows, Cols>& dst, const gl<U>& src, coord origin) {
    static_assert(std::is_same_v<T, U>,
                  "global -> shared copies do not convert; make the shared and global element types equal "
                  "(convert in registers instead)");
    using chunks = detail::tile_chunks<st<T, Rows, Cols>>;
    const T* tile_origin = src.data + src.offset(origin);
    const int64_t row_stride = src.row_stride();
    const detail::extent in_bounds = detail::clipped_extent<Rows, Cols>(src, origin);
    // cp.async needs 16-byte aligned global chunks: the tile origin and every
    // row start (the row stride) must be 16-B aligned. Warp-uniform.
    const bool vector_ok =
        detail::is_aligned(tile_origin, row_stride * int64_t(sizeof(T)), ptx::cp_async_bytes);
    const uint32_t base = dst.address();
    const int t = thread_index();
#pragma unroll
    for (int step = 0; step < chunks::template steps<NumThreads>; ++step) {
      const int chunk = t + step * NumThreads;
      if (chunks::total % NumThreads != 0 && chunk >= chunks::total) break;
      const int row = chunk / chunks::per_row;
      const int col = (chunk % chunks::per_row) * chunks::elements_per_chunk;
      const uint32_t shared_address = base + st<T, Rows, Cols>::offset(row, col);
      const int valid = row < in_bounds.rows ? min(in_bounds.cols - col, chunks::elements_per_chunk) : 0;
      const T* chunk_src = tile_origin + row * row_stride + col;
      if (valid <= 0) {
        // Entirely outside the tensor: zeros, no global address involved.
        ptx::st_shared_16(shared_address, make_uint4(0, 0, 0, 0));
      } else if (vector_ok) {
        // src-size = the in-bounds bytes; cp.async zero-fills the rest of the chunk.
        ptx::cp_async_16(shared_address, chunk_src, uint32_t(valid * int(sizeof(T))));
      } else {
        detail::chunk_of<T> staged;
#pragma unroll
        for (int e = 0; e < chunks::elements_per_chunk; ++e)
          staged.values[e] = e < valid ? chunk_src[e] : detail::zero<T>();
        ptx::st_shared_16(shared_address, staged.bits);
      }
    }
  }

  // Close this thread's current group of cp.async copies.
  TILEKIT_DEVICE TILEKIT_INLINE static void async_commit() { ptx::cp_async_commit(); }
  // Wait until at most `Pending` of this thread's committed groups are in flight.
  template <int Pending = 0>
  TILEKIT_DEVICE TILEKIT_INLINE static void async_wait() {
    ptx::cp_async_wait<Pending>();
  }

  // Synchronous load: issue, commit, wait for all of this thread's cp.async
  // groups (earlier ones included). The caller still synchronizes the group.
  template <class T, int Rows, int Cols, class U>
  TILEKIT_DEVICE static void load(st<T, Rows, Cols>& dst, const gl<U>& src, coord origin) {
    load_async(dst, src, origin);
    async_commit();
    async_wait<0>();
  }

  // The Rows x Cols window of dst at `origin` <- src (nothing written outside
  // the tensor). The caller synchronizes the group before (src complete).
  template <class U, class T, int Rows, int Cols>
  TILEKIT_DEVICE static void store(const gl<U>& dst, const st<T, Rows, Cols>& src, coord origin) {
    static_assert(std::is_same_v<T, U>,
                  "shared -> global copies do not convert; make the shared and global element types equal");
    using chunks = detail::tile_chunks<st<T, Rows, Cols>>;
    T* tile_origin = dst.data + dst.offset(origin);
    const int64_t row_stride = dst.row_stride();
    const detail::extent in_bounds = detail::clipped_extent<Rows, Cols>(dst, origin);
    const bool vector_ok =
        detail::is_aligned(tile_origin, row_stride * int64_t(sizeof(T)), ptx::vector_access_bytes);
    const uint32_t base = src.address();
    const int t = thread_index();
#pragma unroll
    for (int step = 0; step < chunks::template steps<NumThreads>; ++step) {
      const int chunk = t + step * NumThreads;
      if (chunks::total % NumThreads != 0 && chunk >= chunks::total) break;
      const int row = chunk / chunks::per_row;
      const int col = (chunk % chunks::per_row) * chunks::elements_per_chunk;
      if (row >= in_bounds.rows || col >= in_bounds.cols) continue;
      const int valid = min(in_bounds.cols - col, chunks::elements_per_chunk);
      detail::chunk_of<T> staged;
      staged.bits = ptx::ld_shared_16(base + st<T, Rows, Cols>::offset(row, col));
      T* chunk_dst = tile_origin + row * row_stride + col;
      if (vector_ok && valid == chunks::elements_per_chunk) {
        *reinterpret_cast<uint4*>(chunk_dst) = staged.bits;
      } else {
#pragma unroll
        for (int e = 0; e < chunks::elements_per_chunk; ++e)
          if (e < valid) chunk_dst[e] = staged.values[e];
      }
    }
  }

  // -------------------------------------------------------------- vectors

  // dst[0 .. N) <- src[0 .. n), zeros at index >= n (src is not read there).
  template <class T, int N, class U>
  TILEKIT_DEVICE static void load(sv<T, N>& dst, const U* src, int n) {
    static_assert(std::is_same_v<T, std::remove_const_t<U>>,
                  "global -> shared vector copies do not convert; make the element types equal");
    constexpr int per_chunk = ptx::vector_access_bytes / int(sizeof(T));
    constexpr int chunks = ceil_div(N, per_chunk);
    const bool vector_ok = detail::is_aligned(src, 0, ptx::vector_access_bytes);
    for (int chunk = thread_index(); chunk < chunks; chunk += NumThreads) {
      const int first = chunk * per_chunk;
      const int valid = min(min(n, N) - first, per_chunk);
      if (first + per_chunk <= N) {  // a whole 16-byte chunk of the shared vector
        detail::chunk_of<T> staged;
        if (vector_ok && valid == per_chunk) {
          staged.bits = *reinterpret_cast<const uint4*>(src + first);
        } else {
#pragma unroll
          for (int e = 0; e < per_chunk; ++e) staged.values[e] = e < valid ? src[first + e] : detail::zero<T>();
        }
        ptx::st_shared_16(dst.address() + uint32_t(first * int(sizeof(T))), staged.bits);
      } else {  // the tail of a vector whose byte size is not a multiple of 16
        for (int e = 0; first + e < N; ++e) dst[first + e] = e < valid ? src[first + e] : detail::zero<T>();
      }
    }
  }

  // dst[0 .. n) <- src[0 .. min(n, N)); nothing written at index >= n.
  template <class U, class T, int N>
  TILEKIT_DEVICE static void store(U* dst, const sv<T, N>& src, int n) {
    static_assert(std::is_same_v<T, U>, "shared -> global vector copies do not convert; make the element types equal");
    constexpr int per_chunk = ptx::vector_access_bytes / int(sizeof(T));
    constexpr int chunks = ceil_div(N, per_chunk);
    const bool vector_ok = detail::is_aligned(dst, 0, ptx::vector_access_bytes);
    for (int chunk = thread_index(); chunk < chunks; chunk += NumThreads) {
      const int first = chunk * per_chunk;
      const int valid = min(min(n, N) - first, per_chunk);
      if (valid <= 0) continue;
      if (vector_ok && valid == per_chunk) {
        *reinterpret_cast<uint4*>(dst + first) = ptx::ld_shared_16(src.address() + uint32_t(first * int(sizeof(T))));
      } else {
        for (int e = 0; e < valid; ++e) dst[first + e] = src[first + e];
      }
    }
  }
};

// Scope spellings of the cooperative copies: warp:: is group<32>, warpgroup::
// is group<128>. (The warpgroup namespace also holds the wgmma operations,
// defined in ops/warpgroup/.) One macro stamps out the same forwarding set for
// both scopes, so the two spellings cannot drift apart.
#define TILEKIT_GROUP_COPY_SPELLINGS(SCOPE, THREADS)                                                          \
  namespace SCOPE {                                                                                        \
  template <class T, int Rows, int Cols, class U>                                                          \
  TILEKIT_DEVICE TILEKIT_INLINE void load_async(st<T, Rows, Cols>& dst, const gl<U>& src, coord origin) {   \
    tilekit::group<THREADS>::load_async(dst, src, origin);                                                 \
  }                                                                                                        \
  template <class T, int Rows, int Cols, class U>                                                          \
  TILEKIT_DEVICE TILEKIT_INLINE void load(st<T, Rows, Cols>& dst, const gl<U>& src, coord origin) {         \
    tilekit::group<THREADS>::load(dst, src, origin);                                                       \
  }                                                                                                        \
  template <class U, class T, int Rows, int Cols>                                                          \
  TILEKIT_DEVICE TILEKIT_INLINE void store(const gl<U>& dst, const st<T, Rows, Cols>& src, coord origin) {  \
    tilekit::group<THREADS>::store(dst, src, origin);                                                      \
  }                                                                                                        \
  template <class T, int N, class U>                                                                       \
  TILEKIT_DEVICE TILEKIT_INLINE void load(sv<T, N>& dst, const U* src, int n) {                            \
    tilekit::group<THREADS>::load(dst, src, n);                                                            \
  }                                                                                                        \
  template <class U, class T, int N>                                                                       \
  TILEKIT_DEVICE TILEKIT_INLINE void store(U* dst, const sv<T, N>& src, int n) {                           \
    tilekit::group<THREADS>::store(dst, src, n);                                                           \
  }                                                                                                        \
  TILEKIT_DEVICE TILEKIT_INLINE void async_commit() { tilekit::group<THREADS>::async_commit(); }           \
  template <int Pending = 0>                                                                               \
  TILEKIT_DEVICE TILEKIT_INLINE void async_wait() {                                                        \
    tilekit::group<THREADS>::template async_wait<Pending>();                                               \
  }                                                                                                        \
  }

TILEKIT_GROUP_COPY_SPELLINGS(warp, warp_threads)
TILEKIT_GROUP_COPY_SPELLINGS(warpgroup, warpgroup_threads)
#undef TILEKIT_GROUP_COPY_SPELLINGS

}  // namespace tilekit
#endif  // __CUDACC__
