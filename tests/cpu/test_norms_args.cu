// Argument validation of the norms host API: every invalid argument throws
// tilekit::invalid_argument naming it, before any CUDA call (these run without a GPU; the
// pointers below are never dereferenced).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "norms/norms.h"
#include "tilekit/core/error.cuh"

namespace {
using namespace tilekit;
namespace tk = tilekit::kernels;

// Fake, suitably aligned device addresses: validation must reject before using them.
void* fake(uintptr_t offset = 0) { return reinterpret_cast<void*>(uintptr_t(1) << 20 | offset); }

void expect_invalid(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "expected tilekit::invalid_argument mentioning '" << needle << "'";
  } catch (const tilekit::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

tk::rms_norm_forward_args valid_rms_forward() {
  tk::rms_norm_forward_args a;
  a.y = fake(), a.y_row_stride = 1024, a.x = fake(), a.x_row_stride = 1024, a.weight = fake();
  a.rows = 8, a.cols = 1000;
  return a;
}
tk::layer_norm_backward_args valid_layer_backward() {
  tk::layer_norm_backward_args a;
  a.dx = fake(), a.dx_row_stride = 100, a.dy = fake(), a.dy_row_stride = 100, a.x = fake(), a.x_row_stride = 100;
  a.weight = fake(), a.dweight = fake(), a.dbias = fake(), a.rows = 4, a.cols = 100;
  a.workspace = fake(), a.workspace_bytes = tk::layer_norm_backward_workspace_bytes(4, 100);
  return a;
}

TEST(NormsArgs, RmsForwardRejectsEachInvalidArgument) {
  auto run = [](auto mutate) {
    return [mutate] {
      auto a = valid_rms_forward();
      mutate(a);
      tk::rms_norm_forward(a, nullptr);
    };
  };
  using A = tk::rms_norm_forward_args;
  expect_invalid(run([](A& a) { a.x = nullptr; }), "x must not be null");
  expect_invalid(run([](A& a) { a.y = nullptr; }), "y must not be null");
  expect_invalid(run([](A& a) { a.weight = nullptr; }), "weight must not be null");
  expect_invalid(run([](A& a) { a.rows = 0; }), "rows");
  expect_invalid(run([](A& a) { a.rows = int64_t(1) << 27; }), "rows must be <= 134217727");  // max_rows + 1
  expect_invalid(run([](A& a) { a.cols = 0; }), "cols");
  expect_invalid(run([](A& a) { a.cols = tk::max_norm_cols + 1; }), "cols");
  expect_invalid(run([](A& a) { a.x_row_stride = 999; }), "x row stride");
  expect_invalid(run([](A& a) { a.y_row_stride = 10; }), "y row stride");
  expect_invalid(run([](A& a) { a.x = fake(1); }), "x must be aligned");
  expect_invalid(run([](A& a) { a.eps = 0.0f; }), "eps");
  expect_invalid(run([](A& a) { a.eps = -1.0f; }), "eps");
  expect_invalid(run([](A& a) { a.x_dtype = dtype::fp8_e4m3; }), "x_dtype");
  expect_invalid(run([](A& a) { a.weight_dtype = dtype::fp16; }), "weight_dtype");
  expect_invalid(run([](A& a) { a.residual = fake(), a.residual_row_stride = 1024; }), "residual and residual_out");
  expect_invalid(run([](A& a) { a.residual = fake(), a.residual_row_stride = 1024, a.residual_out = fake(); }),
                 "residual_out row stride");
}

TEST(NormsArgs, LayerBackwardRejectsEachInvalidArgument) {
  auto run = [](auto mutate) {
    return [mutate] {
      auto a = valid_layer_backward();
      mutate(a);
      tk::layer_norm_backward(a, nullptr);
    };
  };
  using A = tk::layer_norm_backward_args;
  expect_invalid(run([](A& a) { a.dx = nullptr; }), "dx must not be null");
  expect_invalid(run([](A& a) { a.dy = nullptr; }), "dy must not be null");
  expect_invalid(run([](A& a) { a.x = nullptr; }), "x must not be null");
  expect_invalid(run([](A& a) { a.weight = nullptr; }), "weight must not be null");
  expect_invalid(run([](A& a) { a.workspace = nullptr; }), "workspace must not be null");
  expect_invalid(run([](A& a) { a.workspace_bytes -= 4; }), "workspace_bytes");
  expect_invalid(run([](A& a) { a.mean = static_cast<const float*>(fake()); }), "mean and rstd");
  expect_invalid(run([](A& a) { a.dresidual_out = fake(), a.dresidual_out_row_stride = 5; }),
                 "dresidual_out row stride");
  expect_invalid(run([](A& a) { a.dbias = fake(1); }), "dbias must be aligned");
  expect_invalid(run([](A& a) { a.weight_dtype = dtype::fp16; }), "weight_dtype");
  expect_invalid(run([](A& a) { a.eps = 0.0f; }), "eps");  // recomputed statistics need eps
  expect_invalid(run([](A& a) { a.rows = int64_t(1) << 27; }), "rows must be <= 134217727");
}

TEST(NormsArgs, RmsBackwardNeedsNoWorkspaceWithoutWeightGradient) {
  tk::rms_norm_backward_args a;
  a.dx = fake(), a.dx_row_stride = 8, a.dy = fake(), a.dy_row_stride = 8, a.x = fake(), a.x_row_stride = 8;
  a.weight = fake(), a.rows = 2, a.cols = 8;
  a.dweight = fake();
  expect_invalid([&] { tk::rms_norm_backward(a, nullptr); }, "workspace must not be null");
}

// The row bound, 2^27 - 1 (common/arg_checks.h, max_rows), in the two entry points the tests
// above do not reach with it (they share check_shape with the others).
TEST(NormsArgs, EveryEntryPointTakesTheRowBound) {
  tk::layer_norm_forward_args f;
  f.y = fake(), f.y_row_stride = 100, f.x = fake(), f.x_row_stride = 100, f.weight = fake(), f.cols = 100;
  f.rows = int64_t(1) << 27;
  expect_invalid([&] { tk::layer_norm_forward(f, nullptr); }, "rows must be <= 134217727");
  tk::rms_norm_backward_args b;
  b.dx = fake(), b.dx_row_stride = 100, b.dy = fake(), b.dy_row_stride = 100, b.x = fake(), b.x_row_stride = 100;
  b.weight = fake(), b.cols = 100;
  b.rows = int64_t(1) << 27;
  expect_invalid([&] { tk::rms_norm_backward(b, nullptr); }, "rows must be <= 134217727");
  EXPECT_THROW(tk::rms_norm_backward_workspace_bytes(int64_t(1) << 27, 100), tilekit::invalid_argument);
}

TEST(NormsArgs, WorkspaceBytes) {
  // One fp32 [partials, cols] array per gradient, partials = workers x row groups per CTA
  // (kernels/common/row_kernel.cuh): workers never exceed the row items nor 132 (CTAs) / the
  // cluster size; a CTA has 16 groups (warps) for cols <= 1024, 4 for cols <= 4096, 1 beyond 8192.
  EXPECT_EQ(tk::rms_norm_backward_workspace_bytes(1, 262144), size_t(262144) * sizeof(float));
  EXPECT_EQ(tk::layer_norm_backward_workspace_bytes(1, 7), 2 * size_t(16) * 7 * sizeof(float));
  EXPECT_EQ(tk::rms_norm_backward_workspace_bytes(1 << 20, 4096), size_t(132) * 4 * 4096 * sizeof(float));
  EXPECT_EQ(tk::rms_norm_backward_workspace_bytes(1 << 20, 262144), size_t(132 / 16) * 262144 * sizeof(float));
  EXPECT_THROW(tk::rms_norm_backward_workspace_bytes(0, 100), tilekit::invalid_argument);
  // The row bound, 2^27 - 1 (common/arg_checks.h, max_rows): the size of its last valid count.
  EXPECT_EQ(tk::layer_norm_backward_workspace_bytes((int64_t(1) << 27) - 1, 100),
            2 * size_t(132) * 16 * 100 * sizeof(float));
  EXPECT_THROW(tk::layer_norm_backward_workspace_bytes(int64_t(1) << 27, 100), tilekit::invalid_argument);
  EXPECT_THROW(tk::layer_norm_backward_workspace_bytes(4, 0), tilekit::invalid_argument);
}

}  // namespace
