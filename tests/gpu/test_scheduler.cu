// Persistent tile schedulers (pipeline/scheduler.cuh): every tile is processed exactly once,
// for grids smaller and larger than the tile count, and every participating thread of a
// CTA sees the same tile. Plus CPU checks of the grouped tile order.
#include <cuda_runtime.h>

#include <set>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/sync/named_barrier.cuh"
#include "tilekit/pipeline/scheduler.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

// ---------------------------------------------------------------------------------------------
// CPU: grouped_tile is a bijection onto the tile grid and follows the documented order.
TEST(GroupedTile, MatchesTheDocumentedExample) {
  // row_tiles = 5, col_tiles = 3, group_rows = 2 (table in scheduler.cuh).
  const int expected_row[15] = {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 4, 4, 4};
  const int expected_col[15] = {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 0, 1, 2};
  for (int t = 0; t < 15; ++t) {
    const tile_position p = grouped_tile(t, 5, 3, 2);
    EXPECT_EQ(p.row, expected_row[t]) << "tile " << t;
    EXPECT_EQ(p.col, expected_col[t]) << "tile " << t;
  }
}

TEST(GroupedTile, IsABijection) {
  for (int rows : {1, 3, 7, 16, 33})
    for (int cols : {1, 2, 9, 20})
      for (int group : {1, 2, 4, 8, 64}) {
        std::set<std::pair<int, int>> seen;
        for (int t = 0; t < rows * cols; ++t) {
          const tile_position p = grouped_tile(t, rows, cols, group);
          ASSERT_TRUE(p.row >= 0 && p.row < rows && p.col >= 0 && p.col < cols)
              << rows << "x" << cols << " group " << group << " tile " << t;
          ASSERT_TRUE(seen.insert({p.row, p.col}).second) << "tile " << t << " repeats a position";
        }
        EXPECT_EQ(seen.size(), size_t(rows * cols));
      }
  static_assert(grouped_tile(7, 4, 4, 4).row == 3 && grouped_tile(7, 4, 4, 4).col == 1, "constexpr usable");
  static_assert(row_major_tile(7, 4).row == 1 && row_major_tile(7, 4).col == 3, "constexpr usable");
}

// ---------------------------------------------------------------------------------------------
// GPU. Work per tile is uneven (a spin proportional to tile % 7) so the dynamic scheduler
// actually redistributes.
__device__ void uneven_work(int tile) {
  const long long until = clock64() + 200 * (tile % 7);
  while (clock64() < until) {
  }
}

constexpr int scheduler_threads = 128;

// Every thread counts its visit, so a tile seen by all threads of a block once gets
// exactly blockDim.x.
__global__ void static_scheduler_kernel(int total, int* visits) {
  const static_scheduler scheduler{total};
  for (int tile : scheduler) {
    atomicAdd(&visits[tile], 1);
    uneven_work(tile);
  }
}

__global__ void static_scheduler_loop_kernel(int total, int* visits) {
  const static_scheduler scheduler{total};
  for (int tile = scheduler.first(); tile < scheduler.total_tiles; tile = scheduler.next(tile))
    atomicAdd(&visits[tile], 1);
}

__global__ void atomic_scheduler_kernel(int total, int* counter, int* visits) {
  __shared__ int slots[atomic_scheduler<>::broadcast_slots];
  atomic_scheduler<> scheduler(counter, total, slots);
  for (int tile = scheduler.first(); tile < scheduler.total_tiles; tile = scheduler.next()) {
    atomicAdd(&visits[tile], 1);
    uneven_work(tile);
  }
}

// Warp-specialized flavour: only warpgroups 1 and 2 (256 threads) take part, synchronised by
// a named barrier, with thread 128 talking to the counter; warpgroup 0 does something else.
constexpr int specialized_threads = 3 * warpgroup_threads;
constexpr int participating_threads = 2 * warpgroup_threads;
using consumers_barrier = named_barrier<1, participating_threads>;

__global__ void atomic_scheduler_named_barrier_kernel(int total, int* counter, int* visits) {
  __shared__ int slots[atomic_scheduler<consumers_barrier>::broadcast_slots];
  if (warpgroupid() == 0) return;  // not part of the schedule
  atomic_scheduler<consumers_barrier> scheduler(counter, total, slots, /*leader=*/warpgroup_threads);
  for (int tile = scheduler.first(); tile < scheduler.total_tiles; tile = scheduler.next()) {
    atomicAdd(&visits[tile], 1);
    uneven_work(tile);
  }
}

class Scheduler : public GpuTest {};

void expect_visits(const std::vector<int>& visits, int per_tile) {
  size_t wrong = 0;
  for (size_t t = 0; t < visits.size(); ++t)
    if (visits[t] != per_tile && wrong++ < 5)
      ADD_FAILURE() << "tile " << t << " visited " << visits[t] << " times, expected " << per_tile;
  EXPECT_EQ(wrong, 0u);
}

constexpr int tile_counts[] = {1, 500, 1031};
constexpr int grid_sizes[] = {1, 7, 132, 2000};

TEST_F(Scheduler, StaticEveryTileOnce) {
  for (int total : tile_counts)
    for (int grid : grid_sizes) {
      SCOPED_TRACE(::testing::Message() << "tiles " << total << " grid " << grid);
      device_buffer<int> visits{size_t(total)};
      TILEKIT_CHECK_CUDA(cudaMemset(visits.get(), 0, sizeof(int) * total));
      static_scheduler_kernel<<<grid, scheduler_threads>>>(total, visits.get());
      TILEKIT_CHECK_CUDA(cudaGetLastError());
      TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
      expect_visits(visits.download(), scheduler_threads);
      TILEKIT_CHECK_CUDA(cudaMemset(visits.get(), 0, sizeof(int) * total));
      static_scheduler_loop_kernel<<<grid, scheduler_threads>>>(total, visits.get());
      TILEKIT_CHECK_CUDA(cudaGetLastError());
      TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
      expect_visits(visits.download(), scheduler_threads);
    }
}

TEST_F(Scheduler, AtomicEveryTileOnceAcrossRelaunches) {
  device_buffer<int> counter{1};
  for (int total : tile_counts)
    for (int grid : grid_sizes) {
      SCOPED_TRACE(::testing::Message() << "tiles " << total << " grid " << grid);
      device_buffer<int> visits{size_t(total)};
      // Two launches in a row on the same counter: the reset makes the second one correct.
      for (int launch = 0; launch < 2; ++launch) {
        TILEKIT_CHECK_CUDA(cudaMemset(visits.get(), 0, sizeof(int) * total));
        TILEKIT_CHECK_CUDA(reset_tile_counter(counter.get()));
        atomic_scheduler_kernel<<<grid, scheduler_threads>>>(total, counter.get(), visits.get());
        TILEKIT_CHECK_CUDA(cudaGetLastError());
        TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
        expect_visits(visits.download(), scheduler_threads);
      }
    }
}

TEST_F(Scheduler, AtomicWithNamedBarrierSubset) {
  device_buffer<int> counter{1};
  for (int grid : {1, 132}) {
    constexpr int total = 1031;
    SCOPED_TRACE(::testing::Message() << "grid " << grid);
    device_buffer<int> visits{size_t(total)};
    TILEKIT_CHECK_CUDA(cudaMemset(visits.get(), 0, sizeof(int) * total));
    TILEKIT_CHECK_CUDA(reset_tile_counter(counter.get()));
    atomic_scheduler_named_barrier_kernel<<<grid, specialized_threads>>>(total, counter.get(), visits.get());
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    expect_visits(visits.download(), participating_threads);
  }
}

}  // namespace
