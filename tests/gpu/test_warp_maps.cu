// GPU tests of the warp-scope fills, element-wise maps and element-type
// conversions (ops/warp/{fill,maps,conversions}.cuh), on register tiles of
// every element type and both layouts, and on register vectors of both
// distributions. Each test loads random inputs with the reference per-element
// I/O (tests/common/register_io.cuh), runs one op in a one-warp kernel, and
// compares with an fp64 CPU reference computed from the same (rounded) inputs.
#include <gtest/gtest.h>

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

enum class tile_op {
  fill, zero, fill_neg_infinity,
  map_unary, map_binary, map_indexed,
  add, sub, mul, div, max, min,
  add_scalar, sub_scalar, mul_scalar, div_scalar, max_scalar, min_scalar,
  exp2, exp, log2, log, abs, neg, copy,
};

// Constants the kernels and the references share.
constexpr float fill_value = 0.3f;
constexpr float scalar_operand = 0.75f;
constexpr float max_min_scalar = 0.1f;  // inside the input range, so max/min really select

// a in [-2, 2) (any sign), b in [0.25, 2) (positive: a divisor and a log argument).
constexpr float a_low = -2.f, a_high = 2.f, b_low = 0.25f, b_high = 2.f;

template <class Tile>
__global__ void tile_op_kernel(const float* a_in, const float* b_in, float* out, tile_op op) {
  Tile a, b, d;
  tkt::reference_load(a, a_in, Tile::cols);
  tkt::reference_load(b, b_in, Tile::cols);
  switch (op) {
    case tile_op::fill: warp::fill(d, fill_value); break;
    case tile_op::zero: warp::zero(d); break;
    case tile_op::fill_neg_infinity: warp::fill_neg_infinity(d); break;
    case tile_op::map_unary: warp::map(d, a, [](float x) { return 3.f * x * x - 1.f; }); break;
    case tile_op::map_binary: warp::map(d, a, b, [](float x, float y) { return x * y + y; }); break;
    case tile_op::map_indexed:
      warp::map_indexed(d, a, [](int r, int c, float x) { return x + float(r) - 0.5f * float(c); });
      break;
    case tile_op::add: warp::add(d, a, b); break;
    case tile_op::sub: warp::sub(d, a, b); break;
    case tile_op::mul: warp::mul(d, a, b); break;
    case tile_op::div: warp::div(d, a, b); break;
    case tile_op::max: warp::max(d, a, b); break;
    case tile_op::min: warp::min(d, a, b); break;
    case tile_op::add_scalar: warp::add(d, a, scalar_operand); break;
    case tile_op::sub_scalar: warp::sub(d, a, scalar_operand); break;
    case tile_op::mul_scalar: warp::mul(d, a, scalar_operand); break;
    case tile_op::div_scalar: warp::div(d, a, scalar_operand); break;
    case tile_op::max_scalar: warp::max(d, a, max_min_scalar); break;
    case tile_op::min_scalar: warp::min(d, a, max_min_scalar); break;
    case tile_op::exp2: warp::exp2(d, a); break;
    case tile_op::exp: warp::exp(d, a); break;
    case tile_op::log2: warp::log2(d, b); break;
    case tile_op::log: warp::log(d, b); break;
    case tile_op::abs: warp::abs(d, a); break;
    case tile_op::neg:
      d = a;
      warp::neg(d, d);  // in place: dst aliases src
      break;
    case tile_op::copy: warp::copy(d, a); break;
  }
  tkt::reference_store(out, Tile::cols, d);
}

// Inputs rounded to T, so the reference sees exactly what the kernel sees.
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

struct tile_case {
  tile_op op;
  const char* name;
  std::function<double(int r, int c, double a, double b)> reference;
};

double reference_max(double x, double y) { return x > y ? x : y; }
double reference_min(double x, double y) { return x < y ? x : y; }

