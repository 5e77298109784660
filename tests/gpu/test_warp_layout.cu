// GPU tests of the warp-scope layout changes (ops/warp/layout.cuh):
// swap_layout in both directions and round trips, the free transpose, and
// transpose_swap, for fp32 (shuffle path) and 16-bit (movmatrix path) tiles.
// Layout changes only move data, so results are compared bit for bit.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "tilekit/ops/warp/register_ops.cuh"

using namespace tilekit;
namespace tkt = tilekit::testing;
using tkt::device_buffer;

namespace {

enum class layout_op { swap, swap_round_trip, transpose, transpose_swap, transpose_round_trip };

// Whether the op's result is the transposed matrix (Cols x Rows).
constexpr bool transposes(layout_op op) { return op == layout_op::transpose || op == layout_op::transpose_swap; }

template <class Src>
__global__ void layout_kernel(const float* in, float* out, layout_op op) {
  using T = typename Src::element;
  constexpr int R = Src::rows, C = Src::cols;
  constexpr layout other = Src::tile_layout == layout::row ? layout::col : layout::row;
  Src src;
  tkt::reference_load(src, in, C);
  switch (op) {
    case layout_op::swap: {
      rt<T, R, C, other> dst;
      warp::swap_layout(dst, src);
      tkt::reference_store(out, C, dst);
      break;
    }
    case layout_op::swap_round_trip: {
      rt_swapped<Src> swapped;
      Src back;
      warp::swap_layout(swapped, src);
      warp::swap_layout(back, swapped);
      tkt::reference_store(out, C, back);
      break;
    }
    case layout_op::transpose: {
      rt<T, C, R, other> dst;
      warp::transpose(dst, src);
      tkt::reference_store(out, R, dst);
      break;
    }
    case layout_op::transpose_swap: {
      rt<T, C, R, Src::tile_layout> dst;
      warp::transpose_swap(dst, src);
      tkt::reference_store(out, R, dst);
      break;
    }
    case layout_op::transpose_round_trip: {
      rt_transposed<Src> transposed;
      Src back;
      warp::transpose(transposed, src);
      warp::transpose(back, transposed);
      tkt::reference_store(out, C, back);
      break;
    }
  }
}

template <class Src>
void check_layout_ops() {
  using T = typename Src::element;
  constexpr int R = Src::rows, C = Src::cols;
  std::mt19937_64 rng(tkt::test_seed());
  std::vector<float> in = tkt::random_vector<float>(R * C, rng, -1.f, 1.f);
  for (auto& x : in) x = convert<float>(convert<T>(x));
  device_buffer<float> in_dev(in), out_dev(R * C);
  for (layout_op op : {layout_op::swap, layout_op::swap_round_trip, layout_op::transpose, layout_op::transpose_swap,
                       layout_op::transpose_round_trip}) {
    SCOPED_TRACE(::testing::Message() << "rt<" << dtype_traits<T>::name << ", " << R << ", " << C << ", "
                                      << (Src::tile_layout == layout::row ? "row" : "col") << "> op " << int(op));
    out_dev.poison();
    layout_kernel<Src><<<1, warp_threads>>>(in_dev.get(), out_dev.get(), op);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();
    int mismatches = 0;
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        // The transposed result is stored as a C x R row-major matrix.
        const float got = transposes(op) ? out[c * R + r] : out[r * C + c];
        mismatches += tkt::raw_bits(got) != tkt::raw_bits(in[r * C + c]);
      }
    EXPECT_EQ(mismatches, 0) << "of " << R * C << " elements";
  }
}

class WarpLayout : public tkt::GpuTest {};

TEST_F(WarpLayout, FloatRow16x16) { check_layout_ops<rt<float, 16, 16, layout::row>>(); }
TEST_F(WarpLayout, FloatCol32x64) { check_layout_ops<rt<float, 32, 64, layout::col>>(); }
TEST_F(WarpLayout, FloatRow64x16) { check_layout_ops<rt<float, 64, 16, layout::row>>(); }
TEST_F(WarpLayout, Bf16Row32x48) { check_layout_ops<rt<bf16, 32, 48, layout::row>>(); }
TEST_F(WarpLayout, Bf16Col64x16) { check_layout_ops<rt<bf16, 64, 16, layout::col>>(); }
TEST_F(WarpLayout, Fp16Col16x16) { check_layout_ops<rt<fp16, 16, 16, layout::col>>(); }

}  // namespace
