#pragma once
// examples/02_gemm: C = A * B^T in bf16 with fp32 accumulation, written only
// with tilekit primitives. A is M x K, B is N x K (both row-major, K
// contiguous), C is M x N (row-major). Any M, N; K must make 16-byte rows
// (K % 8 == 0), which TMA requires.
//
// Structure (one CTA per SM, persistent, CTAs paired in clusters of 2):
//   warpgroup 0  = producer: one thread streams tiles with TMA into a ring of
//                  shared-memory stages (full/empty mbarriers). The two CTAs of
//                  a cluster compute vertically adjacent output tiles, which
//                  need the same B tile: each CTA loads half of it and
//                  multicasts that half into both CTAs, halving B's L2 traffic.
//   warpgroups 1,2 = consumers: each owns 64 rows of the 128 x 256 output tile,
//                  runs m64n256k16 wgmma on the staged tiles, keeps one wgmma
//                  batch in flight, releases each stage (in both CTAs: the peer
//                  producer writes into it too) once its wgmma is done, and
//                  finally stores its accumulator (bf16) to C.
// Register reallocation moves registers from the producer (which needs few)
// to the consumers (128 accumulator floats per thread).

#include <cuda_runtime.h>

#include "tilekit/tilekit.cuh"

namespace gemm_example {

using namespace tilekit;

// ---- the configuration table --------------------------------------------------
struct config {
  static constexpr int consumers = 2;               // consumer warpgroups
  static constexpr int block_m = 64 * consumers;     // rows of C per tile (64 per warpgroup: wgmma M)
  static constexpr int block_n = 256;                // columns of C per tile (largest wgmma N)
  static constexpr int block_k = 64;                 // 64 bf16 = one 128-byte swizzle row
  static constexpr int stages = 4;                   // 4 x 48 KiB of operands in flight
  static constexpr int cluster = 2;                  // CTAs sharing (multicasting) one B tile
  static constexpr int threads = warpgroup_threads * (1 + consumers);
  static constexpr int producer_registers = 40;      // 40*128 + 232*256 <= 65536 (HOPPER_NOTES 6)
  static constexpr int consumer_registers = 232;
  static constexpr int group_rows = 8;               // tile-order grouping (in cluster rows) for L2 reuse
};

using a_tile = st_bf<config::block_m, config::block_k>;  // this CTA's 128 rows of A
using b_tile = st_bf<config::block_n, config::block_k>;  // 256 rows of B (K-major)
template <int Cluster>
using b_part = st_bf<config::block_n / Cluster, config::block_k>;  // the part of B one CTA loads
using a_slice = st_bf<64, config::block_k>;                                  // one consumer's rows of A
using accumulator = rt_fl<16, config::block_n>;  // one warp's 16 rows of a 64 x 256 wgmma

struct shared_storage_t {
  a_tile a[config::stages];
  b_tile b[config::stages];
  stage_barriers<config::stages> barriers;
};

struct gemm_args {
  const bf16* a = nullptr;  // M x K, row stride lda
  const bf16* b = nullptr;  // N x K, row stride ldb
  bf16* c = nullptr;        // M x N, row stride ldc
  int m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (k, k, n)
};

// Cluster = CTAs that share one B tile (config::cluster; 1 turns multicast off, for comparison).
template <int Cluster>
__global__ void __cluster_dims__(Cluster, 1, 1) __launch_bounds__(config::threads, 1)
    gemm_kernel(const __grid_constant__ tma_map<a_tile> a_map, const __grid_constant__ tma_map<b_part<Cluster>> b_map,
                const gl<bf16> c, int k_tiles, int m_tiles, int n_tiles) {
  shared_storage_t& s = shared_storage<shared_storage_t>();
  constexpr uint16_t whole_cluster = (1u << Cluster) - 1;
  if (threadIdx.x == 0) {
    // empty[s] counts the consumers of every CTA whose producer writes into stage s.
    s.barriers.init(/*producer arrivals*/ 1, /*consumer arrivals*/ config::consumers * Cluster);
    init_barriers_fence();
  }
  cluster::sync();  // barrier inits are visible cluster-wide before any multicast

  // The cluster takes tile pairs: rows 2p and 2p+1 of C tiles (one per CTA), same column.
  const int rank = int(cluster::rank());
  const int pair_rows = ceil_div(m_tiles, Cluster);
  const static_scheduler tiles = cluster_scheduler(pair_rows * n_tiles);
  stage_ring<config::stages> ring;

  if (warpgroupid() == 0) {  // ---------------- producer ----------------
    decrease_registers<config::producer_registers>();
    if (threadIdx.x == 0) {
      for (int t : tiles) {
        const tile_position pair = grouped_tile(t, pair_rows, n_tiles, config::group_rows);
        const int row0 = (pair.row * Cluster + rank) * config::block_m;
        for (int kt = 0; kt < k_tiles; ++kt, ring.advance()) {
          mbarrier& full = producer_acquire(ring, s.barriers);
          full.arrive_expect_tx(transaction_bytes<a_tile, b_tile>);  // own A + all parts of B
          const int k0 = kt * config::block_k;
          tma::load_async(s.a[ring.index], a_map, {.r = row0, .c = k0}, full);
          tma::load_async_multicast(row_block<b_part<Cluster>::rows>(s.b[ring.index], rank), b_map,
                                    {.r = pair.col * config::block_n + rank * b_part<Cluster>::rows, .c = k0}, full,
                                    whole_cluster);
        }
      }
    }
  } else {  // ---------------- consumers ----------------
    increase_registers<config::consumer_registers>();
    const int consumer = warpgroupid() - 1;
    const bool leader = threadIdx.x % warpgroup_threads == 0;
    accumulator acc;
    for (int t : tiles) {
      const tile_position pair = grouped_tile(t, pair_rows, n_tiles, config::group_rows);
      stage_ring<config::stages> in_flight = ring;  // the stage whose wgmma may still be running
      // Zeroing once (instead of mm_ABt on the first step) keeps a single wgmma
      // code path: two paths make ptxas insert warpgroup waits (C7519).
      warp::zero(acc);
      for (int kt = 0; kt < k_tiles; ++kt) {
        consumer_wait(ring, s.barriers);
        warpgroup::mma_fence(acc);
        warpgroup::mma_ABt(acc, row_block<a_slice::rows>(s.a[ring.index], consumer), s.b[ring.index]);
        warpgroup::mma_commit_group();
        warpgroup::mma_wait<1>();  // the previous batch is done: its stage can be refilled
        if (kt > 0) {
          if (leader) consumer_release_cluster(in_flight, s.barriers, whole_cluster);
          in_flight.advance();
        }
        ring.advance();
      }
      warpgroup::mma_wait<0>(acc);
      if (leader) consumer_release_cluster(in_flight, s.barriers, whole_cluster);
      // Epilogue: the warpgroup writes its 64 rows (bf16, bounds-checked at the tensor
      // edge; the second CTA of a pair past the last row tile writes nothing).
      const int row0 = (pair.row * Cluster + rank) * config::block_m + consumer * a_slice::rows;
      warpgroup::store(c, acc, {.r = row0, .c = pair.col * config::block_n});
    }
  }
  // No CTA may exit while its peer can still multicast into it or arrive on its barriers.
  cluster::sync();
}

// Host API: validates, builds the TMA maps, launches on `stream`. Never synchronizes.
template <int Cluster = config::cluster>
void gemm(const gemm_args& args, cudaStream_t stream = nullptr) {
  TILEKIT_CHECK_ARG(args.m >= 1 && args.n >= 1 && args.k >= 1, "M, N, K must be >= 1, got ", args.m, ", ",
                    args.n, ", ", args.k);
  TILEKIT_CHECK_ARG(args.k % 8 == 0, "K must be a multiple of 8 (TMA needs 16-byte rows), got ", args.k);
  const int64_t lda = args.lda ? args.lda : args.k, ldb = args.ldb ? args.ldb : args.k,
                ldc = args.ldc ? args.ldc : args.n;
  TILEKIT_CHECK_ARG(lda >= args.k && ldb >= args.k && ldc >= args.n, "leading dimensions must be >= the row length");
  const device_info dev = query_device();
  TILEKIT_CHECK_ARG(dev.is_hopper(), "this GEMM needs an sm_90 GPU, device ", dev.ordinal, " is sm_", dev.cc_major,
                    dev.cc_minor);

  const auto a = make_gl(const_cast<bf16*>(args.a), {args.m, args.k}, {lda, 1});
  const auto b = make_gl(const_cast<bf16*>(args.b), {args.n, args.k}, {ldb, 1});
  const auto c = make_gl(args.c, {args.m, args.n}, {ldc, 1});
  validate(a, "A", 16);
  validate(b, "B", 16);
  validate(c, "C");
  const auto a_map = make_tma_map<a_tile>(a);
  const auto b_map = make_tma_map<b_part<Cluster>>(b);

  const int m_tiles = ceil_div(args.m, config::block_m);
  const int n_tiles = ceil_div(args.n, config::block_n);
  const int k_tiles = ceil_div(args.k, config::block_k);
  constexpr size_t smem = shared_storage_bytes<shared_storage_t>;
  static_assert(smem <= 227 * 1024, "shared storage exceeds the 227 KiB a block can use on Hopper");
  TILEKIT_CHECK_CUDA(
      cudaFuncSetAttribute(gemm_kernel<Cluster>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Whole clusters, at most one CTA per SM, no more clusters than tile pairs.
  const int pairs = ceil_div(m_tiles, Cluster) * n_tiles;
  const int grid = std::min(dev.sm_count / Cluster, pairs) * Cluster;
  gemm_kernel<Cluster><<<grid, config::threads, smem, stream>>>(a_map, b_map, c, k_tiles, m_tiles, n_tiles);
  TILEKIT_CHECK_LAUNCH("gemm_kernel");
}

}  // namespace gemm_example
