// Round trips global -> shared (cp.async, group<N>) -> registers (ldmatrix /
// fp32 shared loads) -> global, over whole tensors whose shapes are not tile
// multiples, for several tile shapes, dtypes and both register layouts:
//
//   mode direct:        gl -> st (load_async) -> rt (warp slices) -> gl (warp::store)
//   mode through_shared: gl -> st (load)      -> rt -> st' (stmatrix) -> gl (group store)
//
// A copy is exact, so the whole destination buffer (view + padding + tail) is
// compared bit for bit against the source inside the view and the poison
// outside it: a missed element, a wrong element or a stray write all fail.
// Also: shared vectors (group load / store with partial lengths).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/gpu_test.cuh"
#include "test_memory_common.cuh"
#include "tilekit/ops/group_memory.cuh"
#include "tilekit/ops/warp/memory.cuh"
#include "tilekit/tiles/shared.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

enum class round_trip_mode : int { direct = 0, through_shared = 1 };

template <class Shared>
struct round_trip_storage {
  Shared loaded;
  Shared stored;
};

// One block per tile; warp w owns rows [w * Reg::rows, (w + 1) * Reg::rows) of the tile.
template <class Shared, class Reg, int Warps>
__global__ void round_trip_kernel(gl<typename Shared::element> src, gl<typename Shared::element> dst,
                                  round_trip_mode mode) {
  static_assert(Reg::rows * Warps == Shared::rows && Reg::cols == Shared::cols, "warps must tile the shared tile");
  using copy_group = group<Warps * warp_threads>;
  auto& storage = shared_storage<round_trip_storage<Shared>>();
  const int depth = int(src.depth());
  const coord tile_origin{.b = int(blockIdx.z) / depth,
                          .d = int(blockIdx.z) % depth,
                          .r = int(blockIdx.y) * Shared::rows,
                          .c = int(blockIdx.x) * Shared::cols};
  if (mode == round_trip_mode::direct) {
    if constexpr (Warps == warpgroup_warps) {  // exercise the warpgroup:: spelling too
      warpgroup::load_async(storage.loaded, src, tile_origin);
      warpgroup::async_commit();
      warpgroup::async_wait<0>();
    } else {
      copy_group::load_async(storage.loaded, src, tile_origin);
      copy_group::async_commit();
      copy_group::template async_wait<0>();
    }
  } else {
    copy_group::load(storage.loaded, src, tile_origin);
  }
  __syncthreads();  // cp.async data of every thread is visible to every warp

  const int slice_row = warpid() * Reg::rows;
  Reg tile;
  warp::load(tile, storage.loaded, slice_row, 0);
  if (mode == round_trip_mode::direct) {
    coord slice_origin = tile_origin;
    slice_origin.r += slice_row;
    warp::store(dst, tile, slice_origin);
  } else {
    warp::store(storage.stored, tile, slice_row, 0);
    __syncthreads();  // every warp's slice is in shared memory
    copy_group::store(dst, storage.stored, tile_origin);
  }
}

template <class Shared, class Reg, int Warps>
void run_round_trips() {
  using T = typename Shared::element;
  using R = typename Reg::element;
  std::mt19937_64 rng(test_seed());
  for (const view_spec& view : copy_test_views()) {
    for (round_trip_mode mode : {round_trip_mode::direct, round_trip_mode::through_shared}) {
      SCOPED_TRACE(::testing::Message() << view.name << ", mode "
                                        << (mode == round_trip_mode::direct ? "direct" : "through_shared"));
      const std::vector<T> host = random_vector<T>(view.buffer_elements(), rng);
      device_buffer<T> src(host), dst(host.size());
      const dim3 grid(unsigned(ceil_div<int64_t>(view.shape[3], Shared::cols)),
                      unsigned(ceil_div<int64_t>(view.shape[2], Shared::rows)), unsigned(view.slices()));
      constexpr size_t shared_bytes = shared_storage_bytes<round_trip_storage<Shared>>;
      round_trip_kernel<Shared, Reg, Warps><<<grid, Warps * warp_threads, shared_bytes>>>(
          make_view(src.get(), view), make_view(dst.get(), view), mode);
      sync_and_check("round_trip_kernel");
      // The register tile may hold another type (bf16 -> fp32 -> bf16 is exact).
      expect_same_bits(dst.download(), expected_copy<T, R>(host, view), "destination buffer");
    }
  }
}

