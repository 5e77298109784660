// CPU tests of the GPU suites' element-by-element check (tests/common/gpu_test.cuh,
// compare_each): that it fails what the norm-wise check lets through, and passes the roundings
// a correct kernel makes; and of padding_written, the suites' check of the padding between rows.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/gpu_test.cuh"

namespace {
using namespace tilekit;
using namespace tilekit::testing;

// One row of 1200 (of 256 columns) off by 30%: ~0.9% in the norm, under bf16's 1e-2; element by
// element 0.3 of the reference.
TEST(CompareEach, OneWrongRowFailsWhatTheNormPasses) {
  const int64_t rows = 1200, cols = 256;
  std::vector<double> ref(size_t(rows * cols));
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = 1.0 + 0.5 * std::sin(double(i));
  std::vector<bf16> out(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) out[i] = convert<bf16>(float(ref[i]));
  EXPECT_LT(compare_each(out, ref).max_scaled, 1e-2) << "bf16 rounding alone";
  for (int64_t c = 0; c < cols; ++c) {
    const size_t i = size_t(700 * cols + c);
    out[i] = convert<bf16>(float(1.3 * ref[i]));
  }
  const error_stats s = compare_each(out, ref);
  EXPECT_LT(s.relative, 1e-2) << "the norm-wise check would pass";
  EXPECT_GT(s.max_scaled, 0.25);
  EXPECT_EQ(int64_t(s.worst) / cols, 700) << "the worst element is in the wrong row";
}

// References near 0 are measured against rms(ref): the same absolute error as elsewhere passes.
TEST(CompareEach, ReferencesNearZeroAgainstTheRms) {
  std::vector<double> ref = {1.0, -1.0, 1e-6, 1.0, -1.0};
  std::vector<float> out = {1.0f, -1.0f, 5e-3f, 1.0f, -1.0f};
  const error_stats s = compare_each(out, ref);
  EXPECT_NEAR(s.max_scaled, (5e-3 - 1e-6) / std::sqrt((4 + 1e-12) / 5), 1e-9);
  EXPECT_EQ(s.worst, 2u);
  // An explicit floor replaces the rms.
  EXPECT_NEAR(compare_each(out, ref, 10.0).max_scaled, (5e-3 - 1e-6) / 10, 1e-9);
}

// Rows of their own scale (row_length): an error of 1% of a small row's values passes against
// the whole's rms but not against the row's.
TEST(CompareEach, RowsOfTheirOwnScale) {
  const size_t cols = 100;
  std::vector<double> ref(2 * cols);
  for (size_t c = 0; c < cols; ++c) ref[c] = 1.0, ref[cols + c] = 1e-3;
  std::vector<float> out(ref.begin(), ref.end());
  out[cols + 17] = float(1e-3 * 1.05);
  EXPECT_LT(compare_each(out, ref).max_scaled, 1e-4);
  const error_stats by_row = compare_each(out, ref, -1.0, cols);
  EXPECT_NEAR(by_row.max_scaled, 0.05, 1e-6);
  EXPECT_EQ(by_row.worst, cols + 17);
}

// fp16 results in the subnormal range are off by up to half a subnormal step (2^-25) however
// small the reference: that much is not counted, more is.
TEST(CompareEach, HalfAnFp16SubnormalStepIsNotAnError) {
  const double step = std::ldexp(1.0, -24);  // fp16's smallest subnormal
  std::vector<double> ref = {0x1p-10, -0x1p-10, 0.49 * step, 3.5 * step};  // the first two exact
  std::vector<fp16> out(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) out[i] = convert<fp16>(float(ref[i]));
  EXPECT_EQ(to_double(out[2]), 0.0);  // rounded to 0: off by 0.49 step
  EXPECT_EQ(compare_each(out, ref, 1e-6).max_scaled, 0.0);
  out[2] = convert<fp16>(float(step));  // off by 0.51 step: 0.01 step counted
  EXPECT_NEAR(compare_each(out, ref, 1e-6).max_scaled, 0.01 * step / 1e-6, 1e-6);
}

// A NaN where the reference is finite is counted as non-finite, never as a small error.
TEST(CompareEach, NonFiniteOutputsCounted) {
  std::vector<double> ref = {1.0, 2.0, 3.0};
  std::vector<float> out = {1.0f, NAN, 3.0f};
  const error_stats s = compare_each(out, ref);
  EXPECT_EQ(s.nonfinite, 1u);
  EXPECT_EQ(s.max_scaled, 0.0);
  std::vector<double> nan_ref = {1.0, NAN, 3.0};
  std::vector<float> finite = {1.0f, 2.0f, 3.0f};
  EXPECT_TRUE(std::isnan(compare_each(finite, nan_ref).max_scaled)) << "a NaN reference is met only by NaN";
  const std::vector<float> nan_too = {1.0f, NAN, 3.0f};
  EXPECT_EQ(compare_each(nan_too, nan_ref).max_scaled, 0.0);
}

// Misuse is reported, not silently measured: sizes that differ, rows that do not divide the
// elements. A non-finite reference is met only by the same value (an inf by that inf, NaN by
// NaN), and does not make its row's floor infinite (every other element of the row would then
// pass whatever its error).
TEST(CompareEach, MisuseAndInfiniteReferences) {
  const std::vector<double> ref = {1.0, 2.0, 3.0, 4.0};
  const std::vector<float> out = {1.0f, 2.0f, 3.0f};
  EXPECT_NONFATAL_FAILURE(compare_each(out, ref), "3 outputs, 4 references");
  const std::vector<float> same = {1.0f, 2.0f, 3.0f, 4.0f};
  EXPECT_NONFATAL_FAILURE(compare_each(same, ref, -1.0, 3), "not rows of 3");
  const std::vector<double> inf_ref = {1.0, INFINITY, 1.0, 1.0};
  const std::vector<float> wrong = {1.0f, INFINITY, 1.5f, 1.0f};
  EXPECT_NEAR(compare_each(wrong, inf_ref, -1.0, 4).max_scaled, 0.5, 1e-12);  // the inf met exactly
  const std::vector<float> minus_inf = {1.0f, -INFINITY, 1.0f, 1.0f};
  EXPECT_TRUE(std::isnan(compare_each(minus_inf, inf_ref).max_scaled));
}

// Only padding columns that lost device_buffer's poison bits count; the rows' own columns do not.
TEST(PaddingWritten, CountsWritesOutsideTheRows) {
  const int64_t rows = 3, cols = 5, stride = 8;
  std::vector<bf16> strided(size_t(rows * stride), from_raw_bits<bf16>(poison_bits<bf16>()));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) strided[size_t(r * stride + c)] = convert<bf16>(1.f);
  EXPECT_EQ(padding_written(strided, rows, cols, stride), 0u);
  strided[size_t(1 * stride + 6)] = convert<bf16>(0.f);
  strided[size_t(2 * stride + 7)] = from_raw_bits<bf16>(0x7FFFu);  // a NaN, but not the poison
  EXPECT_EQ(padding_written(strided, rows, cols, stride), 2u);
}

}  // namespace
