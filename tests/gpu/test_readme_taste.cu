// The "taste" kernel of README.md, verbatim, run against an fp64 reference: the
// README's example must compile and be right.
#include <tilekit/tilekit.cuh>

#include <cmath>

#include "common/gpu_test.cuh"

using namespace tilekit;

// ---- README.md, "A taste" (keep in sync) ----
__global__ void softmax_rows(gl<bf16> x, gl<bf16> y) {
  const coord origin{.r = int(blockIdx.x) * 16};
  rt_fl<16, 64> tile;                    // 16 x 64 floats spread over the warp
  row_vec<decltype(tile)> max, sum;      // one value per row
  warp::load(tile, x, origin);           // bf16 -> fp32, zero fill past the edge
  warp::mask_tail(tile, 16, x.cols(), -infinity);
  warp::row_max(max, tile);
  warp::sub_row(tile, tile, max);        // x - max(x)
  warp::exp(tile, tile);
  warp::row_sum(sum, tile);
  warp::div_row(tile, tile, sum);
  warp::store(y, tile, origin);          // fp32 -> bf16, clipped at the edge
}
// ---- end of the README excerpt ----

class ReadmeTaste : public tilekit::testing::GpuTest {};

TEST_F(ReadmeTaste, SoftmaxRowsMatchesReference) {
  for (const int cols : {64, 50}) {
    SCOPED_TRACE(cols);
    const int rows = 37;  // 3 tiles of 16 rows, the last one partial
    std::mt19937_64 rng(tilekit::testing::test_seed());
    const auto host = tilekit::testing::random_vector<bf16>(size_t(rows) * cols, rng, -4.f, 4.f);
    tilekit::testing::device_buffer<bf16> x(host), y(size_t(rows) * cols);
    softmax_rows<<<ceil_div(rows, 16), 32>>>(make_gl(x.get(), {rows, cols}), make_gl(y.get(), {rows, cols}));
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<double> ref(host.size());
    for (int r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (int c = 0; c < cols; ++c) m = std::max(m, tilekit::testing::to_double(host[r * cols + c]));
      for (int c = 0; c < cols; ++c) s += std::exp(tilekit::testing::to_double(host[r * cols + c]) - m);
      for (int c = 0; c < cols; ++c) ref[r * cols + c] = std::exp(tilekit::testing::to_double(host[r * cols + c]) - m) / s;
    }
    TILEKIT_EXPECT_CLOSE(y.download(), ref, tilekit::testing::tolerance<bf16>());
  }
}
