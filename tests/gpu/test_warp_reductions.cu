// GPU tests of the warp-scope row/column reductions and broadcasts
// (ops/warp/{reductions,broadcasts}.cuh) on both tile layouts, fp32 and
// 16-bit tiles, several shapes. Reductions must leave the complete result in
// EVERY lane that holds a vector entry, so each lane writes its own copy of
// the vector and every copy is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

enum class reduction_op {
  row_max, row_min, row_sum, col_max, col_min, col_sum,
  row_max_prev, row_sum_prev, col_max_prev, col_sum_prev, row_min_prev, col_min_prev,
  row_reduce_generic, col_reduce_generic, row_reduce_generic_prev,
  row_sum_bf16,  // result vector in bf16
};

constexpr float generic_init = 0.25f;  // below most |row maxima|, so it rarely decides the result
// A generic associative, commutative op: the largest magnitude.
struct max_abs_op {
  __device__ float operator()(float x, float y) const { return fmaxf(fabsf(x), fabsf(y)); }
};

// Every lane writes every entry it holds to its own row of out: out[lane * N + entry].
template <class Vec>
__device__ void store_per_lane(float* out, const Vec& v) {
  const int lane = threadIdx.x % warp_threads;
#pragma unroll
  for (int i = 0; i < Vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Vec::per_fragment; ++e)
      out[lane * Vec::length + Vec::index(lane, i, e)] = convert<float>(v.data[i][e]);
}

template <class Tile>
__global__ void reduction_kernel(const float* tile_in, const float* prev_rows_in, const float* prev_cols_in,
                                 float* out, reduction_op op) {
  Tile t;
  tkt::reference_load(t, tile_in, Tile::cols);
  row_vec<Tile> rows, prev_rows;
  col_vec<Tile> cols, prev_cols;
  row_vec<Tile, bf16> rows_bf16;
  tkt::reference_load(prev_rows, prev_rows_in);
  tkt::reference_load(prev_cols, prev_cols_in);
  switch (op) {
    case reduction_op::row_max: warp::row_max(rows, t); break;
    case reduction_op::row_min: warp::row_min(rows, t); break;
    case reduction_op::row_sum: warp::row_sum(rows, t); break;
    case reduction_op::col_max: warp::col_max(cols, t); break;
    case reduction_op::col_min: warp::col_min(cols, t); break;
    case reduction_op::col_sum: warp::col_sum(cols, t); break;
    case reduction_op::row_max_prev:
      rows = prev_rows;
      warp::row_max(rows, t, rows);  // dst aliases prev, as in online softmax
      break;
    case reduction_op::row_sum_prev: warp::row_sum(rows, t, prev_rows); break;
    case reduction_op::row_min_prev: warp::row_min(rows, t, prev_rows); break;
    case reduction_op::col_max_prev: warp::col_max(cols, t, prev_cols); break;
    case reduction_op::col_sum_prev:
      cols = prev_cols;
      warp::col_sum(cols, t, cols);
      break;
    case reduction_op::col_min_prev: warp::col_min(cols, t, prev_cols); break;
    case reduction_op::row_reduce_generic: warp::row_reduce(rows, t, max_abs_op{}, generic_init); break;
    case reduction_op::col_reduce_generic:
      warp::col_reduce(cols, t, [](float x, float y) { return x + y; }, generic_init);
      break;
    case reduction_op::row_reduce_generic_prev: warp::row_reduce(rows, t, max_abs_op{}, prev_rows); break;
    case reduction_op::row_sum_bf16: warp::row_sum(rows_bf16, t); break;
  }
  const bool per_row = op == reduction_op::row_max || op == reduction_op::row_min || op == reduction_op::row_sum ||
                       op == reduction_op::row_max_prev || op == reduction_op::row_sum_prev ||
                       op == reduction_op::row_min_prev || op == reduction_op::row_reduce_generic ||
                       op == reduction_op::row_reduce_generic_prev;
  if (op == reduction_op::row_sum_bf16) store_per_lane(out, rows_bf16);
  else if (per_row) store_per_lane(out, rows);
  else store_per_lane(out, cols);
}

template <class T>
std::vector<float> random_rounded(size_t n, std::mt19937_64& rng, float lo, float hi) {
  std::vector<float> v = tkt::random_vector<float>(n, rng, lo, hi);
  for (auto& x : v) x = convert<float>(convert<T>(x));
  return v;
}

template <class Tile>
std::string tile_name() {
  return std::string("rt<") + dtype_traits<typename Tile::element>::name + ", " + std::to_string(Tile::rows) + ", " +
         std::to_string(Tile::cols) + (Tile::tile_layout == layout::row ? ", row>" : ", col>");
}

enum class fold { max, min, sum, max_abs };
double apply_fold(fold f, double acc, double x) {
  switch (f) {
    case fold::max: return std::max(acc, x);
    case fold::min: return std::min(acc, x);
    case fold::sum: return acc + x;
    case fold::max_abs: return std::max(std::abs(acc), std::abs(x));
  }
  return 0;
}