const std::vector<tile_case>& tile_cases() {
  static const std::vector<tile_case> cases = {
      {tile_op::fill, "fill", [](int, int, double, double) { return double(fill_value); }},
      {tile_op::zero, "zero", [](int, int, double, double) { return 0.0; }},
      {tile_op::map_unary, "map_unary", [](int, int, double a, double) { return 3 * a * a - 1; }},
      {tile_op::map_binary, "map_binary", [](int, int, double a, double b) { return a * b + b; }},
      {tile_op::map_indexed, "map_indexed", [](int r, int c, double a, double) { return a + r - 0.5 * c; }},
      {tile_op::add, "add", [](int, int, double a, double b) { return a + b; }},
      {tile_op::sub, "sub", [](int, int, double a, double b) { return a - b; }},
      {tile_op::mul, "mul", [](int, int, double a, double b) { return a * b; }},
      {tile_op::div, "div", [](int, int, double a, double b) { return a / b; }},
      {tile_op::max, "max", [](int, int, double a, double b) { return reference_max(a, b); }},
      {tile_op::min, "min", [](int, int, double a, double b) { return reference_min(a, b); }},
      {tile_op::add_scalar, "add_scalar", [](int, int, double a, double) { return a + scalar_operand; }},
      {tile_op::sub_scalar, "sub_scalar", [](int, int, double a, double) { return a - scalar_operand; }},
      {tile_op::mul_scalar, "mul_scalar", [](int, int, double a, double) { return a * scalar_operand; }},
      {tile_op::div_scalar, "div_scalar", [](int, int, double a, double) { return a / scalar_operand; }},
      {tile_op::max_scalar, "max_scalar", [](int, int, double a, double) { return reference_max(a, max_min_scalar); }},
      {tile_op::min_scalar, "min_scalar", [](int, int, double a, double) { return reference_min(a, max_min_scalar); }},
      {tile_op::exp2, "exp2", [](int, int, double a, double) { return std::exp2(a); }},
      {tile_op::exp, "exp", [](int, int, double a, double) { return std::exp(a); }},
      {tile_op::log2, "log2", [](int, int, double, double b) { return std::log2(b); }},
      {tile_op::log, "log", [](int, int, double, double b) { return std::log(b); }},
      {tile_op::abs, "abs", [](int, int, double a, double) { return std::abs(a); }},
      {tile_op::neg, "neg", [](int, int, double a, double) { return -a; }},
      {tile_op::copy, "copy", [](int, int, double a, double) { return a; }},
  };
  return cases;
}

template <class Tile>
void check_tile_ops() {
  using T = typename Tile::element;
  constexpr int n = Tile::rows * Tile::cols;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> a = random_rounded<T>(n, rng, a_low, a_high);
  const std::vector<float> b = random_rounded<T>(n, rng, b_low, b_high);
  device_buffer<float> a_dev(a), b_dev(b), out_dev(n);

  for (const tile_case& c : tile_cases()) {
    SCOPED_TRACE(tile_name<Tile>() + " " + c.name);
    out_dev.poison();
    tile_op_kernel<Tile><<<1, warp_threads>>>(a_dev.get(), b_dev.get(), out_dev.get(), c.op);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();
    std::vector<double> ref(n);
    for (int r = 0; r < Tile::rows; ++r)
      for (int col = 0; col < Tile::cols; ++col) {
        const int idx = r * Tile::cols + col;
        ref[idx] = c.reference(r, col, a[idx], b[idx]);
      }
    // Results are rounded once to T; the fast exp2/log2 paths add ~2^-22 relative.
    TILEKIT_EXPECT_CLOSE(out, ref, tkt::tolerance<T>());
  }

  // -infinity cannot go through a relative norm: check it element by element.
  out_dev.poison();
  tile_op_kernel<Tile><<<1, warp_threads>>>(a_dev.get(), b_dev.get(), out_dev.get(), tile_op::fill_neg_infinity);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> out = out_dev.download();
  int wrong = 0;
  for (float x : out) wrong += !(std::isinf(x) && x < 0);
  EXPECT_EQ(wrong, 0) << tile_name<Tile>() << " fill_neg_infinity: elements that are not -inf";
}

class WarpMaps : public tkt::GpuTest {};

TEST_F(WarpMaps, FloatRow16x16) { check_tile_ops<rt<float, 16, 16, layout::row>>(); }
TEST_F(WarpMaps, FloatCol32x64) { check_tile_ops<rt<float, 32, 64, layout::col>>(); }
TEST_F(WarpMaps, Bf16Row64x16) { check_tile_ops<rt<bf16, 64, 16, layout::row>>(); }
TEST_F(WarpMaps, Bf16Col32x32) { check_tile_ops<rt<bf16, 32, 32, layout::col>>(); }
TEST_F(WarpMaps, Fp16Row16x48) { check_tile_ops<rt<fp16, 16, 48, layout::row>>(); }

// ---------------------------------------------------------------------------
// Vectors.
// ---------------------------------------------------------------------------
enum class vector_op { fill, add, sub, mul_scalar, max, exp2_in_place, map_indexed };

template <class Vec>
__global__ void vector_op_kernel(const float* a_in, const float* b_in, float* out, vector_op op) {
  Vec a, b, d;
  tkt::reference_load(a, a_in);
  tkt::reference_load(b, b_in);
  switch (op) {
    case vector_op::fill: warp::fill(d, fill_value); break;
    case vector_op::add: warp::add(d, a, b); break;
    case vector_op::sub: warp::sub(d, a, b); break;
    case vector_op::mul_scalar: warp::mul(d, a, scalar_operand); break;
    case vector_op::max: warp::max(d, a, b); break;
    case vector_op::exp2_in_place:
      d = a;
      warp::exp2(d, d);
      break;
    case vector_op::map_indexed: warp::map_indexed(d, a, [](int n, float x) { return x * float(n); }); break;
  }
  tkt::reference_store(out, d);
}

