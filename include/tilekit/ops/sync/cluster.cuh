#pragma once
// Thread-block clusters and distributed shared memory (DSMEM), namespace tilekit::cluster.
//
// A cluster is a group of up to 8 CTAs (16 with cudaFuncAttributeNonPortableClusterSizeAllowed)
// that are co-scheduled on one GPC and can read, write and arrive on each other's shared
// memory. Launch with `__cluster_dims__(x, y, z)` on the kernel, or at run time with
// cudaLaunchKernelEx + cudaLaunchAttributeClusterDimension (HOPPER_NOTES 7.1).
//
// Addresses. Every function here that takes a "remote address" wants a 32-bit
// `.shared::cluster` address, i.e. what map_shared() returns. On sm_90 such an address is
// (cta_rank << 24) | offset-in-the-CTA's-window (HOPPER_NOTES 7.3): the same variable in
// every CTA of the cluster sits at the same offset, and map_shared picks the CTA.
//
// Cluster-wide reductions (the DSMEM ladder of the normalization kernels):
//
//   each CTA                                         the receiving CTA (rank k)
//   ---------                                        --------------------------
//   partial = block reduction                        bar.init(1); init_barriers_fence();
//   cluster::sync()  // peers' barriers are ready    cluster::sync()
//   store_remote_async(map_shared(&slot[my_rank], k),  bar.arrive_expect_tx(cluster::size() * sizeof(partial));
//                      partial,                      bar.wait(phase);  // every slot has landed
//                      map_shared(&bar, k));         sum slot[0..size)
//   ...
//   cluster::sync()  // nobody exits while a peer may still write into its memory
//
// st.async credits the receiver's mbarrier with the bytes it wrote (complete_tx), so the
// receiver needs no extra barrier and the sender never waits: data and completion travel
// together. The tx-count may transiently go negative when a store lands before the
// receiver's expect_tx (HOPPER_NOTES 4.2), which is fine.
//
// Exit rule: a CTA must not exit while peers may still access its shared memory (remote
// stores, remote arrives, multicast). End cluster kernels with cluster::sync() or an
// equivalent drain (HOPPER_NOTES 7.4).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"

#if defined(__CUDACC__)
namespace tilekit::cluster {

// Rank of this CTA in its cluster, 0..size()-1 (the rank that map_shared and multicast masks use).
TILEKIT_DEVICE TILEKIT_INLINE uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Number of CTAs in the cluster (1 for a launch without clusters).
TILEKIT_DEVICE TILEKIT_INLINE uint32_t size() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
// Index of this cluster in the grid along x / y / z.
TILEKIT_DEVICE TILEKIT_INLINE uint32_t id_x() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(v));
  return v;
}
TILEKIT_DEVICE TILEKIT_INLINE uint32_t id_y() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(v));
  return v;
}
TILEKIT_DEVICE TILEKIT_INLINE uint32_t id_z() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(v));
  return v;
}
// Number of clusters in the grid along x.
TILEKIT_DEVICE TILEKIT_INLINE uint32_t count_x() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(v));
  return v;
}

// Cluster barrier. Every (non-exited) thread of every CTA in the cluster must take part:
// the `.aligned` forms require all threads of a warp to execute the same instruction.
// arrive() has release semantics and wait() acquire semantics, so shared-memory writes
// before arrive() are visible to every peer after its wait().
TILEKIT_DEVICE TILEKIT_INLINE void arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
// Arrive without ordering memory: only synchronizes control, e.g. right after
// init_barriers_fence(), which already released the barrier inits to the cluster.
TILEKIT_DEVICE TILEKIT_INLINE void arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
TILEKIT_DEVICE TILEKIT_INLINE void wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// arrive() + wait(): a full cluster-wide barrier (also a CTA-wide one).
TILEKIT_DEVICE TILEKIT_INLINE void sync() {
  arrive();
  wait();
}

// The .shared::cluster address of the variable at `local` (a pointer into this CTA's shared
// memory) in the CTA of rank `cta_rank`.
TILEKIT_DEVICE TILEKIT_INLINE uint32_t map_shared(uint32_t local_shared_address, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local_shared_address), "r"(cta_rank));
  return remote;
}
TILEKIT_DEVICE TILEKIT_INLINE uint32_t map_shared(const void* local, uint32_t cta_rank) {
  return map_shared(static_cast<uint32_t>(__cvta_generic_to_shared(local)), cta_rank);
}

namespace detail {
template <class T>
inline constexpr bool is_dsmem_word = sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16;
}  // namespace detail

