// Softmax forward and backward (kernels/softmax), bf16, M * N = 2^28 elements, against the
// device-to-device copy bandwidth measured in the same run.
//
// The *_odd benchmarks run widths whose rows are not 16-byte aligned (the shifted stream), with
// M = floor(2^28 / N).
//
// Bytes are the minimal traffic (DESIGN.md 4): forward reads x and writes y (2 x M x N x 2 B),
// backward reads y and dy and writes dx (3 x M x N x 2 B). Each tensor is 512 MiB, ~8x L2,
// so the kernel's own traffic evicts L2 between runs and no flush or rotation is needed.
// Counters: GB/s, x_copy (target >= 0.90 forward for N >= 4K, >= 0.75 at 1K, >= 0.85 backward).
#include <cstdint>

#include "harness/harness.cuh"
#include "harness/row_widths.cuh"
#include "softmax/softmax.h"

namespace tb = tilekit::bench;
namespace tk = tilekit::kernels;
using tilekit::bf16;

namespace {

constexpr int64_t total_elements = int64_t(1) << 28;

void BM_softmax_forward(benchmark::State& state) {
  const int64_t cols = state.range(0), rows = total_elements / cols;
  tb::cuda_stream stream;
  const size_t elements = static_cast<size_t>(rows * cols);
  tb::device_array<bf16> x(elements), y(elements);
  tb::fill_uniform(x.data(), x.size(), 1, stream, -4.f, 4.f);
  const tk::softmax_forward_args args{.y = y.data(),
                                      .x = x.data(),
                                      .rows = rows,
                                      .cols = cols,
                                      .x_row_stride = cols,
                                      .y_row_stride = cols,
                                      .type = tilekit::dtype::bf16};
  tb::time_on_stream(state, stream, [&] { tk::softmax_forward(args, stream); });
  constexpr int tensors_moved = 2;  // x read, y written
  tb::set_throughput(state, 0, double(tensors_moved) * double(elements) * sizeof(bf16));
  tb::copy_ceiling_ratio(state);
}

void BM_softmax_backward(benchmark::State& state) {
  const int64_t cols = state.range(0), rows = total_elements / cols;
  tb::cuda_stream stream;
  const size_t elements = static_cast<size_t>(rows * cols);
  tb::device_array<bf16> y(elements), dy(elements), dx(elements);
  tb::fill_uniform(y.data(), y.size(), 1, stream, 0.f, 2.f / float(cols));
  tb::fill_uniform(dy.data(), dy.size(), 2, stream);
  const tk::softmax_backward_args args{.dx = dx.data(),
                                       .dy = dy.data(),
                                       .y = y.data(),
                                       .rows = rows,
                                       .cols = cols,
                                       .dx_row_stride = cols,
                                       .dy_row_stride = cols,
                                       .y_row_stride = cols,
                                       .type = tilekit::dtype::bf16};
  tb::time_on_stream(state, stream, [&] { tk::softmax_backward(args, stream); });
  constexpr int tensors_moved = 3;  // y and dy read, dx written
  tb::set_throughput(state, 0, double(tensors_moved) * double(elements) * sizeof(bf16));
  tb::copy_ceiling_ratio(state);
}

}  // namespace

TILEKIT_BENCHMARK(BM_softmax_forward)->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_softmax_backward)->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_softmax_forward)->Name("BM_softmax_forward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK(BM_softmax_backward)->Name("BM_softmax_backward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK_MAIN()
