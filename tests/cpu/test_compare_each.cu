// CPU tests of the GPU suites' element-by-element check (tests/common/gpu_test.cuh,
// compare_scaled / compare_each): that it fails what the norm-wise check lets through, that it
// leaves out exactly T's rounding (half_ulp) and so catches errors far below it, and passes the
// roundings a correct kernel makes; and of padding_written, the suites' check of the padding
// between rows.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
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
  // bf16 rounding alone (of float(ref): the double rounding adds at most fp32's half ulp).
  EXPECT_LE(compare_each(out, ref).max_scaled, 0x1p-24);
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

// Misuse is reported, not silently measured: sizes that differ. A non-finite reference is met
// only by the same value (an inf by that inf, NaN by NaN), and does not make the rms floor
// infinite (every other element would then pass whatever its error).
TEST(CompareEach, MisuseAndInfiniteReferences) {
  const std::vector<double> ref = {1.0, 2.0, 3.0, 4.0};
  const std::vector<float> out = {1.0f, 2.0f, 3.0f};
  EXPECT_NONFATAL_FAILURE(compare_each(out, ref), "3 outputs, 4 references");
  const std::vector<double> inf_ref = {1.0, INFINITY, 1.0, 1.0};
  const std::vector<float> wrong = {1.0f, INFINITY, 1.5f, 1.0f};
  // The inf met exactly; 1.5 against 1: 0.5 less fp32's half ulp at 1.5.
  EXPECT_DOUBLE_EQ(compare_each(wrong, inf_ref).max_scaled, 0.5 - 0x1p-24);
  const std::vector<float> minus_inf = {1.0f, -INFINITY, 1.0f, 1.0f};
  EXPECT_TRUE(std::isnan(compare_each(minus_inf, inf_ref).max_scaled));
}

// half_ulp: half the spacing of T at |v|, and below T's smallest normal half the subnormal step.
TEST(HalfUlp, Values) {
  EXPECT_EQ(half_ulp<bf16>(1.0), 0x1p-8);
  EXPECT_EQ(half_ulp<bf16>(1.99), 0x1p-8);
  EXPECT_EQ(half_ulp<bf16>(-2.0), 0x1p-7);
  EXPECT_EQ(half_ulp<bf16>(0.0), 0x1p-134);
  EXPECT_EQ(half_ulp<fp16>(1.0), 0x1p-11);
  EXPECT_EQ(half_ulp<fp16>(40000.0), 0x1p+4);
  EXPECT_EQ(half_ulp<fp16>(0x1p-14), 0x1p-25);
  EXPECT_EQ(half_ulp<fp16>(1e-7), 0x1p-25);
  EXPECT_EQ(half_ulp<float>(1.0), 0x1p-24);
  EXPECT_EQ(half_ulp<float>(0x1p-130), 0x1p-150);
  EXPECT_EQ(half_ulp<double>(1.0), 0.0);
}

// It bounds the rounding of every value, and tightly: some values of each binade are rounded by
// nearly all of it.
template <class T>
void expect_half_ulp_bounds_rounding(double lo, double hi) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> log_magnitude(lo, hi);
  double tightest = 0;
  for (int i = 0; i < 100000; ++i) {
    const double v = (i % 2 ? -1 : 1) * std::exp2(log_magnitude(rng));
    const double rounding = std::abs(to_double(convert<T>(float(v))) - double(float(v)));
    ASSERT_LE(rounding, half_ulp<T>(float(v))) << v;
    tightest = std::max(tightest, rounding / half_ulp<T>(float(v)));
  }
  EXPECT_GT(tightest, 0.99);
}
TEST(HalfUlp, BoundsTheRounding) {
  expect_half_ulp_bounds_rounding<bf16>(-40, 40);
  expect_half_ulp_bounds_rounding<fp16>(-26, 15);  // subnormals included
}