// Plain (synchronous) load from a peer CTA's shared memory. T: any trivially copyable
// 4-, 8- or 16-byte type (float, int, float2, float4, bf16_2 ...), naturally aligned.
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE T load_remote(uint32_t remote_address) {
  static_assert(detail::is_dsmem_word<T>, "load_remote moves 4, 8 or 16 bytes; pack smaller values into a word");
  T value;
  if constexpr (sizeof(T) == 4) {
    uint32_t w;
    asm volatile("ld.shared::cluster.b32 %0, [%1];" : "=r"(w) : "r"(remote_address) : "memory");
    memcpy(&value, &w, sizeof(T));
  } else if constexpr (sizeof(T) == 8) {
    uint64_t w;
    asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(w) : "r"(remote_address) : "memory");
    memcpy(&value, &w, sizeof(T));
  } else {
    uint32_t w[4];
    asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(remote_address)
                 : "memory");
    memcpy(&value, w, sizeof(T));
  }
  return value;
}

// Plain (synchronous, weak) store into a peer CTA's shared memory; the peer sees it after a
// cluster barrier (arrive has release, wait acquire semantics).
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE void store_remote(uint32_t remote_address, const T& value) {
  static_assert(detail::is_dsmem_word<T>, "store_remote moves 4, 8 or 16 bytes; pack smaller values into a word");
  if constexpr (sizeof(T) == 4) {
    uint32_t w;
    memcpy(&w, &value, sizeof(T));
    asm volatile("st.shared::cluster.b32 [%0], %1;" ::"r"(remote_address), "r"(w) : "memory");
  } else if constexpr (sizeof(T) == 8) {
    uint64_t w;
    memcpy(&w, &value, sizeof(T));
    asm volatile("st.shared::cluster.b64 [%0], %1;" ::"r"(remote_address), "l"(w) : "memory");
  } else {
    uint32_t w[4];
    memcpy(w, &value, sizeof(T));
    asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(remote_address), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

// Asynchronous store into a peer CTA's shared memory that, once written, credits
// sizeof(T) bytes to the peer's mbarrier at `remote_mbarrier_address` (complete_tx). Both
// addresses come from map_shared(..., peer_rank) and must be in the same CTA. The receiver
// arms its barrier with arrive_expect_tx(total bytes it will receive) and waits on it.
// T: a 4-, 8- or 16-byte trivially copyable type, naturally aligned.
template <class T>
TILEKIT_DEVICE TILEKIT_INLINE void store_remote_async(uint32_t remote_address, const T& value,
                                                      uint32_t remote_mbarrier_address) {
  static_assert(detail::is_dsmem_word<T>,
                "store_remote_async moves 4, 8 or 16 bytes; pack smaller values into a word");
  if constexpr (sizeof(T) == 4) {
    uint32_t w;
    memcpy(&w, &value, sizeof(T));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote_address),
                 "r"(w), "r"(remote_mbarrier_address)
                 : "memory");
  } else if constexpr (sizeof(T) == 8) {
    uint64_t w;
    memcpy(&w, &value, sizeof(T));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(remote_address),
                 "l"(w), "r"(remote_mbarrier_address)
                 : "memory");
  } else {
    uint32_t w[4];
    memcpy(w, &value, sizeof(T));
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
            remote_address),
        "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]), "r"(remote_mbarrier_address)
        : "memory");
  }
}

// Host side: clusters launched at run time ----------------------------------------------------
// The configuration of a launch of `ctas` CTAs of `threads` threads in clusters of
// `cluster_ctas` CTAs along x (1: no cluster attribute, an ordinary launch), for
// cudaLaunchKernelEx and cudaOccupancyMaxActiveClusters:
//   cluster::launch_config launch{ctas, 512, 4, shared_bytes, stream};
//   TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(launch.get(), kernel, args...));
// Clusters above 8 CTAs also need allow_wide(kernel) first, once per kernel and device.
class launch_config {
 public:
  launch_config(unsigned ctas, unsigned threads, unsigned cluster_ctas, size_t shared_bytes = 0,
                cudaStream_t stream = nullptr) {
    config_.gridDim = dim3(ctas);
    config_.blockDim = dim3(threads);
    config_.dynamicSmemBytes = shared_bytes;
    config_.stream = stream;
    if (cluster_ctas > 1) {
      attribute_.id = cudaLaunchAttributeClusterDimension;
      attribute_.val.clusterDim.x = cluster_ctas;
      attribute_.val.clusterDim.y = 1;
      attribute_.val.clusterDim.z = 1;
      config_.numAttrs = 1;
    }
  }
  // The configuration; its attribute lives in this object, which must outlive the launch.
  const cudaLaunchConfig_t* get() {
    config_.attrs = config_.numAttrs > 0 ? &attribute_ : nullptr;
    return &config_;
  }

 private:
  cudaLaunchConfig_t config_{};
  cudaLaunchAttribute attribute_{};
};

// Allow `kernel` clusters of more than the portable 8 CTAs (up to 16 on the H100 / H200;
// HOPPER_NOTES 7.1). A per-kernel attribute of the current device.
template <class... Params>
void allow_wide(void (*kernel)(Params...)) {
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

}  // namespace tilekit::cluster
#endif  // __CUDACC__
