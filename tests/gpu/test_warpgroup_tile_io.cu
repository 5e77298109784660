// Warpgroup-scope register tile I/O (ops/warpgroup/tile_io.cuh): a 64 x C tile
// held as one 16 x C slice per warp goes global -> registers -> shared ->
// registers -> global, at an origin where the tile hangs over the tensor edge.
#include <tilekit/tilekit.cuh>

#include "common/gpu_test.cuh"

using namespace tilekit;

namespace {

template <class T, int C>
struct storage {
  st<T, 64, C> tile;
};

template <class T, int C>
__global__ void round_trip(gl<T> src, gl<T> dst, coord origin) {
  storage<T, C>& s = shared_storage<storage<T, C>>();
  rt_fl<16, C> slice, back;
  warpgroup::load(slice, src, origin);   // zero fill outside src
  warpgroup::store(s.tile, slice);
  __syncthreads();
  warpgroup::load(back, s.tile);
  warpgroup::store(dst, back, origin);   // clipped at dst's edge
}

template <class T, int C>
void check(int rows, int cols, coord origin) {
  SCOPED_TRACE(::testing::Message() << dtype_traits<T>::name << " 64x" << C << " tile at (" << origin.r << ", "
                                    << origin.c << ") of " << rows << "x" << cols);
  std::mt19937_64 rng(tilekit::testing::test_seed());
  const auto host = tilekit::testing::random_vector<T>(size_t(rows) * cols, rng);
  tilekit::testing::device_buffer<T> in(host), out(size_t(rows) * cols);  // out poisoned
  const auto before = out.download();
  round_trip<T, C><<<1, warpgroup_threads, shared_storage_bytes<storage<T, C>>>>>(
      make_gl(in.get(), {rows, cols}), make_gl(out.get(), {rows, cols}), origin);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  size_t wrong = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t i = size_t(r) * cols + c;
      const bool inside = r >= origin.r && r < origin.r + 64 && c >= origin.c && c < origin.c + C;
      const T expected = inside ? host[i] : before[i];
      if (memcmp(&got[i], &expected, sizeof(T)) != 0 && wrong++ < 5)
        ADD_FAILURE() << "(" << r << ", " << c << ") " << (inside ? "inside" : "outside") << " the tile";
    }
  EXPECT_EQ(wrong, 0u);
}

class WarpgroupTileIo : public tilekit::testing::GpuTest {};

TEST_F(WarpgroupTileIo, Bf16RoundTripAtTheEdge) { check<bf16, 64>(100, 72, {.r = 48, .c = 8}); }
TEST_F(WarpgroupTileIo, Fp32RoundTripInside) { check<float, 32>(128, 64, {.r = 64, .c = 32}); }

}  // namespace
