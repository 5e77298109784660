#pragma once
// Persistent tile schedulers: a grid of about one CTA per SM walks over `total_tiles` output
// tiles, so that launch overhead, prologues (barrier init, descriptor prefetch) and epilogues
// overlap across tiles.
//
//   static_scheduler   tile = blockIdx.x + i * gridDim.x. No communication; best when tiles
//                      cost the same.
//   atomic_scheduler   a CTA takes blockIdx.x first, then the next untaken tile from a global
//                      counter (atomicAdd by one thread, broadcast through shared memory).
//                      Balances tiles of uneven cost (causal attention, variable lengths).
//
//   static_scheduler s{total};
//   for (int t = s.first(); t < s.total_tiles; t = s.next(t)) { ... }     // or
//   for (int t : s) { ... }
//
//   __shared__ int slot[atomic_scheduler<>::broadcast_slots];
//   atomic_scheduler<> s{counter, total, slot};
//   for (int t = s.first(); t < s.total_tiles; t = s.next()) { ... }      // block-collective next()
//
// grouped_tile() turns a linear tile index into (row tile, column tile) so that consecutive
// tiles (run at the same time by neighbouring CTAs) share their input panels in L2.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tilekit/core/util.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/named_barrier.cuh"

namespace tilekit {

// ---------------------------------------------------------------------------------------------
// Tile order with L2 grouping.
//
// Tiles are numbered so that `group_rows` row tiles are walked column by column before the
// next group starts (the last group may be shorter):
//
//   row_tiles = 5, col_tiles = 3, group_rows = 2:
//                col 0  col 1  col 2
//     row 0        0      2      4      group 0
//     row 1        1      3      5
//     row 2        6      8     10      group 1
//     row 3        7      9     11
//     row 4       12     13     14      group 2 (1 row)
//
// With G = group_rows CTAs working on G x (something) tiles at a time, they read G row
// panels of A and a few column panels of B instead of 1 row panel and many B panels.
struct tile_position {
  int row;  // row-tile index
  int col;  // column-tile index
};

TILEKIT_HOST_DEVICE constexpr tile_position grouped_tile(int linear, int row_tiles, int col_tiles, int group_rows) {
  const int tiles_per_group = group_rows * col_tiles;
  const int group = linear / tiles_per_group;
  const int first_row = group * group_rows;
  const int rows_in_group = (row_tiles - first_row) < group_rows ? (row_tiles - first_row) : group_rows;
  const int in_group = linear - group * tiles_per_group;
  return tile_position{first_row + in_group % rows_in_group, in_group / rows_in_group};
}

// Plain row-major order (tile = row * col_tiles + col).
TILEKIT_HOST_DEVICE constexpr tile_position row_major_tile(int linear, int col_tiles) {
  return tile_position{linear / col_tiles, linear % col_tiles};
}

// ---------------------------------------------------------------------------------------------
struct static_scheduler {
  int total_tiles = 0;
  // The unit that takes tiles: by default the CTA (worker = blockIdx.x, workers = gridDim.x);
  // cluster_scheduler() makes it the cluster, so all CTAs of a cluster see the same tiles.
  int worker = -1;
  int workers = -1;

#if defined(__CUDACC__)
  TILEKIT_DEVICE int first() const { return worker >= 0 ? worker : int(blockIdx.x); }
  TILEKIT_DEVICE int stride() const { return workers > 0 ? workers : int(gridDim.x); }
  TILEKIT_DEVICE int next(int tile) const { return tile + stride(); }

  // Range-for support: for (int tile : scheduler) { ... }
  struct iterator {
    int tile;
    int step;
    TILEKIT_DEVICE int operator*() const { return tile; }
    TILEKIT_DEVICE iterator& operator++() {
      tile += step;
      return *this;
    }
    // Only compared against end(): "not done yet".
    TILEKIT_DEVICE bool operator!=(const iterator& end) const { return tile < end.tile; }
  };
  TILEKIT_DEVICE iterator begin() const { return iterator{first(), stride()}; }
  TILEKIT_DEVICE iterator end() const { return iterator{total_tiles, 0}; }
#endif
};

#if defined(__CUDACC__)
// Round-robin over clusters (x-dimension clusters of a 1-D grid): cluster c takes tiles
// c, c + clusters, ...; every CTA of the cluster iterates the same sequence, and uses its
// cluster::rank() to pick its part of the tile.
TILEKIT_DEVICE TILEKIT_INLINE static_scheduler cluster_scheduler(int total_tiles) {
  return static_scheduler{total_tiles, int(cluster::id_x()), int(cluster::count_x())};
}
#endif

// ---------------------------------------------------------------------------------------------
// Dynamic scheduler over a global counter.
//
// The counter counts tiles handed out beyond the first gridDim.x (which CTAs take by their
// blockIdx.x without touching it), so it must be 0 when the kernel starts. Reset it before
// every launch on the launch's stream, e.g. reset_tile_counter(counter, stream)
// (cudaMemsetAsync: stream-ordered, works under graph capture). Two back-to-back kernels on
// different streams need different counters.
//
// next() is collective over the threads that Barrier synchronizes (the whole block with the
// default block_barrier; e.g. named_barrier<1, 256> for two consumer warpgroups of a
// warp-specialized kernel, which then hand the tile to their producer themselves). The
// thread `leader_thread` does the atomicAdd and writes the result into one of two shared
// slots; one barrier publishes it. Two slots alternate, so the leader never overwrites a
// slot that a slow thread has not read yet: a slot is rewritten two rounds later, after
// every participant passed the barrier of the round in between (and read before it).
template <class Barrier = block_barrier>
struct atomic_scheduler {
  static constexpr int broadcast_slots = 2;

  int* counter = nullptr;  // global, zero at launch
  int total_tiles = 0;
  int* broadcast = nullptr;  // shared, broadcast_slots ints
  int leader_thread = 0;     // threadIdx.x of the thread that talks to the counter
  int round = 0;             // per thread: which slot the next broadcast uses

#if defined(__CUDACC__)
  TILEKIT_DEVICE atomic_scheduler(int* global_counter, int tiles, int* shared_slots, int leader = 0)
      : counter(global_counter), total_tiles(tiles), broadcast(shared_slots), leader_thread(leader) {}

  // Every CTA starts with its own block index (no atomic needed).
  TILEKIT_DEVICE int first() const { return int(blockIdx.x); }

  // Collective: the next tile for this CTA (>= total_tiles when there is none left).
  TILEKIT_DEVICE int next() {
    int* slot = broadcast + (round & 1);
    if (int(threadIdx.x) == leader_thread) *slot = int(gridDim.x) + atomicAdd(counter, 1);
    Barrier::sync();
    const int tile = *slot;
    ++round;
    return tile;
  }
  TILEKIT_DEVICE int next(int /*current*/) { return next(); }
#endif
};

// Zero a tile counter before a launch that uses it (stream-ordered, no synchronization).
inline cudaError_t reset_tile_counter(int* counter, cudaStream_t stream = nullptr) {
  return cudaMemsetAsync(counter, 0, sizeof(int), stream);
}

}  // namespace tilekit