// Next to a power of two the spacing halves toward zero: a value one ulp below 1 is not a
// rounding of 1 (nor 1 of it), while a value that does round to 1 from below passes; at T's
// smallest normal the spacing below is the subnormal step, not half of it.
TEST(CompareScaled, PowersOfTwoRoundByTheSpacingOnEachSide) {
  const std::vector<double> unit = {1.0};
  const auto scaled = [&](auto out, double ref) {
    return compare_scaled(std::vector<decltype(out)>{out}, std::vector<double>{ref}, unit).max_scaled;
  };
  EXPECT_EQ(scaled(convert<bf16>(1.0f), 1 - 0x1p-10), 0.0);              // rounds to 1
  EXPECT_EQ(scaled(convert<bf16>(1.0f), 1 - 0x1p-9), 0.0);               // the tie, to even: 1
  EXPECT_DOUBLE_EQ(scaled(convert<bf16>(1.0f), 1 - 0x1p-8), 0x1p-9);     // one ulp below 1
  EXPECT_DOUBLE_EQ(scaled(convert<bf16>(0.99609375f), 1.0), 0x1p-9);     // 1 - 2^-8 for 1
  EXPECT_DOUBLE_EQ(scaled(convert<fp16>(2.0f), 2 - 0x1p-10), 0x1p-11);   // one ulp below 2
  EXPECT_DOUBLE_EQ(scaled(convert<fp16>(-2.0f), -2 + 0x1p-10), 0x1p-11);  // and its negative
  EXPECT_EQ(scaled(convert<fp16>(0x1p-14f), 0x1p-14 - 0x1p-25), 0.0);    // half a subnormal step
}

// A bf16 row scaled by 1.001 (one partial of 1000 missing from a sum): 0.1%, within bf16's
// 2^-8 rounding and its norm-wise 1e-2, but the error beyond the rounding is ~1e-3 of some of
// the row's elements; correctly rounded fp32 results (here within 1e-6 of the reference) stay
// within 1e-6.
TEST(CompareScaled, CatchesErrorsBelowTheRounding) {
  const size_t cols = 512;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> dist(-3, 3), jitter(-1e-6, 1e-6);
  std::vector<double> ref(2 * cols);
  for (double& v : ref) v = dist(rng);
  std::vector<bf16> out(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) out[i] = convert<bf16>(float(ref[i] * (1 + jitter(rng))));
  const std::vector<double> scale = floored_scales(ref, 0.0);  // |ref|
  EXPECT_LE(compare_scaled(out, ref, scale).max_scaled, 1.1e-6);
  for (size_t i = cols; i < 2 * cols; ++i) out[i] = convert<bf16>(float(ref[i] * 1.001));
  const error_stats s = compare_scaled(out, ref, scale);
  EXPECT_LT(s.relative, 4e-3) << "bf16's norm-wise bound would pass";
  EXPECT_GT(s.max_scaled, 5e-4);
  EXPECT_GE(s.worst, cols) << "the worst element is in the scaled row";
  EXPECT_NONFATAL_FAILURE(compare_scaled(out, ref, std::vector<double>(3, 1.0)), "3 scales");
}

// The macros fail where the bound is exceeded, say where, and survive a NaN bound over nothing.
TEST(CompareScaled, MacrosReportFailures) {
  const std::vector<double> ref = {1.0, 2.0, 4.0};
  const std::vector<float> right = {1.0f, 2.0f, 4.0f}, wrong = {1.0f, 2.002f, 4.0f};
  TILEKIT_EXPECT_CLOSE_EACH(right, ref, 1e-5);
  EXPECT_NONFATAL_FAILURE(TILEKIT_EXPECT_CLOSE_EACH(wrong, ref, 1e-5), "at element 1: 2.002");
  EXPECT_NONFATAL_FAILURE(TILEKIT_EXPECT_CLOSE_SCALED(wrong, ref, std::vector<double>(3, 1.0), 1e-5), "of the scale, above");
  const std::vector<float> nan_out = {1.0f, NAN, 4.0f};
  EXPECT_NONFATAL_FAILURE(TILEKIT_EXPECT_CLOSE_EACH(nan_out, ref, 1e-5), "1 non-finite");
  EXPECT_NONFATAL_FAILURE(TILEKIT_EXPECT_CLOSE_EACH(std::vector<float>{}, std::vector<double>{}, NAN),
                          "error beyond the rounding");
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
