#include "common/gpu_test.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "tilekit/core/device.cuh"

namespace tilekit::testing {

std::string gpu_unavailable_reason() {
  static const std::string reason = hopper_unavailable_reason(0);
  return reason;
}

bool gpu_required() { return gpu_required_by_environment(); }

bool small_problems() {
  const char* v = std::getenv("TILEKIT_TEST_SMALL");
  return v != nullptr && std::string(v) == "1";
}

uint64_t test_seed() {
  uint64_t base = 20261129;
  if (const char* v = std::getenv("TILEKIT_TEST_SEED")) base = std::strtoull(v, nullptr, 10);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
  return base ^ std::hash<std::string>{}(name);
}

void report_close(const char* file, int line, const error_stats& s, double tol) {
  static const bool requested = [] {
    const char* v = std::getenv("TILEKIT_TEST_REPORT");
    return v != nullptr && std::string(v) == "1";
  }();
  if (!requested) return;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* base = std::strrchr(file, '/');
  std::printf("[close] %s.%s %s:%d max_scaled %.3g tol %.3g (%.3g of it) relative %.3g\n",
              info ? info->test_suite_name() : "-", info ? info->name() : "-", base ? base + 1 : file, line,
              s.max_scaled, tol, tol > 0 ? s.max_scaled / tol : 0.0, s.relative);
}

}  // namespace tilekit::testing
