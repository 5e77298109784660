// CPU tests: argument validation of the softmax and cross-entropy host APIs. Every invalid
// argument must throw tilekit::invalid_argument naming the field, BEFORE any CUDA call (these
// tests run on machines without a GPU: a launch would fail with a CUDA error instead).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cross_entropy/cross_entropy.h"
#include "softmax/softmax.h"
#include "tilekit/core/error.cuh"

using namespace tilekit;
using namespace tilekit::kernels;

namespace {

// Fake, suitably aligned addresses: validation never dereferences them, and every test
// that uses them expects a throw before any launch.
alignas(16) unsigned char storage[4096];
void* const data = storage;
void* const data_b = storage + 1024;
void* const misaligned = storage + 1;
const int64_t* const labels = reinterpret_cast<const int64_t*>(storage + 2048);
float* const loss = reinterpret_cast<float*>(storage + 3072);
float* const lse = reinterpret_cast<float*>(storage + 3584);

constexpr int64_t rows = 4, cols = 100;

// Runs `call` and expects invalid_argument whose message starts with `field` (e.g. "y:",
// so that a check of "dy" cannot pass for one of "y").
template <class Call>
void expect_invalid(Call&& call, const std::string& field) {
  const std::string prefix = "tilekit: invalid argument: " + field;
  try {
    call();
    ADD_FAILURE() << "expected invalid_argument naming '" << field << "'";
  } catch (const invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u)
        << "message does not start with '" << prefix << "': " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected invalid_argument naming '" << field << "', got another exception: " << e.what();
  }
}

softmax_forward_args good_softmax_forward() {
  return {.y = data,
          .x = data_b,
          .rows = rows,
          .cols = cols,
          .x_row_stride = cols,
          .y_row_stride = cols,
          .type = dtype::bf16};
}
softmax_backward_args good_softmax_backward() {
  return {.dx = data,
          .dy = data_b,
          .y = data_b,
          .rows = rows,
          .cols = cols,
          .dx_row_stride = cols,
          .dy_row_stride = cols,
          .y_row_stride = cols,
          .type = dtype::fp16};
}
cross_entropy_forward_args good_ce_forward() {
  cross_entropy_forward_args a;
  a.logits = data;
  a.labels = labels;
  a.loss = loss;
  a.lse = lse;
  a.rows = rows;
  a.vocab = cols;
  a.logits_row_stride = cols;
  a.type = dtype::fp32;
  return a;
}
cross_entropy_backward_args good_ce_backward() {
  cross_entropy_backward_args a;
  a.dlogits = data_b;
  a.logits = data;
  a.labels = labels;
  a.lse = lse;
  a.rows = rows;
  a.vocab = cols;
  a.logits_row_stride = cols;
  a.dlogits_row_stride = cols;
  a.type = dtype::bf16;
  return a;
}

}  // namespace

// `args` with the most rows a launch takes, 2^27 - 1 (common/arg_checks.h max_rows), validate
// (never launched here).
template <class Args>
void expect_valid_at_row_bound(Args args) {
  args.rows = (int64_t(1) << 27) - 1;
  EXPECT_NO_THROW(validate(args));
}

TEST(SoftmaxArgs, ValidArgumentsPass) {
  EXPECT_NO_THROW(validate(good_softmax_forward()));
  EXPECT_NO_THROW(validate(good_softmax_backward()));
  auto in_place = good_softmax_forward();
  in_place.y = const_cast<void*>(in_place.x);
  EXPECT_NO_THROW(validate(in_place));
  auto widest = good_softmax_forward();
  widest.rows = 1;
  widest.cols = widest.x_row_stride = widest.y_row_stride = softmax_max_cols;
  EXPECT_NO_THROW(validate(widest));
  expect_valid_at_row_bound(good_softmax_forward());
  expect_valid_at_row_bound(good_softmax_backward());
}

