// GPU tests: softmax forward and backward (kernels/softmax) against fp64 CPU references.
//
// Shapes cover every size class of the configuration tables (kernels/common/row_kernel.cuh):
// warp per row, CTA per row, clusters of 2..16 CTAs, widths that are not a multiple of
// anything (7, 100, 1000, 4097, 65543, ...; `widths`), rows = 1, and strided rows whose starts
// are either 16-byte aligned or not (the shifted stream). Outputs are poisoned (NaN) and the
// padding between rows is checked to stay poisoned.
//
// Tolerances: the kernels compute in fp32 from the same rounded inputs as the reference and round
// once to T, so each element is checked against the fp32 computation's error beyond that
// rounding (compare_scaled, gpu_test.cuh), which an error far below bf16's rounding (a row's sum
// off by 0.1%) exceeds: ex2.approx (2^-22 relative), its argument rounded (|x - max| log2e up to
// ~90: 2^-18 in log2 units, 2.6e-6 relative in y), and sums of up to 262144 terms in fp32
// (per-thread chains of 32, then a tree: ~45 roundings deep, 2.7e-6 at worst), within 1e-5
// (arithmetic_tolerance), each against its scale:
//  * y against |y| itself (each probability relative to its own size, fp16 subnormals met to
//    half their step by the rounding; down to fp32's smallest normal, below which ex2.approx.ftz
//    gives 0), widened for rows of large logits, whose exponents are rounded at their size
//    (softmax_scales);
//  * dx = y (dy - sum(y dy)) against its own terms, |y| (|dy| + sum |y dy|) (the sum's fp32
//    error is relative to the sum of its terms' sizes; dy - sum cancels).
// Besides, the norm-wise error within tolerance<T>() (fp32: 1e-5): where a scale is well above
// |ref| (rows of large logits), that is the tighter check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "common/gpu_test.cuh"
#include "softmax/softmax.h"

namespace {

using namespace tilekit;
using namespace tilekit::testing;
namespace tk = tilekit::kernels;

class Softmax : public GpuTest {};

template <class T>
dtype type_of() {
  return dtype_traits<T>::tag;
}

struct shape {
  int64_t rows;
  int64_t cols;
  int64_t pad;  // row stride = cols + pad
};

// Rows per width: enough to cover several CTAs (and the warp-per-row tail CTA), while keeping
// the fp64 reference around a million elements.
constexpr int64_t reference_elements = int64_t(1) << 20;
int64_t rows_for(int64_t cols, int64_t max_rows = 67) {
  return std::max<int64_t>(1, std::min<int64_t>(max_rows, reference_elements / cols));
}

// The widths: 1, the largest, aligned ones (1000, 1024, 8192), and an odd width in every size
// class of the tables (kernels/common/row_kernel.cuh), whose rows do not start 16-byte aligned
// (the shifted stream), 16-bit and fp32 alike: 7 (256 columns), 1023 (1K), 1501 (2K), 3001 (4K),
// 4097 (8K), 12289 (16K), 30001 (32K), 50001 (64K), 65543 (128K), 262143 (256K).
const int64_t widths[] = {1,    7,     100,   1000,  1023,  1024,  1501,   3001,
                          4097, 8192,  12289, 30001, 50001, 65543, 262143, 262144};

// Returns the [rows, cols] elements of a strided buffer, and counts padding elements that are
// no longer poisoned (a write outside the rows).
template <class T>
std::vector<T> unpad(const std::vector<T>& strided, const shape& s, size_t* padding_overwritten) {
  std::vector<T> dense(size_t(s.rows * s.cols));
  const int64_t stride = s.cols + s.pad;
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c) dense[size_t(r * s.cols + c)] = strided[size_t(r * stride + c)];
  *padding_overwritten += padding_written(strided, s.rows, s.cols, stride);
  return dense;
}

// Random strided input; the padding between rows holds 60, far above every drawn value, so a
// kernel that took it into a row's max, sum or dot would be far off (random values in range
// moved a bf16 softmax by only ~pad / cols).
template <class T>
std::vector<T> random_strided(const shape& s, std::mt19937_64& rng, float lo, float hi) {
  std::vector<T> v = random_vector<T>(size_t(s.rows * (s.cols + s.pad)), rng, lo, hi);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = s.cols; c < s.cols + s.pad; ++c) v[size_t(r * (s.cols + s.pad) + c)] = convert<T>(60.0f);
  return v;
}

