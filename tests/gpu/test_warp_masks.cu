// GPU tests of the warp-scope masks (ops/warp/masks.cuh): upper / lower
// triangles with positive, zero and negative diagonals (including ones that
// keep or mask the whole tile), and partial tails, on both layouts. Masks only
// select, so the results are compared exactly, -infinity included.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/warp/register_ops.cuh"

using namespace tilekit;
namespace tkt = tilekit::testing;
using tkt::device_buffer;

namespace {

enum class mask_kind { upper, lower, tail, upper_default_value };

struct mask_params {
  mask_kind kind;
  int diagonal;    // upper / lower
  int valid_rows;  // tail
  int valid_cols;  // tail
  float value;     // the masked elements' value (upper_default_value: -infinity)
};

template <class Tile>
__global__ void mask_kernel(const float* in, float* out, mask_params p) {
  Tile t;
  tkt::reference_load(t, in, Tile::cols);
  switch (p.kind) {
    case mask_kind::upper: warp::mask_upper(t, p.diagonal, p.value); break;
    case mask_kind::lower: warp::mask_lower(t, p.diagonal, p.value); break;
    case mask_kind::tail: warp::mask_tail(t, p.valid_rows, p.valid_cols, p.value); break;
    case mask_kind::upper_default_value: warp::mask_upper(t, p.diagonal); break;
  }
  tkt::reference_store(out, Tile::cols, t);
}

template <class Tile>
void check_masks() {
  using T = typename Tile::element;
  constexpr int R = Tile::rows, C = Tile::cols;
  std::mt19937_64 rng(tkt::test_seed());
  std::vector<float> in = tkt::random_vector<float>(R * C, rng, -1.f, 1.f);
  for (auto& x : in) x = convert<float>(convert<T>(x));
  device_buffer<float> in_dev(in), out_dev(R * C);
  const float fill = -1000.f;  // exact in bf16 and fp16, and distinct from every input

  std::vector<mask_params> cases;
  for (int d : {-R - 3, -R + 1, -5, -1, 0, 1, 7, C - 1, C + 2}) {
    cases.push_back({mask_kind::upper, d, 0, 0, fill});
    cases.push_back({mask_kind::lower, d, 0, 0, fill});
  }
  cases.push_back({mask_kind::upper_default_value, 3, 0, 0, -infinity});
  cases.push_back({mask_kind::upper_default_value, -2, 0, 0, -infinity});
  for (auto [vr, vc] : {std::pair{R, C}, {1, 1}, {R - 3, C - 5}, {0, C}, {R, 1}, {5, C + 10}})
    cases.push_back({mask_kind::tail, 0, vr, vc, fill});

  for (const mask_params& p : cases) {
    SCOPED_TRACE(::testing::Message() << "rt<" << dtype_traits<T>::name << ", " << R << ", " << C << ", "
                                      << (Tile::tile_layout == layout::row ? "row" : "col") << "> kind "
                                      << int(p.kind) << " diagonal " << p.diagonal << " valid " << p.valid_rows
                                      << "x" << p.valid_cols);
    out_dev.poison();
    mask_kernel<Tile><<<1, warp_threads>>>(in_dev.get(), out_dev.get(), p);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();
    int mismatches = 0, masked = 0;
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        bool is_masked = false;
        switch (p.kind) {
          case mask_kind::upper:
          case mask_kind::upper_default_value: is_masked = c - r > p.diagonal; break;
          case mask_kind::lower: is_masked = c - r < p.diagonal; break;
          case mask_kind::tail: is_masked = r >= p.valid_rows || c >= p.valid_cols; break;
        }
        masked += is_masked;
        const float expected = is_masked ? p.value : in[r * C + c];
        mismatches += !(out[r * C + c] == expected);  // NaN (unwritten) never compares equal
      }
    EXPECT_EQ(mismatches, 0) << "(" << masked << " of " << R * C << " elements masked)";
  }
}

class WarpMasks : public tkt::GpuTest {};

TEST_F(WarpMasks, FloatRow16x16) { check_masks<rt<float, 16, 16, layout::row>>(); }
TEST_F(WarpMasks, FloatCol32x64) { check_masks<rt<float, 32, 64, layout::col>>(); }
TEST_F(WarpMasks, Bf16Row64x32) { check_masks<rt<bf16, 64, 32, layout::row>>(); }
TEST_F(WarpMasks, Fp16Col16x48) { check_masks<rt<fp16, 16, 48, layout::col>>(); }

}  // namespace