class MemoryGlobalShared : public GpuTest {};

TEST_F(MemoryGlobalShared, Bf16_16x16) {
  run_round_trips<st_bf<16, 16>, rt_bf<16, 16>, 1>();
  run_round_trips<st_bf<16, 16>, rt_bf<16, 16, layout::col>, 1>();
}
TEST_F(MemoryGlobalShared, Bf16_64x64) {
  run_round_trips<st_bf<64, 64>, rt_bf<16, 64>, 4>();
  run_round_trips<st_bf<64, 64>, rt_bf<16, 64, layout::col>, 4>();
}
TEST_F(MemoryGlobalShared, Bf16_32x128_TwoPanels) {
  run_round_trips<st_bf<32, 128>, rt_bf<16, 128>, 2>();
  run_round_trips<st_bf<32, 128>, rt_bf<16, 128, layout::col>, 2>();
}
TEST_F(MemoryGlobalShared, Bf16_128x64_TwoFragmentRowsPerWarp) {
  run_round_trips<st_bf<128, 64>, rt_bf<32, 64>, 4>();
  run_round_trips<st_bf<128, 64>, rt_bf<32, 64, layout::col>, 4>();
}
TEST_F(MemoryGlobalShared, Fp16_64x32_Swizzle64) {
  run_round_trips<st_hf<64, 32>, rt_hf<16, 32>, 4>();
  run_round_trips<st_hf<64, 32>, rt_hf<16, 32, layout::col>, 4>();
}
TEST_F(MemoryGlobalShared, Fp32_16x32) {
  run_round_trips<st_fl<16, 32>, rt_fl<16, 32>, 1>();
  run_round_trips<st_fl<16, 32>, rt_fl<16, 32, layout::col>, 1>();
}
TEST_F(MemoryGlobalShared, Fp32_64x32) {
  run_round_trips<st_fl<64, 32>, rt_fl<16, 32>, 4>();
  run_round_trips<st_fl<64, 32>, rt_fl<16, 32, layout::col>, 4>();
}
TEST_F(MemoryGlobalShared, Bf16SharedToFp32Registers) {
  run_round_trips<st_bf<64, 64>, rt_fl<16, 64>, 4>();
}

// ---------------------------------------------------------------- vectors

template <class T, int N, int Threads>
__global__ void shared_vector_kernel(const T* src, int n_load, T* dst, int n_store) {
  __shared__ sv<T, N> vec;
  if constexpr (Threads == warp_threads) {
    warp::load(vec, src, n_load);
  } else {
    group<Threads>::load(vec, src, n_load);
  }
  __syncthreads();
  if constexpr (Threads == warpgroup_threads) {
    warpgroup::store(dst, vec, n_store);
  } else {
    group<Threads>::store(dst, vec, n_store);
  }
}

template <class T, int N, int Threads>
void run_shared_vector(int src_offset, int n_load, int n_store) {
  SCOPED_TRACE(::testing::Message() << "N " << N << ", threads " << Threads << ", src offset " << src_offset
                                    << ", n_load " << n_load << ", n_store " << n_store);
  std::mt19937_64 rng(test_seed());
  constexpr int buffer = 2 * N + 64;
  const std::vector<T> host = random_vector<T>(buffer, rng);
  device_buffer<T> src(host), dst(buffer);
  shared_vector_kernel<T, N, Threads><<<1, Threads>>>(src.get() + src_offset, n_load, dst.get(), n_store);
  sync_and_check("shared_vector_kernel");
  std::vector<T> expected(buffer, poison_value<T>());
  for (int i = 0; i < std::min(n_store, N); ++i) expected[i] = i < n_load ? host[src_offset + i] : convert<T>(0.f);
  expect_same_bits(dst.download(), expected, "destination vector");
}

TEST_F(MemoryGlobalShared, SharedVectors) {
  // 100 bf16 = 200 bytes: 12 whole 16-byte chunks and a 4-element tail.
  run_shared_vector<bf16, 100, 32>(0, 77, 100);
  run_shared_vector<bf16, 100, 32>(1, 150, 90);  // misaligned source
  run_shared_vector<bf16, 100, 128>(0, 100, 100);
  run_shared_vector<float, 256, 128>(0, 200, 256);
  run_shared_vector<float, 256, 64>(3, 256, 255);
}

}  // namespace