// fp64 softmax of each row of the strided input (dense output).
template <class T>
std::vector<double> softmax_reference(const std::vector<T>& x, const shape& s) {
  std::vector<double> y(size_t(s.rows * s.cols));
  const int64_t stride = s.cols + s.pad;
  for (int64_t r = 0; r < s.rows; ++r) {
    double m = -INFINITY;
    for (int64_t c = 0; c < s.cols; ++c) m = std::max(m, to_double(x[size_t(r * stride + c)]));
    double sum = 0;
    for (int64_t c = 0; c < s.cols; ++c) sum += std::exp(to_double(x[size_t(r * stride + c)]) - m);
    for (int64_t c = 0; c < s.cols; ++c)
      y[size_t(r * s.cols + c)] = std::exp(to_double(x[size_t(r * stride + c)]) - m) / sum;
  }
  return y;
}

// The scale of each output: |y| (1 + (|max| + |x - max|) / 64). The exponent's argument is
// formed in fp32 from logits of the row's size (x log2e less the row's base, or with log2 of the
// sum folded into that shift), so its roundings, within 2^-24 (|max| log2e) and 2^-24 |x - max|
// log2e in log2 units, move y by up to 2^-24 (|max| + |x - max|) relative: 5.4e-5 for rows near
// -900. 1e-5 / 64 per unit of the logits' size is 2.6 x 2^-24; rows of logits within +-10 keep
// the bound within 1.5e-5 of each y. Measured (H100, 2026-12-06, tools/device_margins.sh):
// against 1e-5 |y| alone 1.2e-5 in ForwardWideClassesOf16BitRows (its rows near 500 and -880), at
// most 3.2e-6 elsewhere; against these scales at most 1.5e-6 (dx: 1.8e-7).
// Exponentials below fp32's smallest normal are 0 (ex2.approx.ftz): no scale is below
// 2^-126 / arithmetic_tolerance (1.2e-33).
template <class T>
std::vector<double> softmax_scales(const std::vector<T>& x, const std::vector<double>& y, const shape& s) {
  std::vector<double> scale(size_t(s.rows * s.cols));
  const int64_t stride = s.cols + s.pad;
  for (int64_t r = 0; r < s.rows; ++r) {
    double m = -INFINITY;
    for (int64_t c = 0; c < s.cols; ++c) m = std::max(m, to_double(x[size_t(r * stride + c)]));
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      scale[i] = std::max(std::abs(y[i]) * (1 + (std::abs(m) + std::abs(to_double(x[size_t(r * stride + c)]) - m)) / 64),
                          0x1p-126 / arithmetic_tolerance);
    }
  }
  return scale;
}

// The kernel's softmax y of the strided input x against the fp64 reference, element by element.
template <class T>
void expect_softmax_close(const std::vector<T>& y, const std::vector<T>& x, const shape& s) {
  const std::vector<double> ref = softmax_reference(x, s);
  TILEKIT_EXPECT_CLOSE(y, ref, tolerance<T>());
  TILEKIT_EXPECT_CLOSE_SCALED(y, ref, softmax_scales(x, ref, s), arithmetic_tolerance);
}