TEST(SoftmaxArgs, ForwardRejectsEachInvalidField) {
  auto run = [](softmax_forward_args a) { return [a] { softmax_forward(a, nullptr); }; };
  auto a = good_softmax_forward();
  a.y = nullptr;
  expect_invalid(run(a), "y:");
  a = good_softmax_forward();
  a.x = nullptr;
  expect_invalid(run(a), "x:");
  a = good_softmax_forward();
  a.x = misaligned;
  expect_invalid(run(a), "x:");
  a = good_softmax_forward();
  a.rows = 0;
  expect_invalid(run(a), "rows:");
  a = good_softmax_forward();
  a.rows = -3;
  expect_invalid(run(a), "rows:");
  a = good_softmax_forward();
  a.rows = int64_t(1) << 27;  // one past the bound (2^27 - 1, common/arg_checks.h max_rows)
  expect_invalid(run(a), "rows: must be <= 134217727");
  a = good_softmax_forward();
  a.cols = 0;
  expect_invalid(run(a), "cols:");
  a = good_softmax_forward();
  a.cols = a.x_row_stride = a.y_row_stride = softmax_max_cols + 1;
  expect_invalid(run(a), "cols:");
  a = good_softmax_forward();
  a.x_row_stride = cols - 1;
  expect_invalid(run(a), "x_row_stride:");
  a = good_softmax_forward();
  a.y_row_stride = 0;
  expect_invalid(run(a), "y_row_stride:");
  a = good_softmax_forward();
  a.x_row_stride = std::numeric_limits<int64_t>::max() / 2;
  expect_invalid(run(a), "x_row_stride:");
  a = good_softmax_forward();
  a.type = dtype::fp8_e4m3;
  expect_invalid(run(a), "type:");
  a = good_softmax_forward();
  a.y = const_cast<void*>(a.x);
  a.y_row_stride = cols + 8;
  expect_invalid(run(a), "y:");
}

TEST(SoftmaxArgs, BackwardRejectsEachInvalidField) {
  auto run = [](softmax_backward_args a) { return [a] { softmax_backward(a, nullptr); }; };
  auto a = good_softmax_backward();
  a.dx = nullptr;
  expect_invalid(run(a), "dx:");
  a = good_softmax_backward();
  a.dy = nullptr;
  expect_invalid(run(a), "dy:");
  a = good_softmax_backward();
  a.y = misaligned;
  expect_invalid(run(a), "y:");
  a = good_softmax_backward();
  a.rows = 0;
  expect_invalid(run(a), "rows:");
  a = good_softmax_backward();
  a.rows = int64_t(1) << 27;  // one past the bound (2^27 - 1, common/arg_checks.h max_rows)
  expect_invalid(run(a), "rows: must be <= 134217727");
  a = good_softmax_backward();
  a.cols = -1;
  expect_invalid(run(a), "cols:");
  a = good_softmax_backward();
  a.dx_row_stride = 1;
  expect_invalid(run(a), "dx_row_stride:");
  a = good_softmax_backward();
  a.dy_row_stride = 99;
  expect_invalid(run(a), "dy_row_stride:");
  a = good_softmax_backward();
  a.y_row_stride = 50;
  expect_invalid(run(a), "y_row_stride:");
  a = good_softmax_backward();
  a.type = dtype::fp8_e5m2;
  expect_invalid(run(a), "type:");
  a = good_softmax_backward();
  a.dx = const_cast<void*>(a.dy);
  a.dx_row_stride = cols + 1;
  expect_invalid(run(a), "dx:");
}

TEST(CrossEntropyArgs, ValidArgumentsPass) {
  EXPECT_NO_THROW(validate(good_ce_forward()));
  EXPECT_NO_THROW(validate(good_ce_backward()));
  expect_valid_at_row_bound(good_ce_forward());
  expect_valid_at_row_bound(good_ce_backward());
  auto no_lse = good_ce_forward();
  no_lse.lse = nullptr;  // lse is optional in the forward
  EXPECT_NO_THROW(validate(no_lse));
  auto fused = good_ce_forward();
  fused.dlogits = data_b;
  fused.dlogits_row_stride = cols;
  fused.label_smoothing = 0.1f;
  fused.z_loss_weight = 1e-4f;
  fused.grad_per_row = loss;
  EXPECT_NO_THROW(validate(fused));
}

