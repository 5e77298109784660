// mbarrier semantics (ops/sync/mbarrier.cuh), the stage ring (pipeline/stage_ring.cuh) and
// register reallocation (pipeline/warp_specialization.cuh) under a producer/consumer stress
// kernel:
//
//   warpgroup 0, one elected thread:  TMA-loads 64x64 bf16 tiles through a 4-stage ring
//   warpgroups 1 and 2 (8 warps):     wait, checksum every tile, release the stage
//
// The checksum weights every element's bits by its position, so a stage consumed too early
// (stale or half-written data), a tile landing in the wrong stage or a swizzle mismatch all
// change it; the host computes the same sums exactly (integers), zero fill included.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/memory/tma.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/ops/sync/named_barrier.cuh"
#include "tilekit/pipeline/scheduler.cuh"
#include "tilekit/pipeline/stage_ring.cuh"
#include "tilekit/pipeline/warp_specialization.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/shared.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/tma_descriptor.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

// ---------------------------------------------------------------------------------------------
// Parity semantics of a single barrier (HOPPER_NOTES 4.3), recorded by one thread.
__global__ void parity_kernel(uint32_t* out) {
  __shared__ mbarrier bar;
  constexpr uint32_t arrivals = 2;
  bar.init(arrivals);
  init_barriers_fence();
  int n = 0;
  out[n++] = bar.test_wait(0);  // fresh: phase 0 running      -> 0
  out[n++] = bar.test_wait(1);  // "previous" phase complete    -> 1
  bar.arrive();
  out[n++] = bar.test_wait(0);  // one of two arrivals          -> 0
  bar.arrive();
  bar.wait(0);                  // phase 0 completes
  out[n++] = bar.test_wait(0);  //                              -> 1
  out[n++] = bar.test_wait(1);  // phase 1 running              -> 0
  // Walk 5 more phases with the phase helper; arrive(count) completes each at once.
  phase p;
  p.flip();  // we are in phase 1 now
  for (int i = 0; i < 5; ++i) {
    bar.arrive(arrivals);
    bar.wait_and_flip(p);
  }
  out[n++] = p.bit;             // 6 completions in all: parity back to 0 -> 0
  out[n++] = bar.test_wait(1);  // phase 6 running; phase 5 (odd) done -> 1
  // A transaction count keeps the phase open after all arrivals.
  bar.expect_tx(16);
  bar.arrive(arrivals);
  out[n++] = bar.test_wait(p.bit);  // 16 bytes still expected  -> 0
  bar.invalidate();
  out[n++] = 0xC0FFEE;  // reached the end
}

class MbarrierPipeline : public GpuTest {};

