#include "common/gpu_test.cuh"

#include <cstdlib>
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

}  // namespace tilekit::testing
