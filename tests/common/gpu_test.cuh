#pragma once
// Shared GoogleTest support for tilekit.
//
// * GpuTest: a fixture for tests that need an sm_90 GPU. Without one the test
//   is skipped with the reason printed; with TILEKIT_REQUIRE_GPU=1 in the
//   environment it fails instead (the GPU machine sets it).
// * device_buffer<T>: an owning device allocation, poisoned (all bits 1, NaN
//   for float types) on creation so unwritten outputs are caught.
// * random inputs (fixed seed per test, overridable with TILEKIT_TEST_SEED),
//   relative error ||out - ref|| / ||ref|| in double precision, and each element's error against
//   max(|ref|, rms(ref)) (compare_each, TILEKIT_EXPECT_CLOSE_EACH).
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

// Half the smallest subnormal step of T: a correctly rounded T result whose reference lies in
// T's subnormal range is off by up to this much, however small the reference (fp16: 2^-25, 2^-24
// being fp16's smallest subnormal, ~3e-8; fp16 probabilities and gradients of rows of 100K+
// columns, ~1e-5, are subnormal at 2^-14).
template <class T>
constexpr double half_subnormal_step() {
  if constexpr (std::is_same_v<T, fp16>) return 0x1p-25;
  else if constexpr (std::is_same_v<T, bf16>) return 0x1p-134;
  else if constexpr (std::is_same_v<T, float>) return 0x1p-150;
  else return 0.0;
}

struct error_stats {
  double relative = 0;   // ||out - ref||_2 / ||ref||_2
  double max_abs = 0;    // max |out - ref|
  size_t nonfinite = 0;  // NaN / inf outputs where the reference is finite
  // compare_each only: max over elements of (|out - ref| - half_subnormal_step<T>()) /
  // max(|ref|, floor), and the element where it is reached.
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

// compare() and each element's error against max(|ref|, floor): the norm-wise error averages, so
// a few wrong rows or columns hardly move it (one row of 1200 wrong by 30% moves it by ~0.9%);
// element by element they stand out. The floor keeps the references near 0 (cancellation, a
// centred row's middle values) from asking for more than the rounding of the typical values
// gives. floor < 0: rms(ref), or with row_length > 0 the rms of the element's row of ref (rows of
// very different scales: softmax rows of different spreads), of its finite references. A
// non-finite reference is met only by the same value (max_scaled NaN otherwise).
template <class T, class R>
error_stats compare_each(const std::vector<T>& out, const std::vector<R>& ref, double floor = -1,
                         size_t row_length = 0) {
  error_stats s = compare(out, ref);
  const size_t n = std::min(out.size(), ref.size());
  if (out.size() != ref.size()) {
    ADD_FAILURE() << "compare_each: " << out.size() << " outputs, " << ref.size() << " references";
  }
  if (row_length > 0 && n % row_length != 0) {
    ADD_FAILURE() << "compare_each: " << n << " elements are not rows of " << row_length;
  }
  const size_t run = floor < 0 && row_length > 0 ? row_length : std::max<size_t>(ref.size(), 1);
  for (size_t begin = 0; begin < n; begin += run) {
    const size_t end = std::min(begin + run, n);
    double row_floor = floor;
    if (row_floor < 0) {
      double sq = 0;
      size_t finite = 0;  // the rms of the finite references (a NaN or inf one fails below)
      for (size_t i = begin; i < end; ++i)
        if (std::isfinite(to_double(ref[i]))) sq += to_double(ref[i]) * to_double(ref[i]), ++finite;
      row_floor = finite > 0 ? std::sqrt(sq / double(finite)) : 0.0;
    }
    for (size_t i = begin; i < end; ++i) {
      const double o = to_double(out[i]), r = to_double(ref[i]);
      if (!std::isfinite(o) && std::isfinite(r)) continue;  // counted in nonfinite
      double scaled;
      if (!std::isfinite(r)) {  // a non-finite reference: met exactly (the same inf, or NaN) or not
        scaled = o == r || (std::isnan(o) && std::isnan(r)) ? 0.0 : NAN;
      } else {
        const double error = std::max(std::abs(o - r) - half_subnormal_step<T>(), 0.0);
        const double scale = std::max(std::abs(r), row_floor);
        scaled = scale > 0 ? error / scale : error > 0 ? INFINITY : 0.0;
      }
      // A NaN (NaN reference) is the worst and stays so.
      if (std::isnan(scaled) ? !std::isnan(s.max_scaled) : scaled > s.max_scaled) {
        s.max_scaled = scaled, s.worst = i;
      }
    }
  }
  return s;
}

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

// TILEKIT_EXPECT_CLOSE, and EXPECT that every element of `out` is within tol * max(|ref|, rms(ref))
// of `ref` (less half of T's subnormal step; compare_each); _ROWS: rms of the element's row of
// `row_length` elements.
#define TILEKIT_EXPECT_CLOSE_EACH(out, ref, tol) TILEKIT_EXPECT_CLOSE_EACH_ROWS(out, ref, tol, 0)
#define TILEKIT_EXPECT_CLOSE_EACH_ROWS(out, ref, tol, row_length)                               \
  do {                                                                                         \
    namespace _tt = ::tilekit::testing;                                                        \
    const auto& _o = (out);                                                                    \
    const auto& _r = (ref);                                                                    \
    const double _tol = (tol);                                                                 \
    const auto _s = _tt::compare_each(_o, _r, -1.0, size_t(row_length));                       \
    EXPECT_EQ(_s.nonfinite, 0u) << "non-finite or unwritten outputs";                          \
    EXPECT_LE(_s.relative, _tol) << "relative error " << _s.relative << " (max abs "           \
                                 << _s.max_abs << ")";                                         \
    EXPECT_LE(_s.max_scaled, _tol) << "element " << _s.worst << ": "                           \
                                    << _tt::to_double(_o[_s.worst]) << " against "             \
                                    << _tt::to_double(_r[_s.worst]) << " (relative error of "  \
                                    << "the whole " << _s.relative << ")";                     \
  } while (0)