TEST(CrossEntropyArgs, ForwardRejectsEachInvalidField) {
  auto run = [](cross_entropy_forward_args a) { return [a] { cross_entropy_forward(a, nullptr); }; };
  auto a = good_ce_forward();
  a.logits = nullptr;
  expect_invalid(run(a), "logits:");
  a = good_ce_forward();
  a.logits = misaligned;
  expect_invalid(run(a), "logits:");
  a = good_ce_forward();
  a.labels = nullptr;
  expect_invalid(run(a), "labels:");
  a = good_ce_forward();
  a.labels = reinterpret_cast<const int64_t*>(storage + 4);
  expect_invalid(run(a), "labels:");
  a = good_ce_forward();
  a.loss = nullptr;
  expect_invalid(run(a), "loss:");
  a = good_ce_forward();
  a.lse = reinterpret_cast<float*>(storage + 2);
  expect_invalid(run(a), "lse:");
  a = good_ce_forward();
  a.rows = 0;
  expect_invalid(run(a), "rows:");
  a = good_ce_forward();
  a.rows = int64_t(1) << 27;  // one past the bound (2^27 - 1, common/arg_checks.h max_rows)
  expect_invalid(run(a), "rows: must be <= 134217727");
  a = good_ce_forward();
  a.vocab = 0;
  expect_invalid(run(a), "vocab:");
  a = good_ce_forward();
  a.vocab = a.logits_row_stride = cross_entropy_max_vocab + 1;
  expect_invalid(run(a), "vocab:");
  a = good_ce_forward();
  a.logits_row_stride = cols - 1;
  expect_invalid(run(a), "logits_row_stride:");
  a = good_ce_forward();
  a.type = dtype::fp8_e4m3;
  expect_invalid(run(a), "type:");
  a = good_ce_forward();
  a.label_smoothing = -0.1f;
  expect_invalid(run(a), "label_smoothing:");
  a = good_ce_forward();
  a.label_smoothing = 1.5f;
  expect_invalid(run(a), "label_smoothing:");
  a = good_ce_forward();
  a.label_smoothing = std::nanf("");
  expect_invalid(run(a), "label_smoothing:");
  a = good_ce_forward();
  a.z_loss_weight = -1.f;
  expect_invalid(run(a), "z_loss_weight:");
  a = good_ce_forward();
  a.z_loss_weight = std::numeric_limits<float>::infinity();
  expect_invalid(run(a), "z_loss_weight:");
  // The fused-gradient fields are checked only when dlogits is given.
  a = good_ce_forward();
  a.dlogits = data_b;
  a.dlogits_row_stride = cols - 1;
  expect_invalid(run(a), "dlogits_row_stride:");
  a = good_ce_forward();
  a.dlogits = misaligned;
  a.dlogits_row_stride = cols;
  expect_invalid(run(a), "dlogits:");
  a = good_ce_forward();
  a.dlogits = data_b;
  a.dlogits_row_stride = cols;
  a.grad_scale = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(run(a), "grad_scale:");
  a = good_ce_forward();
  a.dlogits = data_b;
  a.dlogits_row_stride = cols;
  a.grad_per_row = reinterpret_cast<const float*>(storage + 1);
  expect_invalid(run(a), "grad_per_row:");
  a = good_ce_forward();
  a.dlogits = data_b;
  a.dlogits_row_stride = cols;
  a.grad_per_row = loss;
  a.grad_per_row_stride = -1;
  expect_invalid(run(a), "grad_per_row_stride:");
  a.grad_per_row_stride = std::numeric_limits<int64_t>::max() / 2;  // rows * stride overflows
  expect_invalid(run(a), "grad_per_row_stride:");
  a.grad_per_row_stride = 0;  // one gradient for every row
  EXPECT_NO_THROW(validate(a));
  a.grad_per_row = nullptr;  // the stride of an absent vector is not looked at
  a.grad_per_row_stride = -1;
  EXPECT_NO_THROW(validate(a));
  a = good_ce_forward();
  a.dlogits = const_cast<void*>(a.logits);
  a.dlogits_row_stride = cols + 4;
  a.logits_row_stride = cols;
  expect_invalid(run(a), "dlogits:");
}

TEST(CrossEntropyArgs, BackwardRejectsEachInvalidField) {
  auto run = [](cross_entropy_backward_args a) { return [a] { cross_entropy_backward(a, nullptr); }; };
  auto a = good_ce_backward();
  a.dlogits = nullptr;
  expect_invalid(run(a), "dlogits:");
  a = good_ce_backward();
  a.logits = nullptr;
  expect_invalid(run(a), "logits:");
  a = good_ce_backward();
  a.labels = nullptr;
  expect_invalid(run(a), "labels:");
  a = good_ce_backward();
  a.lse = nullptr;  // required in the backward
  expect_invalid(run(a), "lse:");
  a = good_ce_backward();
  a.grad_per_row = reinterpret_cast<const float*>(storage + 2);
  expect_invalid(run(a), "grad_per_row:");
  a = good_ce_backward();
  a.grad_per_row = loss;
  a.grad_per_row_stride = -3;
  expect_invalid(run(a), "grad_per_row_stride:");
  a = good_ce_backward();
  a.grad_scale = std::numeric_limits<float>::infinity();
  expect_invalid(run(a), "grad_scale:");
  a = good_ce_backward();
  a.rows = -1;
  expect_invalid(run(a), "rows:");
  a = good_ce_backward();
  a.rows = int64_t(1) << 27;  // one past the bound (2^27 - 1, common/arg_checks.h max_rows)
  expect_invalid(run(a), "rows: must be <= 134217727");
  a = good_ce_backward();
  a.vocab = 0;
  expect_invalid(run(a), "vocab:");
  a = good_ce_backward();
  a.logits_row_stride = 0;
  expect_invalid(run(a), "logits_row_stride:");
  a = good_ce_backward();
  a.dlogits_row_stride = cols - 1;
  expect_invalid(run(a), "dlogits_row_stride:");
  a = good_ce_backward();
  a.type = dtype::fp8_e5m2;
  expect_invalid(run(a), "type:");
  a = good_ce_backward();
  a.label_smoothing = 2.f;
  expect_invalid(run(a), "label_smoothing:");
  a = good_ce_backward();
  a.z_loss_weight = -0.5f;
  expect_invalid(run(a), "z_loss_weight:");
}