// The kernel's softmax of the strided input x (dense), after checking that it wrote nothing
// into the padding between rows.
template <class T>
std::vector<T> softmax_of(const shape& s, const std::vector<T>& x) {
  device_buffer<T> x_device(x);
  device_buffer<T> y_device(x.size());  // poisoned
  const int64_t stride = s.cols + s.pad;
  tk::softmax_forward({.y = y_device.get(),
                       .x = x_device.get(),
                       .rows = s.rows,
                       .cols = s.cols,
                       .x_row_stride = stride,
                       .y_row_stride = stride,
                       .type = type_of<T>()},
                      nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  size_t overwritten = 0;
  const std::vector<T> y = unpad(y_device.download(), s, &overwritten);
  EXPECT_EQ(overwritten, 0u) << "the kernel wrote into the padding between rows";
  return y;
}

// Softmax of the strided input x against the fp64 reference, element by element.
template <class T>
void check_forward_of(const shape& s, const std::vector<T>& x) {
  expect_softmax_close(softmax_of<T>(s, x), x, s);
}

// Logits drawn in [lo, hi), each row's spread about the middle of the range scaled by 0.5 +
// 0.5 (r mod 5): rows differ in their max and sum by O(1) (period 5: no common factor with the
// row kernel's 4 posted rounds), so a row finished with another row's (base, sum) is far off
// (bf16, 262144 columns: 3e4 x even bf16's norm-wise bound 1e-2, 5e7 x the element check's,
// tools/test_strength.cpp); with rows of one distribution that moved y by only ~2.5 /
// sqrt(cols) and passed the norm-wise check.
template <class T>
void check_forward(const shape& s, uint64_t seed_offset = 0, float lo = -4.f, float hi = 4.f) {
  SCOPED_TRACE(::testing::Message() << dtype_name(type_of<T>()) << " rows=" << s.rows << " cols=" << s.cols
                                    << " pad=" << s.pad << " range=[" << lo << ", " << hi << ")");
  std::mt19937_64 rng(test_seed() + seed_offset);
  std::vector<T> x = random_strided<T>(s, rng, lo, hi);
  const float middle = 0.5f * (lo + hi);
  const int64_t stride = s.cols + s.pad;
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c) {  // the padding keeps its 60 (random_strided)
      T& v = x[size_t(r * stride + c)];
      v = convert<T>(middle + (0.5f + 0.5f * float(r % 5)) * (convert<float>(v) - middle));
    }
  check_forward_of<T>(s, x);
}

// In place (y == x).
void check_forward_in_place(const shape& s) {
  SCOPED_TRACE(::testing::Message() << "in place rows=" << s.rows << " cols=" << s.cols);
  std::mt19937_64 rng(test_seed());
  const std::vector<bf16> x = random_strided<bf16>(s, rng, -4.f, 4.f);
  device_buffer<bf16> buffer(x);
  tk::softmax_forward({.y = buffer.get(),
                       .x = buffer.get(),
                       .rows = s.rows,
                       .cols = s.cols,
                       .x_row_stride = s.cols,
                       .y_row_stride = s.cols,
                       .type = dtype::bf16},
                      nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  expect_softmax_close(buffer.download(), x, s);
}

TEST_F(Softmax, ForwardBf16AllWidths) {
  for (int64_t cols : widths) check_forward<bf16>({rows_for(cols), cols, 0});
}

TEST_F(Softmax, ForwardFp32AllWidths) {
  for (int64_t cols : widths) check_forward<float>({rows_for(cols), cols, 0});
}

TEST_F(Softmax, ForwardFp16SomeWidths) {
  for (int64_t cols : {int64_t(7), int64_t(1000), int64_t(4097), int64_t(65543)})
    check_forward<fp16>({rows_for(cols, 9), cols, 0});
}

// 16-bit rows of 32K columns and more take 64 columns per thread as packed pairs and recompute
// the exponentials in the output pass (wide_row_table in kernels/common/row_kernel.cuh): every
// one of those classes, a tail in each, large logits, a misaligned stride (shifted stream).
TEST_F(Softmax, ForwardWideClassesOf16BitRows) {
  for (int64_t cols : {int64_t(16385), int64_t(32768), int64_t(40000), int64_t(131073), int64_t(262143)}) {
    check_forward<bf16>({rows_for(cols, 5), cols, 0});
    // fp16 only below 64K: wider rows' probabilities (~1 / cols) are mostly fp16 subnormals.
    if (cols < 65536) check_forward<fp16>({rows_for(cols, 5), cols, 0});
  }
  check_forward<fp16>({3, 40000, 0}, 4, 500.f, 510.f);
  check_forward<bf16>({3, 131073, 0}, 5, -900.f, -860.f);
  check_forward<bf16>({4, 32768, 3}, 6);
  check_forward<fp16>({3, 65543, 5}, 7);
}

// The fp16 values next to v >= 0, below and above (twice v where v is one).
std::pair<double, double> fp16_neighbours(double v) {
  const fp16 r = convert<fp16>(float(v));  // one of the two (float(v) is within 2^-24 of v)
  const double rv = to_double(r);
  if (rv == v) return {rv, rv};
  uint16_t bits = 0;
  std::memcpy(&bits, &r, sizeof bits);
  bits = uint16_t(rv < v ? bits + 1 : bits - 1);  // v >= 0: the bits order the values
  fp16 other;
  std::memcpy(&other, &bits, sizeof bits);
  const double ov = to_double(other);
  return rv < ov ? std::pair{rv, ov} : std::pair{ov, rv};
}

// fp16 rows of 128K and 256K columns: probabilities ~1 / cols lie below fp16's smallest normal
// (2^-14 ~ 6.1e-5), so most outputs are subnormals, in steps of 2^-24 ~ 6e-8, whose rounding
// alone (~3e-3 relative at 256K) exceeds the relative check's 2e-3. Instead each output must be
// one of the two fp16 values around the fp64 reference (the kernel's fp32 error, ~1e-6 of the
// value, is far below one step), and most outputs must be non-zero subnormals (the premise; a
// kernel that flushed them to zero would fail the first check). The wide classes (clusters of
// 4 and 8 CTAs), aligned, odd and misaligned rows.
TEST_F(Softmax, ForwardFp16SubnormalProbabilities) {
  for (const shape& s : {shape{3, 131073, 0}, shape{2, 262143, 0}, shape{2, 262144, 0}, shape{2, 131072, 5}}) {
    SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " cols=" << s.cols << " pad=" << s.pad);
    std::mt19937_64 rng(test_seed() + uint64_t(s.cols));
    const std::vector<fp16> x = random_strided<fp16>(s, rng, -4.f, 4.f);
    const std::vector<fp16> y = softmax_of<fp16>(s, x);
    const std::vector<double> ref = softmax_reference(x, s);
    int64_t outside = 0, first = -1, subnormal = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double out = to_double(y[i]);
      const auto [below, above] = fp16_neighbours(ref[i]);
      if (out != below && out != above && outside++ == 0) first = int64_t(i);
      subnormal += out > 0 && out < 0x1p-14;
    }
    EXPECT_EQ(outside, 0) << "outputs not next to the reference; the first at " << first << ": "
                          << (first >= 0 ? to_double(y[size_t(first)]) : 0.0) << " for "
                          << (first >= 0 ? ref[size_t(first)] : 0.0);
    EXPECT_GT(subnormal, int64_t(y.size()) / 2) << "non-zero subnormal outputs";
  }
}

