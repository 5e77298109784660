// RMSNorm / LayerNorm forward and backward at M * N = 2^28 bf16 elements, N = 1K .. 256K, in GB/s
// of minimal traffic (each input read once, each output written once) and as a ratio to the
// device-to-device copy bandwidth measured in the same run (x_copy). Targets (ANCHORS.md):
// forward >= 0.90 x_copy for N >= 4K (0.75 at 1K), backward >= 0.85 for N >= 4K.
//
// The *_odd benchmarks run widths whose rows are not 16-byte aligned (the shifted stream).
//
// The working set (2^28 elements = 512 MiB per tensor) is ten times the L2, so inputs need no
// rotation; the weight (<= 512 KiB) is meant to stay in L2 and is counted once.
#include "harness/harness.cuh"
#include "harness/row_widths.cuh"
#include "norms/norms.h"

namespace tb = tilekit::bench;
namespace tk = tilekit::kernels;
using tilekit::bf16;

namespace {

constexpr int64_t total_elements = int64_t(1) << 28;
constexpr size_t element_bytes = sizeof(bf16);
constexpr size_t stat_bytes = sizeof(float);

enum class norm { rms, layer };

template <norm Norm>
void BM_norm_forward(benchmark::State& state) {
  const int64_t cols = state.range(0), rows = total_elements / cols;
  tb::cuda_stream stream;
  tb::device_array<bf16> x{size_t(rows * cols)}, y{size_t(rows * cols)}, w{size_t(cols)}, b{size_t(cols)};
  tb::device_array<float> mean{size_t(rows)}, rstd{size_t(rows)};
  tb::fill_uniform(x.data(), x.size(), 1, stream);
  tb::fill_uniform(w.data(), w.size(), 2, stream);
  tb::fill_uniform(b.data(), b.size(), 3, stream);
  size_t bytes = 2 * size_t(rows * cols) * element_bytes + size_t(cols) * element_bytes + size_t(rows) * stat_bytes;
  if constexpr (Norm == norm::rms) {
    tk::rms_norm_forward_args a;
    a.y = y.data(), a.y_row_stride = cols, a.x = x.data(), a.x_row_stride = cols, a.weight = w.data();
    a.rstd = rstd.data(), a.rows = rows, a.cols = cols;
    tb::time_on_stream(state, stream, [&] { tk::rms_norm_forward(a, stream); });
  } else {
    tk::layer_norm_forward_args a;
    a.y = y.data(), a.y_row_stride = cols, a.x = x.data(), a.x_row_stride = cols, a.weight = w.data();
    a.bias = b.data(), a.mean = mean.data(), a.rstd = rstd.data(), a.rows = rows, a.cols = cols;
    bytes += size_t(cols) * element_bytes + size_t(rows) * stat_bytes;
    tb::time_on_stream(state, stream, [&] { tk::layer_norm_forward(a, stream); });
  }
  tb::set_throughput(state, 0, double(bytes));
  tb::copy_ceiling_ratio(state);
}

// Backward with saved statistics (as in training): reads x, dy, w, mean/rstd; writes dx, dw
// (db). The dw partials (workers x N fp32, written and read once) are not minimal traffic and
// are not counted.
template <norm Norm>
void BM_norm_backward(benchmark::State& state) {
  const int64_t cols = state.range(0), rows = total_elements / cols;
  tb::cuda_stream stream;
  tb::device_array<bf16> x{size_t(rows * cols)}, dy{size_t(rows * cols)}, dx{size_t(rows * cols)};
  tb::device_array<bf16> w{size_t(cols)}, dw{size_t(cols)}, db{size_t(cols)};
  tb::device_array<float> mean{size_t(rows)}, rstd{size_t(rows)};
  tb::fill_uniform(x.data(), x.size(), 1, stream);
  tb::fill_uniform(dy.data(), dy.size(), 2, stream);
  tb::fill_uniform(w.data(), w.size(), 3, stream);
  tb::fill_uniform(mean.data(), mean.size(), 4, stream, -0.1f, 0.1f);
  tb::fill_uniform(rstd.data(), rstd.size(), 5, stream, 0.5f, 1.5f);
  size_t bytes = 3 * size_t(rows * cols) * element_bytes + 2 * size_t(cols) * element_bytes + size_t(rows) * stat_bytes;
  if constexpr (Norm == norm::rms) {
    const size_t ws_bytes = tk::rms_norm_backward_workspace_bytes(rows, cols);
    tb::device_array<unsigned char> workspace(ws_bytes);
    tk::rms_norm_backward_args a;
    a.dx = dx.data(), a.dx_row_stride = cols, a.dweight = dw.data(), a.dy = dy.data(), a.dy_row_stride = cols;
    a.x = x.data(), a.x_row_stride = cols, a.weight = w.data(), a.rstd = rstd.data();
    a.workspace = workspace.data(), a.workspace_bytes = ws_bytes, a.rows = rows, a.cols = cols;
    tb::time_on_stream(state, stream, [&] { tk::rms_norm_backward(a, stream); });
  } else {
    const size_t ws_bytes = tk::layer_norm_backward_workspace_bytes(rows, cols);
    tb::device_array<unsigned char> workspace(ws_bytes);
    tk::layer_norm_backward_args a;
    a.dx = dx.data(), a.dx_row_stride = cols, a.dweight = dw.data(), a.dbias = db.data(), a.dy = dy.data();
    a.dy_row_stride = cols, a.x = x.data(), a.x_row_stride = cols, a.weight = w.data(), a.mean = mean.data();
    a.rstd = rstd.data(), a.workspace = workspace.data(), a.workspace_bytes = ws_bytes, a.rows = rows, a.cols = cols;
    bytes += size_t(cols) * element_bytes + size_t(rows) * stat_bytes;
    tb::time_on_stream(state, stream, [&] { tk::layer_norm_backward(a, stream); });
  }
  tb::set_throughput(state, 0, double(bytes));
  tb::copy_ceiling_ratio(state);
}

}  // namespace

TILEKIT_BENCHMARK(BM_norm_forward<norm::rms>)->Name("BM_rms_norm_forward")->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_backward<norm::rms>)->Name("BM_rms_norm_backward")->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_forward<norm::layer>)->Name("BM_layer_norm_forward")->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_backward<norm::layer>)->Name("BM_layer_norm_backward")->Apply(tb::row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_forward<norm::rms>)->Name("BM_rms_norm_forward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_backward<norm::rms>)->Name("BM_rms_norm_backward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_forward<norm::layer>)->Name("BM_layer_norm_forward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK(BM_norm_backward<norm::layer>)->Name("BM_layer_norm_backward_odd")->Apply(tb::odd_row_widths<'N'>);
TILEKIT_BENCHMARK_MAIN()