template <class Vec>
void check_vector_ops() {
  using T = typename Vec::element;
  constexpr int n = Vec::length;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> a = random_rounded<T>(n, rng, a_low, a_high);
  const std::vector<float> b = random_rounded<T>(n, rng, a_low, a_high);
  device_buffer<float> a_dev(a), b_dev(b), out_dev(n);
  struct vector_case {
    vector_op op;
    const char* name;
    std::function<double(int, double, double)> reference;
  };
  const std::vector<vector_case> cases = {
      {vector_op::fill, "fill", [](int, double, double) { return double(fill_value); }},
      {vector_op::add, "add", [](int, double x, double y) { return x + y; }},
      {vector_op::sub, "sub", [](int, double x, double y) { return x - y; }},
      {vector_op::mul_scalar, "mul_scalar", [](int, double x, double) { return x * scalar_operand; }},
      {vector_op::max, "max", [](int, double x, double y) { return reference_max(x, y); }},
      {vector_op::exp2_in_place, "exp2_in_place", [](int, double x, double) { return std::exp2(x); }},
      {vector_op::map_indexed, "map_indexed", [](int i, double x, double) { return x * i; }},
  };
  for (const vector_case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + " on rv<" + dtype_traits<T>::name + ", " + std::to_string(n) +
                 (Vec::layout_kind == vec_layout::grouped ? ", grouped>" : ", paired>"));
    out_dev.poison();
    vector_op_kernel<Vec><<<1, warp_threads>>>(a_dev.get(), b_dev.get(), out_dev.get(), c.op);
    TILEKIT_CHECK_CUDA(cudaGetLastError());
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<float> out = out_dev.download();
    std::vector<double> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = c.reference(i, a[i], b[i]);
    TILEKIT_EXPECT_CLOSE(out, ref, tkt::tolerance<T>());
  }
}

TEST_F(WarpMaps, VectorFloatGrouped32) { check_vector_ops<rv<float, 32, vec_layout::grouped>>(); }
TEST_F(WarpMaps, VectorBf16Paired64) { check_vector_ops<rv<bf16, 64, vec_layout::paired>>(); }

// ---------------------------------------------------------------------------
// Element-type conversions: copy(dst, src) rounds to nearest even, exactly
// like the host conversion, and keeps every element in place.
// ---------------------------------------------------------------------------
template <class Dst, class Src>
__global__ void convert_tile_kernel(const float* in, float* out) {
  Src src;
  Dst dst;
  tkt::reference_load(src, in, Src::cols);
  warp::copy(dst, src);
  tkt::reference_store(out, Dst::cols, dst);
}
template <class Dst, class Src>
__global__ void convert_vector_kernel(const float* in, float* out) {
  Src src;
  Dst dst;
  tkt::reference_load(src, in);
  warp::copy(dst, src);
  tkt::reference_store(out, dst);
}

// Expected output of converting `in` (exact in Src's element type) to DstT: the host conversion.
template <class DstT>
std::vector<float> host_converted(const std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = convert<float>(convert<DstT>(in[i]));
  return out;
}

template <class Dst, class Src>
void check_tile_conversion() {
  SCOPED_TRACE(tile_name<Src>() + " -> " + tile_name<Dst>());
  constexpr int n = Src::rows * Src::cols;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> in = random_rounded<typename Src::element>(n, rng, a_low, a_high);
  device_buffer<float> in_dev(in), out_dev(n);
  convert_tile_kernel<Dst, Src><<<1, warp_threads>>>(in_dev.get(), out_dev.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> out = out_dev.download();
  const std::vector<float> expected = host_converted<typename Dst::element>(in);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) mismatches += !(out[i] == expected[i]);
  EXPECT_EQ(mismatches, 0) << "elements that differ from the host round-to-nearest-even conversion";
}

TEST_F(WarpMaps, ConvertFloatToBf16Row) {
  check_tile_conversion<rt<bf16, 32, 32, layout::row>, rt<float, 32, 32, layout::row>>();
}
TEST_F(WarpMaps, ConvertFloatToFp16Col) {
  check_tile_conversion<rt<fp16, 16, 48, layout::col>, rt<float, 16, 48, layout::col>>();
}
TEST_F(WarpMaps, ConvertBf16ToFloatCol) {
  check_tile_conversion<rt<float, 64, 16, layout::col>, rt<bf16, 64, 16, layout::col>>();
}
TEST_F(WarpMaps, ConvertFp16ToBf16Row) {
  check_tile_conversion<rt<bf16, 16, 16, layout::row>, rt<fp16, 16, 16, layout::row>>();
}

TEST_F(WarpMaps, ConvertVectorFloatToBf16) {
  using Src = rv<float, 48, vec_layout::paired>;
  using Dst = rv<bf16, 48, vec_layout::paired>;
  std::mt19937_64 rng(tkt::test_seed());
  const std::vector<float> in = tkt::random_vector<float>(Src::length, rng, a_low, a_high);
  device_buffer<float> in_dev(in), out_dev(Src::length);
  convert_vector_kernel<Dst, Src><<<1, warp_threads>>>(in_dev.get(), out_dev.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> out = out_dev.download();
  const std::vector<float> expected = host_converted<bf16>(in);
  int mismatches = 0;
  for (int i = 0; i < Src::length; ++i) mismatches += !(out[i] == expected[i]);
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