// From 128K columns on (clusters of 4 and 8 CTAs) those rows are deferred (softmax.cu: each
// warp posts its (base, sum) and writes y one row later from the pairs it kept): enough rows
// that every worker posts > 8 rounds (each of the 4 posted buffers reused), and in place (a
// row's y overwrites its x one row late, after its stage has been read); the undeferred
// packed classes (one CTA, 2 CTAs) with as many rows per worker.
TEST_F(Softmax, ForwardDeferredRowsManyRounds) {
  check_forward<bf16>({300, 131072, 0}, 8);
  check_forward<bf16>({150, 262144, 0}, 9);
  check_forward_in_place({300, 100000, 0});
  check_forward<bf16>({1200, 32768, 0}, 10);
  check_forward<fp16>({600, 40000, 0}, 11);
}

// 16-bit rows of 32K-64K columns are split over a cluster of 2 CTAs, 64 columns per thread as
// pairs (wide_row_table): second slices of 1 column, of part of the warps, full; many rows per
// worker; the maximum of a row in its first or its second CTA's slice, the other slice 30
// below it (its exponentials ~1e-13 of the row's: the slices' (base, sum) pairs must be
// rescaled, not added); the shifted stream (misaligned rows); in place.
TEST_F(Softmax, ForwardRowsOfTwoCtas) {
  for (int64_t cols : {int64_t(32769), int64_t(50000), int64_t(65536)}) {
    check_forward<bf16>({rows_for(cols, 5), cols, 0});
    check_forward<fp16>({rows_for(cols, 5), cols, 0});
  }
  check_forward<bf16>({1200, 49152, 0}, 12);
  check_forward<bf16>({3, 65536, 0}, 13, -900.f, -860.f);
  for (bool high_second : {false, true}) {
    SCOPED_TRACE(high_second ? "maximum in the second slice" : "maximum in the first slice");
    const shape s{6, 65536, 0};
    std::mt19937_64 rng(test_seed() + 14);
    std::vector<bf16> x = random_strided<bf16>(s, rng, -2.f, 2.f);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c)
        if ((c >= 32768) == high_second) {
          bf16& v = x[size_t(r * s.cols + c)];
          v = convert<bf16>(convert<float>(v) + 30.f);
        }
    check_forward_of<bf16>(s, x);
  }
  check_forward<bf16>({5, 65536, 3}, 15);
  check_forward<fp16>({4, 40001, 5}, 16);
  check_forward_in_place({300, 60000, 0});
}