struct reduction_case {
  reduction_op op;
  const char* name;
  bool per_row;
  fold f;
  enum { none, scalar, previous } initial;
  bool bf16_result;
};

template <class Tile>
void check_reductions() {
  using T = typename Tile::element;
  constexpr int R = Tile::rows, C = Tile::cols;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> tile = random_rounded<T>(R * C, rng, -1.f, 1.f);
  // prev spans a wider range than a row's max/min/sum, so it wins for some entries and loses for others.
  const std::vector<float> prev_rows = tkt::random_vector<float>(R, rng, -3.f, 3.f);
  const std::vector<float> prev_cols = tkt::random_vector<float>(C, rng, -3.f, 3.f);
  device_buffer<float> tile_dev(tile), prev_rows_dev(prev_rows), prev_cols_dev(prev_cols);
  device_buffer<float> out_dev(size_t(warp_threads) * std::max(R, C));

  const std::vector<reduction_case> cases = {
      {reduction_op::row_max, "row_max", true, fold::max, reduction_case::none, false},
      {reduction_op::row_min, "row_min", true, fold::min, reduction_case::none, false},
      {reduction_op::row_sum, "row_sum", true, fold::sum, reduction_case::none, false},
      {reduction_op::col_max, "col_max", false, fold::max, reduction_case::none, false},
      {reduction_op::col_min, "col_min", false, fold::min, reduction_case::none, false},
      {reduction_op::col_sum, "col_sum", false, fold::sum, reduction_case::none, false},
      {reduction_op::row_max_prev, "row_max_prev", true, fold::max, reduction_case::previous, false},
      {reduction_op::row_sum_prev, "row_sum_prev", true, fold::sum, reduction_case::previous, false},
      {reduction_op::row_min_prev, "row_min_prev", true, fold::min, reduction_case::previous, false},
      {reduction_op::col_max_prev, "col_max_prev", false, fold::max, reduction_case::previous, false},
      {reduction_op::col_sum_prev, "col_sum_prev", false, fold::sum, reduction_case::previous, false},
      {reduction_op::col_min_prev, "col_min_prev", false, fold::min, reduction_case::previous, false},
      {reduction_op::row_reduce_generic, "row_reduce_generic", true, fold::max_abs, reduction_case::scalar, false},
      {reduction_op::col_reduce_generic, "col_reduce_generic", false, fold::sum, reduction_case::scalar, false},
      {reduction_op::row_reduce_generic_prev, "row_reduce_generic_prev", true, fold::max_abs,
       reduction_case::previous, false},
      {reduction_op::row_sum_bf16, "row_sum_bf16", true, fold::sum, reduction_case::none, true},
  };

  for (const reduction_case& c : cases) {
    SCOPED_TRACE(tile_name<Tile>() + " " + c.name);
    out_dev.poison();
    reduction_kernel<Tile><<<1, warp_threads>>>(tile_dev.get(), prev_rows_dev.get(), prev_cols_dev.get(),
                                                out_dev.get(), c.op);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();

    const int n = c.per_row ? R : C;
    std::vector<double> expected(n);
    for (int v = 0; v < n; ++v) {
      double acc = c.initial == reduction_case::scalar     ? double(generic_init)
                   : c.initial == reduction_case::previous ? double(c.per_row ? prev_rows[v] : prev_cols[v])
                                                           : (c.per_row ? tile[v * C] : tile[v]);
      const int first = c.initial == reduction_case::none ? 1 : 0;
      for (int o = first; o < (c.per_row ? C : R); ++o)
        acc = apply_fold(c.f, acc, c.per_row ? tile[v * C + o] : tile[o * C + v]);
      expected[v] = acc;
    }
    // Gather what every lane holds (lanes hold 2 or 4 entries per 16, replicated over the lanes that share them).
    const vec_layout kind = c.per_row ? row_vec_layout<Tile> : col_vec_layout<Tile>;
    const int per_fragment = kind == vec_layout::grouped ? 2 : 4;
    std::vector<float> got;
    std::vector<double> ref;
    for (int lane = 0; lane < warp_threads; ++lane)
      for (int i = 0; i < n / fragment_dim; ++i)
        for (int e = 0; e < per_fragment; ++e) {
          const int entry = kind == vec_layout::grouped ? rv<float, fragment_dim, vec_layout::grouped>::index(lane, 0, e)
                                                        : rv<float, fragment_dim, vec_layout::paired>::index(lane, 0, e);
          const int idx = i * fragment_dim + entry;
          got.push_back(out[lane * n + idx]);
          ref.push_back(expected[idx]);
        }
    // Inputs are exact in T and the arithmetic is fp32: sums of <= 64 terms of
    // magnitude <= 1 are off by a few fp32 ulps; max/min are exact. A bf16
    // result vector is rounded once (2^-9 relative).
    TILEKIT_EXPECT_CLOSE(got, ref, c.bf16_result ? tkt::tolerance<bf16>() : tkt::tolerance<float>());
  }
}

class WarpReductions : public tkt::GpuTest {};

