// Cross-entropy forward, forward with fused dlogits, and backward (kernels/cross_entropy),
// bf16 logits [M, V], M * V = 2^28 elements, against the device-to-device copy bandwidth
// measured in the same run.
//
// Minimal bytes (DESIGN.md 4): logits read once (M x V x 2 B), labels read (M x 8 B), loss
// and lse written (M x 4 B each); the fused forward also writes dlogits (M x V x 2 B); the
// backward reads logits, labels, lse and the per-row upstream gradient and writes dlogits.
// The *_odd benchmarks run vocabularies whose rows are not 16-byte aligned (the shifted stream),
// with M = floor(2^28 / V); the *_vocab ones, aligned vocabularies of released models
// (harness/row_widths.cuh). The logits (512 MiB) are ~8x L2, so no flush or rotation is needed.
// One family runs fp16 logits, the forward with dlogits at the vocabularies
// (BM_cross_entropy_forward_with_gradient_fp16_vocab): with dlogits fp16 rows take a size-class
// table of their own (cross_entropy.cu, ce_forward_op::table), not bf16's.
#include <cstdint>
#include <vector>

#include "cross_entropy/cross_entropy.h"
#include "harness/harness.cuh"
#include "harness/row_widths.cuh"

namespace tb = tilekit::bench;
namespace tk = tilekit::kernels;
using tilekit::bf16;
using tilekit::fp16;

namespace {

constexpr int64_t total_elements = int64_t(1) << 28;

// Labels uniform in [0, vocab), uploaded once.
tb::device_array<int64_t> make_labels(int64_t rows, int64_t vocab) {
  std::vector<int64_t> host(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) host[size_t(r)] = int64_t(tb::splitmix64(uint64_t(r)) % uint64_t(vocab));
  tb::device_array<int64_t> labels(host.size());
  TILEKIT_CHECK_CUDA(cudaMemcpy(labels.data(), host.data(), labels.bytes(), cudaMemcpyHostToDevice));
  return labels;
}

// The problem of one benchmark, logits of type T.
template <class T>
struct buffers {
  int64_t vocab, rows;
  tb::device_array<T> logits, dlogits;
  tb::device_array<int64_t> labels;
  tb::device_array<float> loss, lse, grad_per_row;

  buffers(int64_t vocab_, cudaStream_t stream)
      : vocab(vocab_),
        rows(total_elements / vocab_),
        logits(size_t(rows * vocab)),
        dlogits(size_t(rows * vocab)),
        labels(make_labels(rows, vocab)),
        loss(size_t(rows)),
        lse(size_t(rows)),
        grad_per_row(size_t(rows)) {
    tb::fill_uniform(logits.data(), logits.size(), 1, stream, -4.f, 4.f);
    tb::fill_uniform(grad_per_row.data(), grad_per_row.size(), 2, stream, 0.5f, 1.5f);
  }

  tk::cross_entropy_forward_args forward(bool fused) const {
    tk::cross_entropy_forward_args a;
    a.logits = logits.data();
    a.labels = labels.data();
    a.loss = loss.data();
    a.lse = lse.data();
    a.rows = rows;
    a.vocab = vocab;
    a.logits_row_stride = vocab;
    a.type = tilekit::dtype_traits<T>::tag;
    a.label_smoothing = 0.1f;
    if (fused) {
      a.dlogits = dlogits.data();
      a.dlogits_row_stride = vocab;
      a.grad_scale = 1.f / float(rows);  // mean reduction
    }
    return a;
  }

  // Bytes of the per-row vectors: labels (8 B) plus `floats` fp32 values per row.
  double per_row_bytes(int floats) const { return double(rows) * (sizeof(int64_t) + floats * sizeof(float)); }
  double logits_bytes() const { return double(rows) * double(vocab) * sizeof(T); }
};

void BM_cross_entropy_forward(benchmark::State& state) {
  tb::cuda_stream stream;
  const buffers<bf16> b(state.range(0), stream);
  const auto args = b.forward(false);
  tb::time_on_stream(state, stream, [&] { tk::cross_entropy_forward(args, stream); });
  tb::set_throughput(state, 0, b.logits_bytes() + b.per_row_bytes(2));  // logits, labels -> loss, lse
  tb::copy_ceiling_ratio(state);
}

template <class T>
void BM_cross_entropy_forward_with_gradient(benchmark::State& state) {
  tb::cuda_stream stream;
  const buffers<T> b(state.range(0), stream);
  const auto args = b.forward(true);
  tb::time_on_stream(state, stream, [&] { tk::cross_entropy_forward(args, stream); });
  tb::set_throughput(state, 0, 2 * b.logits_bytes() + b.per_row_bytes(2));  // + dlogits
  tb::copy_ceiling_ratio(state);
}

void BM_cross_entropy_backward(benchmark::State& state) {
  tb::cuda_stream stream;
  const buffers<bf16> b(state.range(0), stream);
  tk::cross_entropy_forward(b.forward(false), stream);  // the lse the backward reads
  tk::cross_entropy_backward_args args;
  args.dlogits = b.dlogits.data();
  args.logits = b.logits.data();
  args.labels = b.labels.data();
  args.lse = b.lse.data();
  args.grad_per_row = b.grad_per_row.data();
  args.rows = b.rows;
  args.vocab = b.vocab;
  args.logits_row_stride = args.dlogits_row_stride = b.vocab;
  args.type = tilekit::dtype::bf16;
  args.label_smoothing = 0.1f;
  tb::time_on_stream(state, stream, [&] { tk::cross_entropy_backward(args, stream); });
  tb::set_throughput(state, 0, 2 * b.logits_bytes() + b.per_row_bytes(2));  // logits, labels, lse, grad -> dlogits
  tb::copy_ceiling_ratio(state);
}

}  // namespace

TILEKIT_BENCHMARK(BM_cross_entropy_forward)->Apply(tb::row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward_with_gradient<bf16>)
    ->Name("BM_cross_entropy_forward_with_gradient")
    ->Apply(tb::row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_backward)->Apply(tb::row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward)->Name("BM_cross_entropy_forward_odd")->Apply(tb::odd_row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward_with_gradient<bf16>)
    ->Name("BM_cross_entropy_forward_with_gradient_odd")
    ->Apply(tb::odd_row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_backward)->Name("BM_cross_entropy_backward_odd")->Apply(tb::odd_row_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward)->Name("BM_cross_entropy_forward_vocab")->Apply(tb::vocab_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward_with_gradient<bf16>)
    ->Name("BM_cross_entropy_forward_with_gradient_vocab")
    ->Apply(tb::vocab_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_forward_with_gradient<fp16>)
    ->Name("BM_cross_entropy_forward_with_gradient_fp16_vocab")
    ->Apply(tb::vocab_widths<'V'>);
TILEKIT_BENCHMARK(BM_cross_entropy_backward)->Name("BM_cross_entropy_backward_vocab")->Apply(tb::vocab_widths<'V'>);
TILEKIT_BENCHMARK_MAIN()