TEST_F(Softmax, ForwardSingleRow) {
  for (int64_t cols : widths) check_forward<bf16>({1, cols, 0});
}

// Pads of 8 bf16 / 4 fp32 keep every row 16-byte aligned (vector path); pads of 3 / 5 make
// every other row misaligned (element path).
TEST_F(Softmax, ForwardStridedRows) {
  for (int64_t cols : {int64_t(100), int64_t(1024), int64_t(4097), int64_t(65543)}) {
    check_forward<bf16>({rows_for(cols, 9), cols, 8});
    check_forward<bf16>({rows_for(cols, 9), cols, 3});
    check_forward<float>({rows_for(cols, 9), cols, 4});
    check_forward<float>({rows_for(cols, 9), cols, 5});
  }
}

// Large offsets: exp(x) overflows fp32 without the max subtraction.
TEST_F(Softmax, ForwardLargeLogitsAreStable) {
  check_forward<float>({5, 1000, 0}, 1, 500.f, 520.f);
  check_forward<float>({3, 65543, 0}, 2, -900.f, -880.f);
  check_forward<bf16>({3, 262144, 0}, 3, 100.f, 140.f);
}

// In place (y == x).
TEST_F(Softmax, ForwardInPlace) { check_forward_in_place({7, 4097, 0}); }

// ---------------------------------------------------------------------------------------------
// Backward: dx = y * (dy - sum(dy * y)), with y a real softmax output (rows sum to 1).
// ---------------------------------------------------------------------------------------------
template <class T>
void check_backward(const shape& s) {
  SCOPED_TRACE(::testing::Message() << dtype_name(type_of<T>()) << " rows=" << s.rows << " cols=" << s.cols
                                    << " pad=" << s.pad);
  std::mt19937_64 rng(test_seed());
  const int64_t stride = s.cols + s.pad;
  // y: the softmax of random logits, rounded to T, laid out with the stride.
  const std::vector<T> logits = random_strided<T>(s, rng, -3.f, 3.f);
  const std::vector<double> y_dense = softmax_reference(logits, s);
  std::vector<T> y(logits.size());
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      y[size_t(r * stride + c)] = c < s.cols ? convert<T>(float(y_dense[size_t(r * s.cols + c)])) : convert<T>(1.f);
  // dy = (r mod 3) - 1 + logits + U(-1, 1): related to y, so that sum(dy * y) is O(1) (it
  // leans to the larger logits) and differs from row to row by the offset, which dx does not
  // see (sum y = 1). With dy independent noise the sum was ~1.7 / sqrt(cols): a dx without it,
  // with another row's, or with one CTA's partial of 16 missing passed at 262144 (bf16); now each
  // fails by 15-240x even bf16's norm-wise bound 1e-2, which an fp32 computation with bf16 dx
  // uses 0.17 of, and by 6000x and more the element check's (tools/test_strength.cpp, a CPU
  // model of both checks).
  std::vector<T> dy = random_strided<T>(s, rng, -1.f, 1.f);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < stride; ++c) {
      const size_t i = size_t(r * stride + c);
      dy[i] = convert<T>(float(r % 3 - 1) + convert<float>(logits[i]) + convert<float>(dy[i]));
    }

  // dx and the size of its terms, |y| (|dy| + sum |y dy|).
  std::vector<double> dx_reference(size_t(s.rows * s.cols)), dx_scale(dx_reference.size());
  for (int64_t r = 0; r < s.rows; ++r) {
    double dot = 0, dot_terms = 0;
    for (int64_t c = 0; c < s.cols; ++c) {
      const double term = to_double(y[size_t(r * stride + c)]) * to_double(dy[size_t(r * stride + c)]);
      dot += term, dot_terms += std::abs(term);
    }
    for (int64_t c = 0; c < s.cols; ++c) {
      const double yv = to_double(y[size_t(r * stride + c)]), dyv = to_double(dy[size_t(r * stride + c)]);
      dx_reference[size_t(r * s.cols + c)] = yv * (dyv - dot);
      dx_scale[size_t(r * s.cols + c)] = std::abs(yv) * (std::abs(dyv) + dot_terms);
    }
  }

  device_buffer<T> y_device(y), dy_device(dy), dx_device(y.size());
  tk::softmax_backward({.dx = dx_device.get(),
                        .dy = dy_device.get(),
                        .y = y_device.get(),
                        .rows = s.rows,
                        .cols = s.cols,
                        .dx_row_stride = stride,
                        .dy_row_stride = stride,
                        .y_row_stride = stride,
                        .type = type_of<T>()},
                       nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  size_t overwritten = 0;
  const std::vector<T> dx = unpad(dx_device.download(), s, &overwritten);
  EXPECT_EQ(overwritten, 0u) << "the kernel wrote into the padding between rows";
  TILEKIT_EXPECT_CLOSE(dx, dx_reference, tolerance<T>());
  TILEKIT_EXPECT_CLOSE_SCALED(dx, dx_reference, dx_scale, arithmetic_tolerance);
}

