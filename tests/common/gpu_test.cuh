#pragma once
// Shared GoogleTest support for tilekit.
//
// * GpuTest: a fixture for tests that need an sm_90 GPU. Without one the test
//   is skipped with the reason printed; with TILEKIT_REQUIRE_GPU=1 in the
//   environment it fails instead (the GPU machine sets it).
// * device_buffer<T>: an owning device allocation, poisoned (all bits 1, NaN
//   for float types) on creation so unwritten outputs are caught.
// * random inputs (fixed seed per test, overridable with TILEKIT_TEST_SEED),
//   relative error ||out - ref|| / ||ref|| in double precision, and each element's error beyond
//   its rounding to T against its own scale (compare_scaled, compare_each,
//   TILEKIT_EXPECT_CLOSE_SCALED / _EACH; TILEKIT_TEST_REPORT=1 prints each check's margin).
// * small_problems(): TILEKIT_TEST_SMALL=1 asks the tests that honour it for smaller problems
//   (same code paths, fewer rows and launches), for compute-sanitizer runs, which are 100x+
//   slower than the plain ones.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit::testing {

// Why this process cannot run GPU tests ("" when it can).
std::string gpu_unavailable_reason();
// TILEKIT_REQUIRE_GPU=1 set?
bool gpu_required();
// Seed for this test: hash of the test's full name, mixed with TILEKIT_TEST_SEED.
uint64_t test_seed();
// TILEKIT_TEST_SMALL=1 set? (tests that honour it say what they shrink.)
bool small_problems();

// Launches `kernel` on `ctas` CTAs of `threads` threads, in clusters of `cluster_size` CTAs
// along x (default stream, no dynamic shared memory).
template <class... Params, class... Args>
void launch_clusters(void (*kernel)(Params...), int ctas, int threads, int cluster_size, Args... args) {
  tilekit::cluster::launch_config launch{unsigned(ctas), unsigned(threads), unsigned(cluster_size)};
  if (cluster_size > 8) tilekit::cluster::allow_wide(kernel);
  TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(launch.get(), kernel, args...));
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = gpu_unavailable_reason();
    if (reason.empty()) return;
    if (gpu_required()) FAIL() << "TILEKIT_REQUIRE_GPU=1 but " << reason;
    GTEST_SKIP() << "needs an sm_90 (Hopper) GPU: " << reason;
  }
};