cross_entropy_reduce_args good_ce_reduce() {
  cross_entropy_reduce_args a;
  a.loss = loss;
  a.labels = labels;
  a.rows = rows;
  a.reduction = cross_entropy_reduction::mean;
  a.out = data;
  a.out_type = dtype::bf16;
  a.row_gradient = lse;
  return a;
}

TEST(CrossEntropyArgs, ReduceValidArgumentsPass) {
  EXPECT_NO_THROW(validate(good_ce_reduce()));
  expect_valid_at_row_bound(good_ce_reduce());
  auto count_only = good_ce_reduce();  // the gradient scale of a mean, before the forward
  count_only.loss = nullptr;
  count_only.out = nullptr;
  EXPECT_NO_THROW(validate(count_only));
  auto sum = good_ce_reduce();  // a sum needs no labels
  sum.reduction = cross_entropy_reduction::sum;
  sum.labels = nullptr;
  EXPECT_NO_THROW(validate(sum));
  auto empty = good_ce_reduce();  // no rows: the inputs are not read (an empty tensor may have no address)
  empty.rows = 0;
  empty.loss = nullptr;
  empty.labels = nullptr;
  EXPECT_NO_THROW(validate(empty));
}

TEST(CrossEntropyArgs, ReduceRejectsEachInvalidField) {
  auto run = [](cross_entropy_reduce_args a) { return [a] { cross_entropy_reduce(a, nullptr); }; };
  auto a = good_ce_reduce();
  a.reduction = static_cast<cross_entropy_reduction>(7);
  expect_invalid(run(a), "reduction:");
  a = good_ce_reduce();
  a.rows = -1;
  expect_invalid(run(a), "rows:");
  a = good_ce_reduce();
  a.rows = int64_t(1) << 27;  // one past the bound (2^27 - 1, common/arg_checks.h max_rows)
  expect_invalid(run(a), "rows: must be <= 134217727");
  a = good_ce_reduce();
  a.out = nullptr;
  a.row_gradient = nullptr;
  a.loss = nullptr;
  expect_invalid(run(a), "out:");  // nothing to compute
  a = good_ce_reduce();
  a.out = nullptr;  // a loss with nowhere to write its sum
  expect_invalid(run(a), "loss:");
  a = good_ce_reduce();
  a.loss = nullptr;
  expect_invalid(run(a), "loss:");
  a = good_ce_reduce();
  a.loss = reinterpret_cast<const float*>(storage + 2);
  expect_invalid(run(a), "loss:");
  a = good_ce_reduce();
  a.out_type = dtype::fp8_e4m3;
  expect_invalid(run(a), "out_type:");
  a = good_ce_reduce();
  a.out = misaligned;
  expect_invalid(run(a), "out:");
  a = good_ce_reduce();
  a.labels = nullptr;  // a mean counts the labels
  expect_invalid(run(a), "labels:");
  a = good_ce_reduce();
  a.labels = reinterpret_cast<const int64_t*>(storage + 4);
  expect_invalid(run(a), "labels:");
  a = good_ce_reduce();
  a.row_gradient = reinterpret_cast<float*>(storage + 1);
  expect_invalid(run(a), "row_gradient:");
}

TEST(CrossEntropyArgs, MessagesAreReadable) {
  auto a = good_ce_forward();
  a.vocab = 0;
  try {
    validate(a);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("tilekit: invalid argument: vocab: must be in [1, 262144], got 0", 0), 0u) << msg;
  }
}
