// Global <-> register moves without shared memory (warp::load / warp::store on
// rt and gl, and on rv and plain pointers).
//
//   round trip: one warp per tile, gl -> rt -> gl over whole tensors (partial
//     tiles, padded and 4-D views, unaligned rows, misaligned base); the whole
//     poisoned destination buffer is compared bit for bit.
//   zero fill: gl -> rt -> reference_store (tests/common/register_io.cuh) into
//     a dense buffer per tile: in-bounds elements equal the source, the rest 0.
//   element conversion on the way (bf16 <-> fp32, fp32 -> bf16 rounding, fp8).
//   vectors: partial lengths, entries past n_valid zero on load and untouched
//     on store.
#include <gtest/gtest.h>

#include <random>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "test_memory_common.cuh"
#include "tilekit/ops/memory/global_register.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

template <class Tile>
__device__ coord tile_origin_of_block(int depth) {
  return {.b = int(blockIdx.z) / depth,
          .d = int(blockIdx.z) % depth,
          .r = int(blockIdx.y) * Tile::rows,
          .c = int(blockIdx.x) * Tile::cols};
}

// One warp per tile. `dense` (optional) receives the loaded tile through the
// reference store: tile (x, y, z) at block index ((z * grid.y + y) * grid.x + x).
template <class Reg, class T>
__global__ void global_register_kernel(gl<T> src, gl<T> dst, typename Reg::element* dense) {
  const coord origin = tile_origin_of_block<Reg>(int(src.depth()));
  Reg tile;
  warp::load(tile, src, origin);
  warp::store(dst, tile, origin);
  if (dense) {
    const size_t block = (size_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    reference_store(dense + block * Reg::rows * Reg::cols, Reg::cols, tile);
  }
}

template <class T, class Reg>
void run_global_register() {
  using R = typename Reg::element;
  std::mt19937_64 rng(test_seed());
  for (const view_spec& view : copy_test_views()) {
    SCOPED_TRACE(::testing::Message() << view.name << ", gl<" << dtype_traits<T>::name << "> <-> rt<"
                                      << dtype_traits<R>::name << ", " << Reg::rows << ", " << Reg::cols << ", "
                                      << (Reg::tile_layout == layout::row ? "row" : "col") << ">");
    const std::vector<T> host = random_vector<T>(view.buffer_elements(), rng);
    const dim3 grid(unsigned(ceil_div<int64_t>(view.shape[3], Reg::cols)),
                    unsigned(ceil_div<int64_t>(view.shape[2], Reg::rows)), unsigned(view.slices()));
    const size_t tiles = size_t(grid.x) * grid.y * grid.z;
    device_buffer<T> src(host), dst(host.size());
    device_buffer<R> dense(tiles * Reg::rows * Reg::cols);
    global_register_kernel<Reg><<<grid, warp_threads>>>(make_view(src.get(), view), make_view(dst.get(), view),
                                                        dense.get());
    sync_and_check("global_register_kernel");
    expect_same_bits(dst.download(), expected_copy<T, R>(host, view), "destination buffer");

    std::vector<R> expected_dense(dense.size());
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          const size_t block = (size_t(z) * grid.y + y) * grid.x + x;
          for (int r = 0; r < Reg::rows; ++r)
            for (int c = 0; c < Reg::cols; ++c) {
              const int64_t row = int64_t(y) * Reg::rows + r, col = int64_t(x) * Reg::cols + c;
              const bool inside = row < view.shape[2] && col < view.shape[3];
              const int64_t b = z / view.shape[1], d = z % view.shape[1];
              expected_dense[block * Reg::rows * Reg::cols + size_t(r) * Reg::cols + c] =
                  inside ? convert<R>(host[size_t(view.index(b, d, row, col))]) : convert<R>(0.f);
            }
        }
    expect_same_bits(dense.download(), expected_dense, "loaded tiles (zeros outside the tensor)");
  }
}

class MemoryGlobalRegister : public GpuTest {};

TEST_F(MemoryGlobalRegister, Bf16) {
  run_global_register<bf16, rt_bf<16, 16>>();
  run_global_register<bf16, rt_bf<16, 16, layout::col>>();
  run_global_register<bf16, rt_bf<32, 64>>();
  run_global_register<bf16, rt_bf<32, 64, layout::col>>();
}
TEST_F(MemoryGlobalRegister, Fp16) { run_global_register<fp16, rt_hf<16, 32>>(); }
TEST_F(MemoryGlobalRegister, Fp32) {
  run_global_register<float, rt_fl<16, 32>>();
  run_global_register<float, rt_fl<16, 32, layout::col>>();
}
TEST_F(MemoryGlobalRegister, ConvertingTypes) {
  run_global_register<bf16, rt_fl<16, 64>>();    // widen, exact both ways
  run_global_register<float, rt_bf<16, 32>>();   // round to bf16 (expected rounds the same way)
  run_global_register<fp8e4m3, rt_fl<32, 32>>(); // fp8 in memory, fp32 in registers
}

// ---------------------------------------------------------------- vectors

template <class Vec, class T>
__global__ void vector_kernel(const T* src, int n_load, typename Vec::element* loaded, T* dst, int n_store) {
  Vec vec;
  warp::load(vec, src, n_load);
  reference_store(loaded, vec);
  reference_load(vec, src);
  warp::store(dst, vec, n_store);
}

template <class Vec, class T>
void run_vector(int n_load, int n_store) {
  using V = typename Vec::element;
  constexpr int N = Vec::length;
  SCOPED_TRACE(::testing::Message() << "N " << N << ", n_load " << n_load << ", n_store " << n_store);
  std::mt19937_64 rng(test_seed());
  const std::vector<T> host = random_vector<T>(N, rng);
  device_buffer<T> src(host), dst(N + 32);
  device_buffer<V> loaded(N);
  vector_kernel<Vec><<<1, warp_threads>>>(src.get(), n_load, loaded.get(), dst.get(), n_store);
  sync_and_check("vector_kernel");
  std::vector<V> expected_loaded(N);
  for (int i = 0; i < N; ++i) expected_loaded[i] = i < n_load ? convert<V>(host[i]) : convert<V>(0.f);
  expect_same_bits(loaded.download(), expected_loaded, "loaded vector");
  std::vector<T> expected_stored(N + 32, poison_value<T>());
  for (int i = 0; i < n_store && i < N; ++i) expected_stored[i] = convert<T>(convert<V>(host[i]));
  expect_same_bits(dst.download(), expected_stored, "stored vector");
}

TEST_F(MemoryGlobalRegister, Vectors) {
  run_vector<rv<float, 64, vec_layout::grouped>, float>(50, 64);
  run_vector<rv<float, 64, vec_layout::grouped>, float>(64, 37);
  run_vector<rv<float, 32, vec_layout::paired>, bf16>(31, 32);
  run_vector<rv<float, 48, vec_layout::paired>, float>(48, 5);
}

}  // namespace