template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(size_t count) : count_(count) {
    if (count_) {
      TILEKIT_CHECK_CUDA(cudaMalloc(&ptr_, count_ * sizeof(T)));
      poison();
    }
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
  ~device_buffer() {
    if (ptr_) cudaFree(ptr_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr, o.count_ = 0; }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  void poison() { TILEKIT_CHECK_CUDA(cudaMemset(ptr_, 0xFF, count_ * sizeof(T))); }
  void upload(const std::vector<T>& host) {
    TILEKIT_CHECK_CUDA(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    TILEKIT_CHECK_CUDA(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// Raw bits of an element (up to 4 bytes), so comparisons are exact and NaN-safe; and back.
template <class T>
uint32_t raw_bits(T x) {
  static_assert(sizeof(T) <= 4, "raw_bits: elements of up to 4 bytes");
  uint32_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}
template <class T>
T from_raw_bits(uint32_t b) {
  T x;
  std::memcpy(&x, &b, sizeof(T));
  return x;
}
// The bits of an element that device_buffer's poison (all bytes 0xFF) leaves.
template <class T>
uint32_t poison_bits() {
  return sizeof(T) == 4 ? 0xFFFFFFFFu : (1u << (8 * sizeof(T))) - 1;
}
// Elements of the padding columns [cols, stride) of a [rows, stride] buffer, downloaded from a
// poisoned device_buffer, that no longer hold the poison: writes outside the rows.
template <class T>
size_t padding_written(const std::vector<T>& strided, int64_t rows, int64_t cols, int64_t stride) {
  size_t written = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = cols; c < stride; ++c)
      written += raw_bits(strided[size_t(r * stride + c)]) != poison_bits<T>();
  return written;
}

// Uniform random values in [lo, hi), rounded to T.
template <class T>
std::vector<T> random_vector(size_t n, std::mt19937_64& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = convert<T>(dist(rng));
  return v;
}

template <class T>
double to_double(T x) {
  return double(convert<float>(x));
}
template <>
inline double to_double<double>(double x) {
  return x;
}

// Half the spacing of T's values at magnitude |v| (half an ulp): how far rounding an exact
// result to T may move it. bf16 / fp16 / fp32 carry 8 / 11 / 24 significant bits, so at 1 that is
// 2^-8 / 2^-11 / 2^-24; below T's smallest normal (2^-126 / 2^-14 / 2^-126) it is half the
// subnormal step (fp16: 2^-25, however small v). Other types (double): 0, exact.
template <class T>
double half_ulp(double v) {
  int bits = 0, min_exponent = 0;
  if constexpr (std::is_same_v<T, bf16>) bits = 8, min_exponent = -126;
  else if constexpr (std::is_same_v<T, fp16>) bits = 11, min_exponent = -14;
  else if constexpr (std::is_same_v<T, float>) bits = 24, min_exponent = -126;
  else return 0.0;
  int exponent = min_exponent;  // 2^exponent <= |v| < 2^(exponent + 1), or T's smallest normal's
  if (std::isfinite(v) && v != 0) {
    int f = 0;
    std::frexp(v, &f);  // |v| = m 2^f, m in [0.5, 1)
    exponent = std::max(f - 1, min_exponent);
  }
  return std::ldexp(1.0, exponent - bits);
}

// How far from o an exact value r may lie and still round to o: half the spacing on r's side of o.
// Away from zero that is half_ulp<T>(o); toward zero the same, except where |o| is a power of two
// above T's smallest normal, whose lower neighbour is half as far (so a value one ulp below 1 is
// not taken for a rounding of 1).
template <class T>
double rounding_allowance(double o, double r) {
  const bool toward_zero = o != 0 && (std::abs(r) < std::abs(o) || (r < 0) != (o < 0));
  return half_ulp<T>(toward_zero ? std::nextafter(std::abs(o), 0.0) : o);
}

struct error_stats {
  double relative = 0;   // ||out - ref||_2 / ||ref||_2
  double max_abs = 0;    // max |out - ref|
  size_t nonfinite = 0;  // NaN / inf outputs where the reference is finite
  // compare_scaled / compare_each only: the largest error beyond T's rounding, max over elements
  // of max(|out - ref| - rounding_allowance<T>(out, ref), 0) / scale, and where it is.
  double max_scaled = 0;
  size_t worst = 0;
};

template <class T, class R>
error_stats compare(const std::vector<T>& out, const std::vector<R>& ref) {
  error_stats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double o = to_double(out[i]), r = to_double(ref[i]);
    if (!std::isfinite(o) && std::isfinite(r)) {
      ++s.nonfinite;
      continue;
    }
    num += (o - r) * (o - r);
    den += r * r;
    s.max_abs = std::max(s.max_abs, std::abs(o - r));
  }
  s.relative = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (out.size() != ref.size()) s.nonfinite += out.size() > ref.size() ? out.size() - ref.size() : ref.size() - out.size();
  return s;
}

// compare() and each element's error beyond T's rounding against its own scale: a kernel that
// computes in fp32 from the reference's inputs and rounds once to T returns round_T(c) with c
// within e of the exact value, so |out - ref| <= rounding_allowance<T>(out, ref) + e (c lies in
// out's rounding interval; where ref is on the other side of out, |out - ref| <= |c - ref|). The
// rounding is left out and e / scale is what is measured, so the bound is the fp32
// computation's (~1e-5 of the scale), not T's (bf16: 4e-3): a row off by 0.1%, or one wrong
// partial of 256 in a sum, fails in bf16 too. The norm-wise error averages
// (one row of 1200 wrong by 30% moves it by ~0.9%); element by element it stands out. The scale
// is the size of the terms whose fp32 rounding e comes from (the element's own terms, or a
// floor where references near 0 come from cancellation). A non-finite reference is met only by
// the same value (max_scaled NaN otherwise).
template <class T, class R>
error_stats compare_scaled(const std::vector<T>& out, const std::vector<R>& ref, const std::vector<double>& scale) {
  error_stats s = compare(out, ref);
  if (out.size() != ref.size() || scale.size() != ref.size()) {
    ADD_FAILURE() << "compare_scaled: " << out.size() << " outputs, " << ref.size() << " references, "
                  << scale.size() << " scales";
  }
  const size_t n = std::min({out.size(), ref.size(), scale.size()});
  for (size_t i = 0; i < n; ++i) {
    const double o = to_double(out[i]), r = to_double(ref[i]);
    if (!std::isfinite(o) && std::isfinite(r)) continue;  // counted in nonfinite
    double scaled;
    if (!std::isfinite(r)) {  // a non-finite reference: met exactly (the same inf, or NaN) or not
      scaled = o == r || (std::isnan(o) && std::isnan(r)) ? 0.0 : NAN;
    } else {
      const double error = std::max(std::abs(o - r) - rounding_allowance<T>(o, r), 0.0);
      scaled = scale[i] > 0 ? error / scale[i] : error > 0 ? INFINITY : 0.0;
    }
    // A NaN (NaN reference) is the worst and stays so.
    if (std::isnan(scaled) ? !std::isnan(s.max_scaled) : scaled > s.max_scaled) s.max_scaled = scaled, s.worst = i;
  }
  return s;
}

// Scales max(|ref|, floor); floor < 0: the rms of ref's finite values.
template <class R>
std::vector<double> floored_scales(const std::vector<R>& ref, double floor = -1) {
  if (floor < 0) {
    double sq = 0;
    size_t finite = 0;  // the rms of the finite references (a NaN or inf one fails by itself)
    for (const R& v : ref)
      if (std::isfinite(to_double(v))) sq += to_double(v) * to_double(v), ++finite;
    floor = finite > 0 ? std::sqrt(sq / double(finite)) : 0.0;
  }
  std::vector<double> scale(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = to_double(ref[i]);
    scale[i] = std::max(std::isfinite(r) ? std::abs(r) : 0.0, floor);
  }
  return scale;
}

// compare_scaled against max(|ref|, floor) (floored_scales).
template <class T, class R>
error_stats compare_each(const std::vector<T>& out, const std::vector<R>& ref, double floor = -1) {
  return compare_scaled(out, ref, floored_scales(ref, floor));
}

// TILEKIT_TEST_REPORT=1: every TILEKIT_EXPECT_CLOSE_SCALED / _EACH prints its measured
// max_scaled and its bound, so that one GPU run gives each check's margin
// (tools/device_margins.sh).
void report_close(const char* file, int line, const error_stats& s, double tol);

// TILEKIT_EXPECT_CLOSE_SCALED / _EACH (below): failures reported at the caller's file and line.
template <class T, class R>
void expect_close_scaled(const std::vector<T>& out, const std::vector<R>& ref, const std::vector<double>& scale,
                         double tol, const char* file, int line) {
  const error_stats s = compare_scaled(out, ref, scale);
  report_close(file, line, s, tol);
  if (s.nonfinite != 0) ADD_FAILURE_AT(file, line) << s.nonfinite << " non-finite or unwritten outputs";
  if (!(s.max_scaled <= tol)) {  // NaN fails too
    std::ostringstream where;
    if (s.worst < out.size() && s.worst < ref.size() && s.worst < scale.size())
      where << ": " << to_double(out[s.worst]) << " against " << to_double(ref[s.worst]) << ", scale "
            << scale[s.worst];
    ADD_FAILURE_AT(file, line) << "error beyond the rounding " << s.max_scaled << " of the scale, above " << tol
                               << ", at element " << s.worst << where.str() << " (relative error of the whole "
                               << s.relative << ")";
  }
}
template <class T, class R>
void expect_close_each(const std::vector<T>& out, const std::vector<R>& ref, double tol, const char* file, int line) {
  expect_close_scaled(out, ref, floored_scales(ref), tol, file, line);
}

// The kernel suites' element checks (TILEKIT_EXPECT_CLOSE_SCALED / _EACH): the fp32
// computation's error per element beyond its rounding to T, relative to the element's scale, in
// every dtype. Each suite's header derives it for its kernels (fp32 sums of up to 262144 terms,
// ex2.approx, a few roundings per element: a few 1e-6 at worst).
inline constexpr double arithmetic_tolerance = 1e-5;

// Typical relative-error bounds for results rounded to T (fp32 accumulation).
template <class T>
constexpr double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, fp16>) return 2e-3;   // 11-bit mantissa
  else if constexpr (std::is_same_v<T, bf16>) return 1e-2;   // 8-bit mantissa
  else return 8e-2;                                           // fp8
}

}  // namespace tilekit::testing

// EXPECT that `out` matches `ref` to `tol` relative error with no stray NaN.
#define TILEKIT_EXPECT_CLOSE(out, ref, tol)                                            \
  do {                                                                                 \
    const auto _s = ::tilekit::testing::compare((out), (ref));                         \
    EXPECT_EQ(_s.nonfinite, 0u) << "non-finite or unwritten outputs";                  \
    EXPECT_LE(_s.relative, (tol)) << "relative error " << _s.relative << " (max abs " \
                                  << _s.max_abs << ")";                                \
  } while (0)

// EXPECT that no output is non-finite where its reference is finite and that every element of
// `out` is within its rounding to T plus tol * scale[i] of `ref` (compare_scaled). tol is the
// fp32 computation's error, not T's: see compare_scaled. Each argument is evaluated once.
#define TILEKIT_EXPECT_CLOSE_SCALED(out, ref, scale, tol) \
  ::tilekit::testing::expect_close_scaled((out), (ref), (scale), (tol), __FILE__, __LINE__)

// The same against max(|ref|, rms(ref)) (floored_scales).
#define TILEKIT_EXPECT_CLOSE_EACH(out, ref, tol) \
  ::tilekit::testing::expect_close_each((out), (ref), (tol), __FILE__, __LINE__)