TEST_F(WarpReductions, FloatRow16x16) { check_reductions<rt<float, 16, 16, layout::row>>(); }
TEST_F(WarpReductions, FloatCol32x64) { check_reductions<rt<float, 32, 64, layout::col>>(); }
TEST_F(WarpReductions, Bf16Row64x16) { check_reductions<rt<bf16, 64, 16, layout::row>>(); }
TEST_F(WarpReductions, Bf16Col16x48) { check_reductions<rt<bf16, 16, 48, layout::col>>(); }
TEST_F(WarpReductions, Fp16Row32x32) { check_reductions<rt<fp16, 32, 32, layout::row>>(); }

// ---------------------------------------------------------------------------
// Broadcasts.
// ---------------------------------------------------------------------------
enum class broadcast_op { add_row, sub_row, mul_row, div_row, add_col, sub_col, mul_col, div_col, row, col };

template <class Tile>
__global__ void broadcast_kernel(const float* tile_in, const float* rows_in, const float* cols_in, float* out,
                                 broadcast_op op) {
  Tile t, d;
  tkt::reference_load(t, tile_in, Tile::cols);
  row_vec<Tile> rows;
  col_vec<Tile, typename Tile::element> cols;  // the vector's element type need not be float
  tkt::reference_load(rows, rows_in);
  tkt::reference_load(cols, cols_in);
  switch (op) {
    case broadcast_op::add_row: warp::add_row(d, t, rows); break;
    case broadcast_op::sub_row: warp::sub_row(d, t, rows); break;
    case broadcast_op::mul_row: warp::mul_row(d, t, rows); break;
    case broadcast_op::div_row:
      d = t;
      warp::div_row(d, d, rows);  // in place
      break;
    case broadcast_op::add_col: warp::add_col(d, t, cols); break;
    case broadcast_op::sub_col: warp::sub_col(d, t, cols); break;
    case broadcast_op::mul_col: warp::mul_col(d, t, cols); break;
    case broadcast_op::div_col: warp::div_col(d, t, cols); break;
    case broadcast_op::row: warp::broadcast_row(d, rows); break;
    case broadcast_op::col: warp::broadcast_col(d, cols); break;
  }
  tkt::reference_store(out, Tile::cols, d);
}

template <class Tile>
void check_broadcasts() {
  using T = typename Tile::element;
  constexpr int R = Tile::rows, C = Tile::cols;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> tile = random_rounded<T>(R * C, rng, -1.f, 1.f);
  // Positive, away from 0: they are also divisors.
  const std::vector<float> rows = random_rounded<float>(R, rng, 0.5f, 2.f);
  const std::vector<float> cols = random_rounded<T>(C, rng, 0.5f, 2.f);
  device_buffer<float> tile_dev(tile), rows_dev(rows), cols_dev(cols), out_dev(R * C);
  struct broadcast_case {
    broadcast_op op;
    const char* name;
    std::function<double(double x, double row_value, double col_value)> reference;
  };
  const std::vector<broadcast_case> cases = {
      {broadcast_op::add_row, "add_row", [](double x, double r, double) { return x + r; }},
      {broadcast_op::sub_row, "sub_row", [](double x, double r, double) { return x - r; }},
      {broadcast_op::mul_row, "mul_row", [](double x, double r, double) { return x * r; }},
      {broadcast_op::div_row, "div_row", [](double x, double r, double) { return x / r; }},
      {broadcast_op::add_col, "add_col", [](double x, double, double c) { return x + c; }},
      {broadcast_op::sub_col, "sub_col", [](double x, double, double c) { return x - c; }},
      {broadcast_op::mul_col, "mul_col", [](double x, double, double c) { return x * c; }},
      {broadcast_op::div_col, "div_col", [](double x, double, double c) { return x / c; }},
      {broadcast_op::row, "broadcast_row", [](double, double r, double) { return r; }},
      {broadcast_op::col, "broadcast_col", [](double, double, double c) { return c; }},
  };
  for (const broadcast_case& c : cases) {
    SCOPED_TRACE(tile_name<Tile>() + " " + c.name);
    out_dev.poison();
    broadcast_kernel<Tile><<<1, warp_threads>>>(tile_dev.get(), rows_dev.get(), cols_dev.get(), out_dev.get(), c.op);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();
    std::vector<double> ref(R * C);
    for (int r = 0; r < R; ++r)
      for (int col = 0; col < C; ++col) ref[r * C + col] = c.reference(tile[r * C + col], rows[r], cols[col]);
    // One fp32 operation, rounded once to T.
    TILEKIT_EXPECT_CLOSE(out, ref, tkt::tolerance<T>());
  }
}

TEST_F(WarpReductions, BroadcastFloatRow16x32) { check_broadcasts<rt<float, 16, 32, layout::row>>(); }
TEST_F(WarpReductions, BroadcastFloatCol64x16) { check_broadcasts<rt<float, 64, 16, layout::col>>(); }
TEST_F(WarpReductions, BroadcastBf16Row32x64) { check_broadcasts<rt<bf16, 32, 64, layout::row>>(); }
TEST_F(WarpReductions, BroadcastBf16Col16x16) { check_broadcasts<rt<bf16, 16, 16, layout::col>>(); }

}  // namespace