TEST_F(MbarrierPipeline, ParitySemantics) {
  device_buffer<uint32_t> out(9);
  parity_kernel<<<1, 1>>>(out.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<uint32_t> expected = {0, 1, 0, 1, 0, 0, 1, 0, 0xC0FFEE};
  EXPECT_EQ(out.download(), expected);
}

// ---------------------------------------------------------------------------------------------
// Producer / consumer stress.
using tile = st_bf<64, 64>;
constexpr int stages = 4;
constexpr int consumer_warpgroups = 2;
constexpr int pipeline_threads = (1 + consumer_warpgroups) * warpgroup_threads;  // 384
constexpr int consumer_threads = consumer_warpgroups * warpgroup_threads;
constexpr int consumer_warps = consumer_threads / warp_threads;  // one release arrival each
// Register split for 1 producer + 2 consumer warpgroups (warp_specialization.cuh table).
constexpr int producer_registers = 24;
constexpr int consumer_registers = 240;

struct pipeline_storage {
  tile stage_tiles[stages];
  stage_barriers<stages> barriers;
};

// Position weight of element (r, c): small, never zero, different for neighbours.
TILEKIT_HOST_DEVICE constexpr uint64_t checksum_weight(int r, int c) { return uint64_t((r * 131 + c * 7) % 251 + 1); }

template <bool ReallocateRegisters>
__global__ void __launch_bounds__(pipeline_threads, 1)
    pipeline_kernel(const __grid_constant__ tma_map<tile> map, int row_tiles, int col_tiles,
                    unsigned long long* checksums) {
  pipeline_storage& s = shared_storage<pipeline_storage>();
  if (threadIdx.x == 0) s.barriers.init(/*producer_arrivals=*/1, /*consumer_arrivals=*/consumer_warps);
  init_barriers_fence();
  __syncthreads();

  const static_scheduler tiles{row_tiles * col_tiles};
  if (warpgroupid() == 0) {
    if constexpr (ReallocateRegisters) decrease_registers<producer_registers>();
    if (warpid() == 0 && elect_one()) {
      tma::prefetch_map(map);
      stage_ring<stages> ring;
      for (int t : tiles) {
        mbarrier& full = producer_acquire(ring, s.barriers);
        full.arrive_expect_tx(transaction_bytes<tile>);
        const coord origin{.r = (t / col_tiles) * tile::rows, .c = (t % col_tiles) * tile::cols};
        tma::load_async(s.stage_tiles[ring.index], map, origin, full);
        ring.advance();
      }
      producer_drain(ring, s.barriers);  // exercised; required in clusters
    }
  } else {
    if constexpr (ReallocateRegisters) increase_registers<consumer_registers>();
    const int consumer = int(threadIdx.x) - warpgroup_threads;
    stage_ring<stages> ring;
    for (int t : tiles) {
      consumer_wait(ring, s.barriers);
      const tile& data = s.stage_tiles[ring.index];
      uint64_t sum = 0;
      for (int e = consumer; e < tile::elements; e += consumer_threads) {
        const int r = e / tile::cols, c = e % tile::cols;
        uint16_t b;
        memcpy(&b, &data(r, c), sizeof(b));
        sum += uint64_t(b) * checksum_weight(r, c);
      }
      __syncwarp();  // every lane has read the stage before the warp releases it
      if (laneid() == 0) consumer_release(ring, s.barriers);
      ring.advance();
      for (int offset = warp_threads / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (laneid() == 0) atomicAdd(&checksums[t], static_cast<unsigned long long>(sum));
    }
  }
}

template <bool ReallocateRegisters>
void run_pipeline(int rows, int cols, int grid) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols << " grid " << grid << " setmaxnreg "
                                    << ReallocateRegisters);
  std::mt19937_64 rng(test_seed());
  const auto host = random_vector<bf16>(size_t(rows) * cols, rng);
  device_buffer<bf16> src(host);
  const auto g = make_gl(src.get(), {int64_t(rows), int64_t(cols)});
  const auto map = make_tma_map<tile>(g);
  const int row_tiles = int(g.row_tiles<tile>()), col_tiles = int(g.col_tiles<tile>());
  const int total = row_tiles * col_tiles;
  ASSERT_GE(total, 200) << "test setup: the ring must wrap many times";
  device_buffer<unsigned long long> checksums{size_t(total)};
  TILEKIT_CHECK_CUDA(cudaMemset(checksums.get(), 0, checksums.size() * sizeof(unsigned long long)));

  auto kernel = pipeline_kernel<ReallocateRegisters>;
  const size_t smem = shared_storage_bytes<pipeline_storage>;
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, pipeline_threads, smem>>>(map, row_tiles, col_tiles, checksums.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = checksums.download();

  size_t wrong = 0;
  for (int t = 0; t < total; ++t) {
    const int r0 = (t / col_tiles) * tile::rows, c0 = (t % col_tiles) * tile::cols;
    unsigned long long expected = 0;
    for (int r = 0; r < tile::rows; ++r)
      for (int c = 0; c < tile::cols; ++c) {
        const int gr = r0 + r, gc = c0 + c;
        uint16_t b = 0;  // zero fill outside the tensor
        if (gr < rows && gc < cols) std::memcpy(&b, &host[size_t(gr) * cols + gc], sizeof(b));
        expected += uint64_t(b) * checksum_weight(r, c);
      }
    if (got[t] != expected && wrong++ < 5)
      ADD_FAILURE() << "tile " << t << ": checksum " << got[t] << " expected " << expected;
  }
  EXPECT_EQ(wrong, 0u);
}

// 63 full row tiles + 17 rows, 248 columns (3 full column tiles + 56): 256 tiles, the last
// row and column of tiles partial.
constexpr int stress_rows = 63 * 64 + 17;
constexpr int stress_cols = 248;

TEST_F(MbarrierPipeline, ProducerConsumerRingOneBlock) { run_pipeline<false>(stress_rows, stress_cols, 1); }
TEST_F(MbarrierPipeline, ProducerConsumerRingManyBlocks) { run_pipeline<false>(stress_rows, stress_cols, 5); }
TEST_F(MbarrierPipeline, WarpSpecializedWithRegisterReallocation) {
  // 384 threads, 24 / 240 registers (1 producer + 2 consumer warpgroups).
  run_pipeline<true>(stress_rows, stress_cols, 132);
  run_pipeline<true>(stress_rows, stress_cols, 1);
}

}  // namespace