TEST_F(Softmax, BackwardBf16AllWidths) {
  for (int64_t cols : widths) check_backward<bf16>({rows_for(cols), cols, 0});
}

TEST_F(Softmax, BackwardFp32AllWidths) {
  for (int64_t cols : widths) check_backward<float>({rows_for(cols), cols, 0});
}

// Many items per worker (the tests above give a worker at most one or two items at most widths,
// rows_for caps rows at 67): static, paced and claimed orders over many rounds of the stage
// ring, in both directions, from one warp per row to clusters. TILEKIT_TEST_SMALL=1 (sanitizer
// runs): a tenth of the rows.
TEST_F(Softmax, ManyRowsPerWorker) {
  const int64_t part = small_problems() ? 10 : 1;
  for (const shape& s : {shape{34000 / part, 1000, 0}, shape{4000 / part, 4096, 0}, shape{1500 / part, 16384, 0},
                         shape{150 / part, 262144, 0}}) {
    check_forward<bf16>(s, 17);
    check_backward<bf16>(s);
  }
  check_forward<float>({8000, 2048, 0}, 18);
  check_backward<float>({3000, 8192, 0});
  check_backward<fp16>({500, 65536, 0});
}

TEST_F(Softmax, BackwardFp16AndStrided) {
  check_backward<fp16>({9, 1000, 0});
  check_backward<fp16>({2, 65543, 8});
  check_backward<bf16>({5, 4097, 3});
  check_backward<float>({3, 262144, 5});
  check_backward<bf16>({1, 262144, 0});
}

// The forward followed by the backward with dy = 1 everywhere gives dx = y * (1 - 1) = 0:
// a cheap end-to-end identity (sum of a softmax row is 1) that does not need the reference
// (the forward's y is checked against it too: an unwritten y would pass the identity as NaN).
TEST_F(Softmax, BackwardOfConstantUpstreamIsZero) {
  const shape s{4, 65543, 0};
  std::mt19937_64 rng(test_seed());
  const std::vector<float> x = random_strided<float>(s, rng, -4.f, 4.f);
  device_buffer<float> x_device(x), y_device(x.size()), dx_device(x.size());
  device_buffer<float> dy_device(std::vector<float>(x.size(), 1.f));
  tk::softmax_forward({.y = y_device.get(),
                       .x = x_device.get(),
                       .rows = s.rows,
                       .cols = s.cols,
                       .x_row_stride = s.cols,
                       .y_row_stride = s.cols,
                       .type = dtype::fp32},
                      nullptr);
  tk::softmax_backward({.dx = dx_device.get(),
                        .dy = dy_device.get(),
                        .y = y_device.get(),
                        .rows = s.rows,
                        .cols = s.cols,
                        .dx_row_stride = s.cols,
                        .dy_row_stride = s.cols,
                        .y_row_stride = s.cols,
                        .type = dtype::fp32},
                       nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> dx = dx_device.download();
  const std::vector<float> y = y_device.download();
  // y itself against the reference (an unwritten y, NaN poison, would make dx NaN, which a
  // max over |dx| alone would not see).
  expect_softmax_close(y, x, s);
  double max_dx = 0, max_y = 0;
  size_t nonfinite = 0;
  for (size_t i = 0; i < dx.size(); ++i) {
    nonfinite += !std::isfinite(dx[i]);
    max_dx = std::max(max_dx, double(std::abs(dx[i])));
    max_y = std::max(max_y, double(y[i]));
  }
  EXPECT_EQ(nonfinite, 0u) << "non-finite or unwritten dx";
  // |dx| = y * |1 - sum y| <= max y * (fp32 rounding of a sum of 65543 terms ~ 1e-5).
  EXPECT_LE(max_dx, max_y * 1e-5);
}

}  // namespace
