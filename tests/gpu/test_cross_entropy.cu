// GPU tests: cross-entropy forward (loss, lse, optional fused dlogits) and backward
// (kernels/cross_entropy) against an fp64 CPU reference, plus a CPU-only finite-difference
// check that the analytic gradient the reference (and the kernels) use is the derivative of
// the loss, with label smoothing and z-loss.
//
// Tolerances:
//  * loss and lse are fp32 outputs computed in fp32 from the same rounded logits as the
//    reference: each row within 1e-5 of the size of its terms (beyond fp32's rounding of the
//    output). lse = max + log(sum): the max is exact, the sum of up to 262144 exponentials
//    (ex2.approx 2^-22) is off by ~3e-6 relative, an absolute error of its log, and the rest
//    are roundings relative to |max| and log(sum): scale 1 + |max| + log(sum). The loss,
//    (1 - eps)(lse - x_t) + eps (lse - mean x) + z lse^2, carries lse's error times
//    1 + 2 z |lse| plus roundings of its terms: scale lse's times (1 + 2 z |lse|) + (1 - eps)
//    |x_t| + eps mean |x| + z lse^2. Besides, the norm-wise error within 1e-5.
//  * dlogits are computed in fp32 and rounded once to T: each element is checked against the
//    fp32 computation's error beyond that rounding (compare_scaled, gpu_test.cuh), relative to
//    the size of its own terms, |g| (p |1 + 2 z lse| + (1 - eps) [c == label] + eps / V): p
//    from ex2.approx (2^-22) of an argument rounded once (|x - lse| up to ~40: 2e-6 relative)
//    and a row sum of up to 262144 terms (2.7e-6 at worst), then one FMA: within 1e-5
//    (arithmetic_tolerance; measured at most 2.9e-6, H100, 2026-12-06, tools/device_margins.sh).
//    An error far below bf16's rounding (one segment's sum of 16 missing, a row's lse off by
//    1e-4) fails; so does a wrong probability term at the label (p - 1 ~ -1) or a wrong small
//    probability elsewhere (p ~ 1/V), each against its own size. fp16 dlogits of 100K+ columns
//    are subnormals: the rounding to half their step is not counted (nor are probabilities below
//    fp32's smallest normal, which ex2.approx.ftz flushes to 0). Besides, the norm-wise error
//    within tolerance<T>() (fp32: 1e-5), the tighter check where the terms are well above
//    |dlogit| (fp32 at likely labels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "common/gpu_test.cuh"
#include "cross_entropy/cross_entropy.h"
#include "cross_entropy/cross_entropy_tables.cuh"

namespace {

using namespace tilekit;
using namespace tilekit::testing;
namespace tk = tilekit::kernels;

class CrossEntropy : public GpuTest {};

constexpr int64_t ignore_index = tk::cross_entropy_default_ignore_index;
constexpr double loss_tolerance = 1e-5;

struct options {
  float label_smoothing = 0.f;
  float z_loss_weight = 0.f;
  int64_t ignore_index = ::ignore_index;
  // > 0: the label of row r >= 2 is (r * label_step) % vocab instead of a random class (to place
  // labels at chosen columns, e.g. at the first or last column of each streamed segment).
  int64_t label_step = 0;
  // The label's logit of each row r set to 2 ((r mod 7) - 3) + 2 + ln(vocab), above the others
  // (U(-4, 4) + the same offset, sum of exp ~6.8 vocab e^offset): p_label ~ 1/2 instead of ~1 /
  // vocab.
  bool likely_labels = false;
  // Not empty: the label of row r >= 2 is label_columns[r % size] (overrides label_step), e.g.
  // every CTA's first and last column of a clustered row (cluster_edge_labels).
  std::vector<int64_t> label_columns = {};
};

// The first and the last column of every CTA's share of a row of `vocab` columns in `table`'s
// class for vocab (row_cluster_span; by default the bf16 forward with dlogits',
// fused_packed_table), as options::label_columns; one more column if their count is a multiple
// of 5, so that the rows make_problem ignores (r % 5 == 3) do not always take the same ones.
std::vector<int64_t> cluster_edge_labels(int64_t vocab,
                                         const tilekit::kernels::detail::row_table& table =
                                             tilekit::kernels::detail::fused_packed_table) {
  namespace tkd = tilekit::kernels::detail;
  const int ctas = table.configs[table.index(vocab)].cluster_ctas;
  const int64_t span = tkd::row_cluster_span(int(vocab), ctas);
  std::vector<int64_t> columns;
  for (int rank = 0; rank < ctas && rank * span < vocab; ++rank) {
    columns.push_back(rank * span);
    columns.push_back(std::min(vocab, (rank + 1) * span) - 1);
  }
  if (columns.size() % 5 == 0) columns.push_back(vocab / 2);
  return columns;
}

// ---------------------------------------------------------------------------------------------
// fp64 reference
// ---------------------------------------------------------------------------------------------
struct row_reference {
  double lse = 0;
  double loss = 0;
  double lse_scale = 0, loss_scale = 0;  // the size of their terms (see the top of this file)
};

// Loss and lse of one row of `vocab` logits (fp64), label t (not ignored, in range).
row_reference reference_row(const double* x, int64_t vocab, int64_t t, const options& o) {
  double m = -INFINITY;
  for (int64_t c = 0; c < vocab; ++c) m = std::max(m, x[c]);
  double sum = 0, sum_x = 0, sum_abs_x = 0;
  for (int64_t c = 0; c < vocab; ++c) {
    sum += std::exp(x[c] - m);
    sum_x += x[c];
    sum_abs_x += std::abs(x[c]);
  }
  row_reference r;
  r.lse = m + std::log(sum);
  const double eps = o.label_smoothing, z = o.z_loss_weight;
  r.loss = (1 - eps) * (r.lse - x[t]) + eps * (r.lse - sum_x / double(vocab)) + z * r.lse * r.lse;
  r.lse_scale = 1 + std::abs(m) + std::log(sum);
  r.loss_scale = r.lse_scale * (1 + 2 * z * std::abs(r.lse)) + (1 - eps) * std::abs(x[t]) +
                 eps * sum_abs_x / double(vocab) + z * r.lse * r.lse;
  return r;
}

// Analytic gradient of reference_row's loss: p_c (1 + 2 z lse) - (1 - eps) [c == t] - eps / V,
// times scale; `terms` (optional): the size of its terms, |scale| (p |1 + 2 z lse| + (1 - eps)
// [c == t] + eps / V), against which its fp32 error is measured (p at least 2^-126 /
// arithmetic_tolerance: below fp32's smallest normal the kernels' exponentials are 0).
void reference_gradient(const double* x, int64_t vocab, int64_t t, const options& o, double lse, double scale,
                        double* dx, double* terms = nullptr) {
  const double eps = o.label_smoothing;
  for (int64_t c = 0; c < vocab; ++c) {
    const double p = std::exp(x[c] - lse), probability = p * (1 + 2 * o.z_loss_weight * lse);
    const double target = (c == t ? 1 - eps : 0) + eps / double(vocab);
    dx[c] = scale * (probability - target);
    if (terms) terms[c] = std::abs(scale) * (std::max(std::abs(probability), 0x1p-126 / arithmetic_tolerance) + target);
  }
}

// The finite-difference proof of the analytic formula, in fp64 on the CPU (no GPU needed).
TEST(CrossEntropyReference, AnalyticGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-3, 3);
  const int64_t vocab = 37;
  std::vector<double> x(vocab);
  for (auto& v : x) v = dist(rng);
  const options o{.label_smoothing = 0.15f, .z_loss_weight = 0.02f};
  for (int64_t t : {int64_t(0), int64_t(17), vocab - 1}) {
    const row_reference r = reference_row(x.data(), vocab, t, o);
    std::vector<double> analytic(vocab);
    reference_gradient(x.data(), vocab, t, o, r.lse, 1.0, analytic.data());
    constexpr double step = 1e-6;
    for (int64_t c = 0; c < vocab; ++c) {
      std::vector<double> plus = x, minus = x;
      plus[c] += step;
      minus[c] -= step;
      const double numeric =
          (reference_row(plus.data(), vocab, t, o).loss - reference_row(minus.data(), vocab, t, o).loss) / (2 * step);
      EXPECT_NEAR(analytic[c], numeric, 1e-7) << "label " << t << " column " << c;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Test problems
// ---------------------------------------------------------------------------------------------
template <class T>
struct problem {
  int64_t rows, vocab, stride;
  int64_t ignore_index;
  std::vector<T> logits;  // [rows, stride], rounded to T
  std::vector<int64_t> labels;
  std::vector<float> grad_per_row;

  // fp64 reference outputs
  std::vector<double> loss, lse;
  std::vector<double> loss_scale, lse_scale;  // the size of their terms (reference_row)
  std::vector<double> dlogits;       // [rows, vocab] dense
  std::vector<double> dlogit_terms;  // the size of each dlogit's terms (reference_gradient)
};

// Labels: random (or options::label_step apart), with row 0 -> class 0, row 1 -> class
// vocab - 1 (both ends of the vocabulary), and every 5th row (from row 3) ignored. Logits:
// U(-4, 4) plus a row offset 2 ((r mod 7) - 3): the loss and dlogits do not see it, but lse
// moves with it, so a row finished with another row's lse or max (a reused posted slot: period
// 7 shares no factor with the kernel's 4 rounds) is off by a factor e^2 or more, where rows of
// one distribution differed by ~1.7 / sqrt(vocab); and the label smoothing's sum of logits is
// O(vocab) rather than O(sqrt(vocab)), so a segment or CTA left out of it shows.
template <class T>
problem<T> make_problem(int64_t rows, int64_t vocab, int64_t pad, const options& o, float grad_scale,
                        bool per_row_gradient, uint64_t seed) {
  problem<T> p;
  p.rows = rows;
  p.vocab = vocab;
  p.stride = vocab + pad;
  p.ignore_index = o.ignore_index;
  std::mt19937_64 rng(seed);
  p.logits = random_vector<T>(size_t(rows * p.stride), rng, -4.f, 4.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < p.stride; ++c) {
      T& v = p.logits[size_t(r * p.stride + c)];
      // The padding between rows: 60, far above every logit, so a kernel that took it into a
      // row's max, sum or smoothing term would be far off.
      v = convert<T>(c < vocab ? convert<float>(v) + 2.0f * float(r % 7 - 3) : 60.0f);
    }
  std::uniform_int_distribution<int64_t> label_dist(0, vocab - 1);
  p.labels.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = !o.label_columns.empty() ? o.label_columns[size_t(r) % o.label_columns.size()]
                          : o.label_step > 0       ? r * o.label_step % vocab
                                                   : label_dist(rng);
    p.labels[size_t(r)] = r == 0 ? 0 : r == 1 ? vocab - 1 : (r % 5 == 3 ? o.ignore_index : label);
    if (o.likely_labels && p.labels[size_t(r)] != o.ignore_index)
      p.logits[size_t(r * p.stride + p.labels[size_t(r)])] =
          convert<T>(2.0f * float(r % 7 - 3) + 2.0f + std::log(float(vocab)));
  }
  p.grad_per_row = random_vector<float>(size_t(rows), rng, 0.5f, 2.f);

  p.loss.assign(size_t(rows), 0);
  p.lse.assign(size_t(rows), 0);
  p.loss_scale.assign(size_t(rows), 1);  // ignored rows: 0 exactly (checked apart too)
  p.lse_scale.assign(size_t(rows), 0);
  p.dlogits.assign(size_t(rows * vocab), 0);
  p.dlogit_terms.assign(size_t(rows * vocab), 0);
  std::vector<double> x(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) x[size_t(c)] = to_double(p.logits[size_t(r * p.stride + c)]);
    const int64_t t = p.labels[size_t(r)];
    const bool ignored = t == o.ignore_index;
    const row_reference ref = reference_row(x.data(), vocab, ignored ? 0 : t, o);
    p.lse[size_t(r)] = ref.lse;
    p.loss[size_t(r)] = ignored ? 0 : ref.loss;
    p.lse_scale[size_t(r)] = ref.lse_scale;
    if (!ignored) p.loss_scale[size_t(r)] = ref.loss_scale;
    const double scale = ignored ? 0 : grad_scale * (per_row_gradient ? double(p.grad_per_row[size_t(r)]) : 1.0);
    reference_gradient(x.data(), vocab, t, o, ref.lse, scale, &p.dlogits[size_t(r * vocab)],
                       &p.dlogit_terms[size_t(r * vocab)]);
  }
  return p;
}

// Splits dense dlogits into the label entries (one per non-ignored row) and all others.
template <class V>
void split_by_label(const std::vector<V>& dense, const std::vector<int64_t>& labels, int64_t vocab,
                    std::vector<V>* at_label, std::vector<V>* elsewhere) {
  for (size_t r = 0; r < labels.size(); ++r)
    for (int64_t c = 0; c < vocab; ++c) {
      const V v = dense[r * size_t(vocab) + size_t(c)];
      (c == labels[r] ? at_label : elsewhere)->push_back(v);
    }
}

template <class T>
std::vector<T> unpad(const std::vector<T>& strided, int64_t rows, int64_t vocab, int64_t stride) {
  std::vector<T> dense(size_t(rows * vocab));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < vocab; ++c) dense[size_t(r * vocab + c)] = strided[size_t(r * stride + c)];
  return dense;
}

// dlogits_strided: the kernel's [rows, stride] output in a poisoned buffer, whose padding
// columns must still hold the poison (nothing written outside [0, vocab), the realigned stores of
// shifted rows included).
template <class T>
void expect_gradient_close(const problem<T>& p, const std::vector<T>& dlogits_strided) {
  EXPECT_EQ(padding_written(dlogits_strided, p.rows, p.vocab, p.stride), 0u)
      << "dlogits written outside [0, vocab)";
  const std::vector<T> dlogits = unpad(dlogits_strided, p.rows, p.vocab, p.stride);
  // The label columns and the others apart, so that a failure says which.
  std::vector<T> out_label, out_other;
  std::vector<double> ref_label, ref_other, terms_label, terms_other;
  split_by_label(dlogits, p.labels, p.vocab, &out_label, &out_other);
  split_by_label(p.dlogits, p.labels, p.vocab, &ref_label, &ref_other);
  split_by_label(p.dlogit_terms, p.labels, p.vocab, &terms_label, &terms_other);
  {
    SCOPED_TRACE("dlogits at the label columns");
    TILEKIT_EXPECT_CLOSE(out_label, ref_label, tolerance<T>());
    TILEKIT_EXPECT_CLOSE_SCALED(out_label, ref_label, terms_label, arithmetic_tolerance);
  }
  {
    SCOPED_TRACE("dlogits at the other columns");
    TILEKIT_EXPECT_CLOSE(out_other, ref_other, tolerance<T>());
    TILEKIT_EXPECT_CLOSE_SCALED(out_other, ref_other, terms_other, arithmetic_tolerance);
  }
  // Ignored rows must be exactly zero (the relative check above could absorb small values).
  for (int64_t r = 0; r < p.rows; ++r) {
    if (p.labels[size_t(r)] != p.ignore_index) continue;
    for (int64_t c = 0; c < p.vocab; ++c)
      if (convert<float>(dlogits[size_t(r * p.vocab + c)]) != 0.f) {
        ADD_FAILURE() << "ignored row " << r << " has dlogits[" << c
                      << "] = " << convert<float>(dlogits[size_t(r * p.vocab + c)]);
        return;
      }
  }
}

// The backward of forward `f`'s problem, writing `dlogits`: the same logits, labels, lse, shape,
// type, options, dlogits row stride and upstream gradient (the forward reads the last two only
// with its own dlogits).
tk::cross_entropy_backward_args backward_args_of(const tk::cross_entropy_forward_args& f, void* dlogits) {
  tk::cross_entropy_backward_args b;
  b.dlogits = dlogits;
  b.logits = f.logits;
  b.labels = f.labels;
  b.lse = f.lse;
  b.grad_per_row = f.grad_per_row;
  b.grad_per_row_stride = f.grad_per_row_stride;
  b.grad_scale = f.grad_scale;
  b.rows = f.rows;
  b.vocab = f.vocab;
  b.logits_row_stride = f.logits_row_stride;
  b.dlogits_row_stride = f.dlogits_row_stride;
  b.type = f.type;
  b.ignore_index = f.ignore_index;
  b.label_smoothing = f.label_smoothing;
  b.z_loss_weight = f.z_loss_weight;
  return b;
}

// Where the forward with dlogits holds its rows as packed pairs (bf16 from 1025 columns, fp16
// from 16385: the tables of ce_forward_op, cross_entropy.cu), it computes every dlogit as the
// backward does from the same lse (dlogit_from_logit, the same exponent form in both): the very
// same bits.
template <class T>
bool fused_forward_writes_backward_bits(int64_t vocab) {
  if constexpr (std::is_same_v<T, bf16>) return vocab > 1024;
  else if constexpr (std::is_same_v<T, fp16>) return vocab > 16384;
  else return false;
}

// Runs the forward (fused gradient when `fused`), then the backward from the forward's lse,
// and compares everything with the reference (and, where fused_forward_writes_backward_bits,
// the fused forward's dlogits with the backward's, bit for bit).
template <class T>
void check(int64_t rows, int64_t vocab, int64_t pad, const options& o, bool fused, bool per_row_gradient = true,
           float grad_scale = 0.75f) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype_traits<T>::tag) << " rows=" << rows << " vocab=" << vocab
                                    << " pad=" << pad << " smoothing=" << o.label_smoothing << " z=" << o.z_loss_weight
                                    << (fused ? " fused" : ""));
  const problem<T> p =
      make_problem<T>(rows, vocab, pad, o, grad_scale, per_row_gradient, test_seed() + uint64_t(vocab));
  device_buffer<T> logits(p.logits);
  device_buffer<int64_t> labels(p.labels);
  device_buffer<float> grad_per_row(p.grad_per_row);
  device_buffer<float> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows));
  device_buffer<T> dlogits_fused(p.logits.size()), dlogits(p.logits.size());

  tk::cross_entropy_forward_args forward;
  forward.logits = logits.get();
  forward.labels = labels.get();
  forward.loss = loss.get();
  forward.lse = lse.get();
  forward.rows = rows;
  forward.vocab = vocab;
  forward.logits_row_stride = p.stride;
  forward.type = dtype_traits<T>::tag;
  forward.ignore_index = o.ignore_index;
  forward.label_smoothing = o.label_smoothing;
  forward.z_loss_weight = o.z_loss_weight;
  forward.dlogits_row_stride = p.stride;
  forward.grad_per_row = per_row_gradient ? grad_per_row.get() : nullptr;
  forward.grad_scale = grad_scale;
  if (fused) forward.dlogits = dlogits_fused.get();
  tk::cross_entropy_forward(forward, nullptr);
  tk::cross_entropy_backward(backward_args_of(forward, dlogits.get()), nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());

  const std::vector<float> loss_out = loss.download(), lse_out = lse.download();
  {
    SCOPED_TRACE("loss");
    TILEKIT_EXPECT_CLOSE(loss_out, p.loss, loss_tolerance);
    TILEKIT_EXPECT_CLOSE_SCALED(loss_out, p.loss, p.loss_scale, loss_tolerance);
  }
  {
    SCOPED_TRACE("lse");
    TILEKIT_EXPECT_CLOSE(lse_out, p.lse, loss_tolerance);
    TILEKIT_EXPECT_CLOSE_SCALED(lse_out, p.lse, p.lse_scale, loss_tolerance);
  }
  for (int64_t r = 0; r < rows; ++r)
    if (p.labels[size_t(r)] == p.ignore_index) EXPECT_EQ(loss_out[size_t(r)], 0.f) << "ignored row " << r;
  const std::vector<T> backward_out = dlogits.download();
  {
    SCOPED_TRACE("backward");
    expect_gradient_close(p, backward_out);
  }
  if (fused) {
    SCOPED_TRACE("fused forward");
    const std::vector<T> fused_out = dlogits_fused.download();
    expect_gradient_close(p, fused_out);
    if (fused_forward_writes_backward_bits<T>(vocab)) {
      int64_t differing_rows = 0, first = -1;
      for (int64_t r = 0; r < rows; ++r) {
        const size_t at = size_t(r * p.stride);
        if (std::memcmp(&fused_out[at], &backward_out[at], size_t(vocab) * sizeof(T)) != 0) {
          if (first < 0) first = r;
          ++differing_rows;
        }
      }
      EXPECT_EQ(differing_rows, 0) << "rows whose fused dlogits differ from the backward's bits (first: row " << first
                                   << ")";
    }
  }
}

const int64_t vocabs[] = {1, 7, 100, 1000, 1024, 4097, 8192, 65543, 262144};

int64_t rows_for(int64_t vocab, int64_t max_rows = 41) {
  constexpr int64_t reference_elements = int64_t(1) << 20;
  return std::max<int64_t>(2, std::min<int64_t>(max_rows, reference_elements / vocab));
}

TEST_F(CrossEntropy, PlainBf16AllVocabs) {
  for (int64_t v : vocabs) check<bf16>(rows_for(v), v, 0, {}, /*fused=*/false);
}

TEST_F(CrossEntropy, FusedFp32AllVocabs) {
  for (int64_t v : vocabs) check<float>(rows_for(v), v, 0, {}, /*fused=*/true);
}

// The fp32 forward without dlogits (its own table: deferred from 4K, streamed from 32K) and the
// fp16 forward with dlogits at every vocabulary up to 8K (fp16 dlogits of wider rows fall into
// subnormals; 65543 is in Fp16AndStridedRows). One column without the z-loss: p = 1 exactly,
// so the loss and dlogit are z x^2 and 2 z x g, ~1e-4, left over from O(|x|) terms that cancel
// in fp32, which a relative 1e-5 cannot take (a reviewer's simulation, 2026-12-05: 3-8e-5).
TEST_F(CrossEntropy, UnfusedFp32AndFusedFp16AllVocabs) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-4f};
  for (int64_t v : vocabs) {
    const options ov = v == 1 ? options{.label_smoothing = 0.1f} : o;
    check<float>(rows_for(v), v, 0, ov, /*fused=*/false);
    if (v <= 8192) check<fp16>(rows_for(v), v, 0, ov, /*fused=*/true);
  }
}

TEST_F(CrossEntropy, SmoothingAndZLossBf16AllVocabs) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  for (int64_t v : vocabs) check<bf16>(rows_for(v), v, 0, o, /*fused=*/true);
}

// Labels of probability ~1/2 (options::likely_labels): the label column's dlogit, scale (p_t (1
// + 2 z lse) - 1 + eps - eps / V), then depends on p_t at O(1). With random labels (p_t ~ 1 /
// vocab) a kernel that dropped p_t there (wrote -scale (1 - eps - ...)) was off by ~1 / vocab
// only, within bf16's tolerance from 100 columns on. Every vocabulary but 1 (p_t = 1 whatever
// the logits), fused and not, fp32, and misaligned rows.
TEST_F(CrossEntropy, LikelyLabelsAllVocabs) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f, .likely_labels = true};
  for (int64_t v : vocabs) {
    if (v == 1) continue;
    check<bf16>(rows_for(v), v, 0, o, /*fused=*/true);
    check<float>(rows_for(v, 9), v, 0, o, /*fused=*/false);
  }
  check<bf16>(9, 4097, 3, o, /*fused=*/true);
  check<fp16>(9, 1000, 5, o, /*fused=*/true);
}

TEST_F(CrossEntropy, SmoothingAndZLossFp32) {
  const options o{.label_smoothing = 0.25f, .z_loss_weight = 0.01f};
  for (int64_t v : {int64_t(7), int64_t(1000), int64_t(8192), int64_t(65543), int64_t(262144)})
    check<float>(rows_for(v), v, 0, o, /*fused=*/true, /*per_row_gradient=*/false, 1.f / 3);
}

// The forward without dlogits of 16-bit logits reads packed pairs from 1K columns on (32, then
// 64 columns per thread; packed_row_table in kernels/common/row_kernel.cuh): every size class
// of that table, the label smoothing sum over pairs with a tail, fp16 as well, and misaligned
// rows (shifted stream).
TEST_F(CrossEntropy, UnfusedForwardOfPackedPairs) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  for (int64_t v : {int64_t(1), int64_t(7), int64_t(100), int64_t(1000), int64_t(2000), int64_t(4097), int64_t(8192),
                    int64_t(16385), int64_t(32768), int64_t(40000), int64_t(131073), int64_t(262144)}) {
    check<bf16>(rows_for(v), v, 0, o, /*fused=*/false);
    // Not fp16 at 262144 classes: its dlogits (~1 / V ~ 4e-6) are fp16 subnormals, whose
    // spacing (6e-8) alone is a 0.3% relative error (the checked backward's, not the forward's).
    if (v < 262144) check<fp16>(rows_for(v, 7), v, 0, o, /*fused=*/false);
  }
  check<bf16>(9, 1000, 3, o, /*fused=*/false);
  check<bf16>(9, 2000, 3, o, /*fused=*/false);
  check<fp16>(5, 40000, 5, o, /*fused=*/false);
}

// The forward without dlogits reads misaligned rows order-free (load_row_pairs_unordered,
// load_row_unordered in tilekit/ops/row_io.cuh): the lead of each chunk's first unit takes the
// chunk's last columns from the stage row's extra unit. Rows of 2^k - 1 columns, one fewer than
// their class's width, reach into that unit at shifts 2 and up (the streamed rows' full segments
// at every shift but 0); odd widths give row r the shift r x cols mod 8 (mod 4 for fp32), so 24
// rows hold every shift three times. Every class of the packed table up to the first streamed
// one (bf16, fp16 at 2K), and fp32 rows of one CTA and streamed.
TEST_F(CrossEntropy, UnfusedForwardOfShiftedRowsAtClassEdges) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  for (int64_t v : {int64_t(255), int64_t(1023), int64_t(2047), int64_t(4095), int64_t(8191), int64_t(16383),
                    int64_t(32767)})
    check<bf16>(24, v, 0, o, /*fused=*/false);
  for (int64_t v : {int64_t(1023), int64_t(4095), int64_t(32767)}) check<float>(12, v, 0, o, /*fused=*/false);
  check<fp16>(24, 2047, 0, o, /*fused=*/false);
}

// Enough rows that every persistent worker takes several items: the forward without dlogits
// finishes each row of 4 warps or more one row later (deferred rows), across items, with the
// posted reduction of the next row in flight, and the last row of each worker after its loop.
TEST_F(CrossEntropy, ManyRowsPerWorker) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  check<bf16>(20000, 100, 0, o, /*fused=*/false);
  check<bf16>(3000, 4097, 0, o, /*fused=*/false);
  check<float>(1500, 1000, 0, o, /*fused=*/false);
  check<fp16>(400, 65543, 0, {}, /*fused=*/false);
  check<bf16>(1000, 2048, 0, o, /*fused=*/true);
}

// Deferred rows in every kind of group, each worker running through its four posted-reduction
// buffers several times (> 8 rows per group): 4 warps per row (8K columns, 4 groups per CTA), 8
// warps (16K, 2 groups), 16 warps (32K, the whole CTA), and streamed rows of 2 segments (fp32,
// 20000 columns), 3 and 8 (bf16, 65543 and 262144 columns).
TEST_F(CrossEntropy, DeferredRowsManyRounds) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  check<bf16>(5000, 8000, 0, o, /*fused=*/false);
  check<bf16>(2400, 16000, 0, o, /*fused=*/false);
  check<bf16>(1400, 30000, 0, o, /*fused=*/false);
  check<float>(700, 20000, 0, o, /*fused=*/false);
  check<bf16>(350, 65543, 0, {}, /*fused=*/false);
  check<bf16>(150, 262144, 0, o, /*fused=*/false);
}

// Streamed rows (the forward without dlogits reads rows of 64K columns and more, 32K for fp32,
// as segments one after the other; row_kernel.cuh, "Streamed rows"): labels at the first and at
// the last column of every segment (32768 bf16 / 16384 fp32 columns each), rows whose last
// segments are skipped (131073 columns: 5 of the class's 8 segments; fp32 40000: 3 of 4, misaligned:
// a shifted stream), label smoothing (the logits' sum over the segments), many rows per worker.
TEST_F(CrossEntropy, StreamedRowsLabelsAtSegmentEdges) {
  for (int64_t step : {int64_t(32768), int64_t(32767)}) {
    const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f, .label_step = step};
    check<bf16>(20, 262144, 0, o, /*fused=*/false);
    check<bf16>(300, 131073, 0, o, /*fused=*/false);
    check<fp16>(8, 65536, 0, o, /*fused=*/false);
  }
  for (int64_t step : {int64_t(16384), int64_t(16383)}) {
    const options o{.label_smoothing = 0.1f, .label_step = step};
    check<float>(20, 262144, 0, o, /*fused=*/false);
    check<float>(9, 40000, 3, o, /*fused=*/false);
  }
}

// With dlogits, bf16 logits of more than 1K columns and fp16 logits of 32K and more are held
// as packed pairs too (fused_packed_table, wide_row_table) and the dlogits recomputed from them:
// every such class of bf16 (2K, 4K, 8K, 16K, 32K, clusters of 2, 5 and 8; the 4-CTA class in
// FusedClusterRowsLabelsAtChunkEdges), aligned and not (odd widths: shifted rows).
TEST_F(CrossEntropy, FusedForwardOfPackedPairs) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  for (int64_t v : {int64_t(2000), int64_t(3001), int64_t(8000), int64_t(12345), int64_t(32768), int64_t(40000),
                    int64_t(50257), int64_t(102401), int64_t(131073), int64_t(151937), int64_t(200001)}) {
    check<bf16>(rows_for(v, 7), v, 0, o, /*fused=*/true);
    if (v >= 32768 && v < 65536) check<fp16>(rows_for(v, 3), v, 0, o, /*fused=*/true, /*per_row_gradient=*/false, 1.f);
  }
  check<bf16>(5, 40000, 3, o, /*fused=*/true);
  check<bf16>(7, 12345, 5, o, /*fused=*/true);
}

// With dlogits, 16-bit rows of more than 32K columns are packed pairs over clusters of 28672 or
// 32768 columns per CTA, each CTA an even share of the row (row_cluster_span): bf16 50304 / 57344
// over 2 CTAs of 7 groups, 57345 / 65536 over 2 of 8, 65543 / 102400 / 114688 over 4 of 7
// groups, 114689 over 4 of 8, 131073 / 151936 / 163840 over 5 (fused_packed_table's cluster of
// 5), 163841 and 262144 over 8; fp16 65543 over 4 of 8 (fused_wide_table). Labels at the first
// and the last column of every CTA's share (cluster_edge_labels), and at steps of 32768 / 32767
// columns; enough rows that every worker (66 clusters of 2, 30 of 4, 15 of 8 on the H200, about
// 24 of 5: an estimate) takes several items.
TEST_F(CrossEntropy, FusedClusterRowsLabelsAtChunkEdges) {
  for (int64_t v : {int64_t(50304), int64_t(57344), int64_t(57345), int64_t(65536), int64_t(65543), int64_t(102400),
                    int64_t(114688), int64_t(114689), int64_t(131073), int64_t(151936), int64_t(163840),
                    int64_t(163841), int64_t(262144)}) {
    const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f, .label_columns = cluster_edge_labels(v)};
    check<bf16>(v <= 65543 ? 300 : 120, v, 0, o, /*fused=*/true);
  }
  for (int64_t step : {int64_t(32768), int64_t(32767)}) {
    const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f, .label_step = step};
    check<bf16>(700, 65536, 0, o, /*fused=*/true);
    check<bf16>(150, 151936, 0, o, /*fused=*/true);
    check<bf16>(150, 262144, 0, o, /*fused=*/true);
  }
  check<fp16>(300, 65543, 0, {}, /*fused=*/true, /*per_row_gradient=*/false, 1.f);
}

// fp16 logits with dlogits take the same clusters from 32K on (fused_wide_table; test_row_spans
// checks that they are fused_packed_table's there): the cluster of 5, aligned and shifted, labels
// at every CTA's first and last column. A gradient scale of 256, as fp16 training's loss scaling
// does: with 1, most dlogits (~1 / V ~ 7e-6) are fp16 subnormals, whose rounding alone took the
// norm-wise error of the columns other than the label's to 2.8e-3, over the tolerance of 2e-3
// (H100, 2026-12-08, with labels of probability ~1/2, which halve those dlogits; ~1.3e-3 without).
TEST_F(CrossEntropy, FusedFp16RowsOverClustersOfFive) {
  namespace tkd = tilekit::kernels::detail;
  for (int64_t v : {int64_t(151936), int64_t(151937)}) {
    const options o{.label_smoothing = 0.1f,
                    .z_loss_weight = 1e-3f,
                    .label_columns = cluster_edge_labels(v, tkd::fused_wide_table)};
    check<fp16>(60, v, 0, o, /*fused=*/true, /*per_row_gradient=*/false, 256.f);
  }
}

// The backward of 16-bit logits runs rows of 131073-163840 columns over 5 CTAs of 32768 columns
// (backward_wide_table, cross_entropy_tables.cuh: 64 columns per thread as packed pairs) and
// wider ones over 16 CTAs of 16384. Labels at every CTA's first and last column of the
// backward's spans, bf16 and fp16, aligned rows and shifted ones (151937; pad 3); the forward
// here without dlogits, so that check() compares the backward's dlogits alone with the reference.
TEST_F(CrossEntropy, BackwardClusterRowsLabelsAtChunkEdges) {
  namespace tkd = tilekit::kernels::detail;
  static_assert(tkd::backward_wide_table.configs[9].max_cols == 163840 &&
                    tkd::backward_wide_table.configs[9].cluster_ctas == 5,
                "the widths below are those of the backward's cluster of 5");
  for (int64_t v : {int64_t(131072), int64_t(131073), int64_t(151936), int64_t(151937), int64_t(163840),
                    int64_t(163841)}) {
    const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f,
                    .label_columns = cluster_edge_labels(v, tkd::backward_wide_table)};
    check<bf16>(60, v, 0, o, /*fused=*/false);
    // fp16 up to the class's bound, at a gradient of 1: most dlogits (~1 / V) are then fp16
    // subnormals, whose rounding alone takes ~1.3e-3 of the norm-wise tolerance of 2e-3 (passed on
    // an H100, 2026-12-08); wider rows sink further (see FusedFp16RowsOverClustersOfFive).
    if (v <= 163840) check<fp16>(30, v, 0, o, /*fused=*/false, /*per_row_gradient=*/false, 1.f);
  }
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f,
                  .label_columns = cluster_edge_labels(151936, tkd::backward_wide_table)};
  check<bf16>(9, 151936, 3, o, /*fused=*/false);
}

// check() compares the fused forward's dlogits with the backward's bits; here at the widths
// around 32768 columns, where both kernels change the form of the exponent (fused_exponent,
// cross_entropy.cu), and through the unaligned path (pad 3).
TEST_F(CrossEntropy, FusedForwardWritesTheBackwardsBits) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f};
  for (int64_t v : {int64_t(1025), int64_t(16384), int64_t(32768), int64_t(32769), int64_t(65536)}) {
    check<bf16>(9, v, 0, o, /*fused=*/true);
    check<bf16>(5, v, 3, o, /*fused=*/true);
  }
  for (int64_t v : {int64_t(16385), int64_t(32768), int64_t(32769), int64_t(65543)})
    check<fp16>(9, v, 0, o, /*fused=*/true);
}

// Rows of an odd width are not 16-byte aligned (a shifted stream): the dlogits rows are stored
// realigned, and the label's owner overwrites the label's dlogit after a __syncwarp
// (patch_label_dlogit, cross_entropy.cu). Labels at every column of the row, each in several rows
// (so at several shifts), through the float path (bf16 1023, fp32) and the packed pairs (bf16
// 2047 and 4095, fused forward); check() compares the label columns apart from the others.
TEST_F(CrossEntropy, LabelsAtEveryColumnOfRealignedRows) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-3f, .label_step = 1};
  for (int64_t v : {int64_t(1023), int64_t(2047), int64_t(4095)}) check<bf16>(6 * v, v, 0, o, /*fused=*/true);
  check<float>(6 * 1023, 1023, 0, o, /*fused=*/true);
  check<bf16>(6 * 1000, 1000, 3, o, /*fused=*/true);  // every shift, 0 (aligned rows) included
}

TEST_F(CrossEntropy, Fp16AndStridedRows) {
  const options o{.label_smoothing = 0.05f};
  check<fp16>(13, 1000, 0, o, true);
  check<fp16>(3, 65543, 8, o, true);
  // Pads of 3 / 5 elements make every other row misaligned (element-by-element path).
  check<bf16>(9, 4097, 3, o, true);
  check<bf16>(5, 32000, 8, o, true);
  check<float>(4, 50257, 5, o, true);
  check<float>(2, 262144, 4, {}, true);
}

TEST_F(CrossEntropy, SingleRowBothEnds) {
  for (int64_t v : {int64_t(1), int64_t(100), int64_t(65543), int64_t(262144)}) {
    check<bf16>(1, v, 0, {.label_smoothing = 0.1f}, true);  // row 0: label 0
  }
}

// ignore_index may be a real class: rows with that label are ignored, not trained on.
TEST_F(CrossEntropy, IgnoreIndexInsideTheVocabulary) {
  const options o{.label_smoothing = 0.1f, .z_loss_weight = 1e-4f, .ignore_index = 0};
  // make_problem labels row 0 with class 0 == ignore_index: it must come out ignored.
  check<bf16>(11, 4097, 0, o, true);
  check<float>(6, 131072, 0, o, true);
}

// A one-word vocabulary: lse is the logit itself and the loss exactly 0 (what torch gives; a
// log-sum-exp whose max term is not exactly 1 is off by an ulp of the logit here).
TEST_F(CrossEntropy, OneWordVocabularyIsExact) {
  const int64_t rows = 37;
  std::mt19937_64 rng(test_seed());
  const std::vector<float> x = random_vector<float>(size_t(rows), rng, -30.f, 30.f);
  device_buffer<float> logits(x);
  device_buffer<int64_t> labels(std::vector<int64_t>(size_t(rows), 0));
  device_buffer<float> loss(rows), lse(rows);
  tk::cross_entropy_forward_args a;
  a.logits = logits.get();
  a.labels = labels.get();
  a.loss = loss.get();
  a.lse = lse.get();
  a.rows = rows;
  a.vocab = 1;
  a.logits_row_stride = 1;
  a.type = dtype::fp32;
  tk::cross_entropy_forward(a, nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> l = loss.download(), m = lse.download();
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(l[size_t(r)], 0.f) << "row " << r;
    EXPECT_EQ(m[size_t(r)], x[size_t(r)]) << "row " << r;
  }
}

// Out-of-range labels (not ignore_index) give NaN loss and NaN gradients, in the whole row. The
// outputs start at 0, not at the NaN poison, so rows the kernel skipped would show.
TEST_F(CrossEntropy, InvalidLabelGivesNan) {
  const int64_t rows = 3, vocab = 1000;
  std::mt19937_64 rng(test_seed());
  device_buffer<bf16> logits(random_vector<bf16>(size_t(rows * vocab), rng));
  device_buffer<int64_t> labels(std::vector<int64_t>{vocab, 5, -1});
  device_buffer<float> loss(std::vector<float>(size_t(rows), 0.f));
  device_buffer<bf16> dlogits(std::vector<bf16>(size_t(rows * vocab), convert<bf16>(0.f)));
  tk::cross_entropy_forward_args a;
  a.logits = logits.get();
  a.labels = labels.get();
  a.loss = loss.get();
  a.rows = rows;
  a.vocab = vocab;
  a.logits_row_stride = vocab;
  a.dlogits = dlogits.get();
  a.dlogits_row_stride = vocab;
  tk::cross_entropy_forward(a, nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<float> l = loss.download();
  EXPECT_TRUE(std::isnan(l[0]));
  EXPECT_TRUE(std::isfinite(l[1]) && l[1] > 0);
  EXPECT_TRUE(std::isnan(l[2]));
  const std::vector<bf16> d = dlogits.download();
  int64_t nan_in_invalid_rows = 0, finite_in_valid_row = 0;
  for (int64_t c = 0; c < vocab; ++c) {
    const auto at = [&](int64_t r) { return convert<float>(d[size_t(r * vocab + c)]); };
    nan_in_invalid_rows += std::isnan(at(0)) + std::isnan(at(2));
    finite_in_valid_row += std::isfinite(at(1));
  }
  EXPECT_EQ(nan_in_invalid_rows, 2 * vocab);
  EXPECT_EQ(finite_in_valid_row, vocab);
}

// ---------------------------------------------------------------------------------------------
// cross_entropy_reduce: sum / mean of the per-row losses, and the rows' gradient scale
// ---------------------------------------------------------------------------------------------

// Relative spacing of Out near 1: a correctly rounded result is within half of it of the exact
// value, and the kernel rounds an fp64 sum once (its order differs from the reference's only in
// fp64 bits far below Out's).
template <class Out>
double out_spacing() {
  return std::is_same_v<Out, float> ? 0x1p-23 : std::is_same_v<Out, fp16> ? 0x1p-10 : 0x1p-7;
}

struct reduce_result {
  double out = 0;          // NaN when not written as a number
  float row_gradient = 0;
};

// Runs cross_entropy_reduce on host losses / labels (poisoned outputs) and returns both outputs.
template <class Out>
reduce_result run_reduce(const std::vector<float>& losses, const std::vector<int64_t>& targets,
                         tk::cross_entropy_reduction reduction, int64_t ignore) {
  const int64_t rows = int64_t(losses.size());
  device_buffer<float> loss(losses);
  device_buffer<int64_t> labels(targets);
  // Finite sentinels, not the NaN poison: an expected NaN (mean of no rows) must be written.
  device_buffer<Out> out(std::vector<Out>{convert<Out>(-7.f)});
  device_buffer<float> row_gradient(std::vector<float>{-7.f});
  tk::cross_entropy_reduce_args a;
  a.loss = loss.get();
  a.labels = labels.get();
  a.rows = rows;
  a.ignore_index = ignore;
  a.reduction = reduction;
  a.out = out.get();
  a.out_type = dtype_traits<Out>::tag;
  a.row_gradient = row_gradient.get();
  tk::cross_entropy_reduce(a, nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  return {to_double(out.download()[0]), row_gradient.download()[0]};
}

template <class Out>
void check_reduce(int64_t rows, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype_traits<Out>::tag) << " rows=" << rows);
  std::mt19937_64 rng(seed);
  // Losses of a language model's size (0..12), every 5th row ignored (loss 0, as the forward
  // writes it), one row of an ignore_index that is a real class id.
  std::vector<float> losses = random_vector<float>(size_t(rows), rng, 0.f, 12.f);
  std::vector<int64_t> targets(static_cast<size_t>(rows));
  std::uniform_int_distribution<int64_t> label_dist(0, 50000);
  double sum = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool ignored = r % 5 == 3;
    targets[size_t(r)] = ignored ? ignore_index : label_dist(rng);
    if (ignored) losses[size_t(r)] = 0.f;
    sum += losses[size_t(r)];
    count += ignored ? 0 : 1;
  }
  for (auto reduction : {tk::cross_entropy_reduction::sum, tk::cross_entropy_reduction::mean}) {
    const bool mean = reduction == tk::cross_entropy_reduction::mean;
    SCOPED_TRACE(mean ? "mean" : "sum");
    const reduce_result got = run_reduce<Out>(losses, targets, reduction, ignore_index);
    const double expected = mean ? sum / double(count) : sum;
    EXPECT_LE(std::abs(got.out - expected), out_spacing<Out>() * std::abs(expected)) << "expected " << expected
                                                                                       << ", got " << got.out;
    EXPECT_EQ(got.row_gradient, mean ? float(1.0 / double(count)) : 1.f);
    // The same inputs give the same bits (no atomics, an order fixed by `rows`).
    const reduce_result again = run_reduce<Out>(losses, targets, reduction, ignore_index);
    EXPECT_EQ(std::memcmp(&got.out, &again.out, sizeof got.out), 0) << "two runs differ";
    EXPECT_EQ(std::memcmp(&got.row_gradient, &again.row_gradient, sizeof got.row_gradient), 0);
  }
}

// Row counts around the CTA and cluster split (4096 rows per CTA, up to 16 CTAs, 8 rows per
// thread and step): 1 row, a partial batch, exactly one CTA, one more row, 8 and 9 CTAs (the
// portable cluster and one more), 16 CTAs with a short last slice, and rows that give each thread
// many steps.
TEST_F(CrossEntropy, ReduceSumAndMean) {
  for (int64_t rows : {int64_t(1), int64_t(7), int64_t(1000), int64_t(4096), int64_t(4097), int64_t(32768),
                       int64_t(32768 + 4096 + 1), int64_t(65537), int64_t(262144), int64_t(3) << 20})
    check_reduce<float>(rows, test_seed() + uint64_t(rows));
  check_reduce<bf16>(100003, test_seed());
  // fp16 ends at 65504: a sum of ~9000 losses of ~6 stays below it (a larger one is inf, as
  // PyTorch's fp16 sum would be).
  check_reduce<fp16>(9001, test_seed());
}

// Edge cases: no rows (sum 0, mean NaN), every row ignored (mean NaN, gradient scale inf, as
// PyTorch), a count-only call (no loss, no out) and a sum without labels.
TEST_F(CrossEntropy, ReduceEdgeCases) {
  {
    const reduce_result s = run_reduce<float>({}, {}, tk::cross_entropy_reduction::sum, ignore_index);
    EXPECT_EQ(s.out, 0.0);
    EXPECT_EQ(s.row_gradient, 1.f);
    const reduce_result m = run_reduce<float>({}, {}, tk::cross_entropy_reduction::mean, ignore_index);
    EXPECT_TRUE(std::isnan(m.out));
  }
  {
    const std::vector<float> zeros(5000, 0.f);
    const std::vector<int64_t> ignored(5000, 7);
    const reduce_result m = run_reduce<bf16>(zeros, ignored, tk::cross_entropy_reduction::mean, 7);
    EXPECT_TRUE(std::isnan(m.out));
    EXPECT_TRUE(std::isinf(m.row_gradient) && m.row_gradient > 0);
  }
  const int64_t rows = 20000;
  std::vector<int64_t> targets(size_t(rows), 1);
  for (int64_t r = 0; r < rows; r += 3) targets[size_t(r)] = ignore_index;  // 6667 ignored
  device_buffer<int64_t> labels(targets);
  device_buffer<float> row_gradient(1);
  tk::cross_entropy_reduce_args count_only;
  count_only.labels = labels.get();
  count_only.rows = rows;
  count_only.row_gradient = row_gradient.get();
  tk::cross_entropy_reduce(count_only, nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(row_gradient.download()[0], float(1.0 / double(rows - 6667)));

  std::mt19937_64 rng(test_seed());
  const std::vector<float> losses = random_vector<float>(size_t(rows), rng, 0.f, 4.f);
  device_buffer<float> loss(losses);
  device_buffer<float> out(1);
  tk::cross_entropy_reduce_args sum_only;
  sum_only.loss = loss.get();
  sum_only.rows = rows;
  sum_only.reduction = tk::cross_entropy_reduction::sum;
  sum_only.out = out.get();
  tk::cross_entropy_reduce(sum_only, nullptr);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  double sum = 0;
  for (float l : losses) sum += l;
  EXPECT_LE(std::abs(out.download()[0] - sum), 0x1p-23 * sum);
}

// grad_per_row_stride: 0 gives every row grad_per_row[0] (a one-element buffer: a kernel that
// ignored the stride would read past it, poison or out of bounds), 3 every third element. The
// fused forward and the backward must produce the bits of the same gradients given as a dense
// vector, and those against the fp64 reference (make_problem's rows, label smoothing 0.1).
TEST_F(CrossEntropy, UpstreamGradientStrides) {
  const int64_t rows = 600, vocab = 4097;
  const options o{.label_smoothing = 0.1f};
  const float grad_scale = 0.5f, scalar = 1.f / 517.f;
  const problem<bf16> base = make_problem<bf16>(rows, vocab, 0, o, grad_scale, true, test_seed());
  device_buffer<bf16> logits(base.logits);
  device_buffer<int64_t> labels(base.labels);

  for (const int64_t stride : {int64_t(0), int64_t(3)}) {
    SCOPED_TRACE(::testing::Message() << "stride " << stride);
    // The reference for this upstream gradient: dlogits scale with it row by row.
    problem<bf16> p = base;
    if (stride == 0) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < vocab; ++c) {
          p.dlogits[size_t(r * vocab + c)] *= scalar / p.grad_per_row[size_t(r)];
          p.dlogit_terms[size_t(r * vocab + c)] *= scalar / p.grad_per_row[size_t(r)];
        }
        p.grad_per_row[size_t(r)] = scalar;
      }
    }
    const std::vector<float>& dense = p.grad_per_row;
    std::vector<float> strided(stride == 0 ? 1 : size_t(rows * stride));
    if (stride == 0) strided[0] = scalar;
    else {
      for (auto& v : strided) v = std::numeric_limits<float>::quiet_NaN();  // only r * stride is read
      for (int64_t r = 0; r < rows; ++r) strided[size_t(r * stride)] = dense[size_t(r)];
    }
    device_buffer<float> dense_gradient(dense), strided_gradient(strided);
    device_buffer<float> loss(rows), lse(rows);
    device_buffer<bf16> fused_dense(size_t(rows * vocab)), fused_strided(size_t(rows * vocab));
    device_buffer<bf16> backward_dense(size_t(rows * vocab)), backward_strided(size_t(rows * vocab));

    tk::cross_entropy_forward_args forward;
    forward.logits = logits.get();
    forward.labels = labels.get();
    forward.loss = loss.get();
    forward.lse = lse.get();
    forward.rows = rows;
    forward.vocab = vocab;
    forward.logits_row_stride = vocab;
    forward.dlogits_row_stride = vocab;
    forward.label_smoothing = o.label_smoothing;
    forward.grad_scale = grad_scale;
    for (const bool use_stride : {false, true}) {
      forward.dlogits = use_stride ? fused_strided.get() : fused_dense.get();
      forward.grad_per_row = use_stride ? strided_gradient.get() : dense_gradient.get();
      forward.grad_per_row_stride = use_stride ? stride : 1;
      tk::cross_entropy_forward(forward, nullptr);
      tk::cross_entropy_backward(backward_args_of(forward, use_stride ? backward_strided.get() : backward_dense.get()),
                                 nullptr);
    }
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<bf16> a = fused_dense.download(), b = fused_strided.download();
    const std::vector<bf16> c = backward_dense.download(), d = backward_strided.download();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)), 0) << "fused forward";
    EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * sizeof(bf16)), 0) << "backward";
    {
      SCOPED_TRACE("fused forward, dense gradient");
      expect_gradient_close(p, a);
    }
    {
      SCOPED_TRACE("backward, dense gradient");
      expect_gradient_close(p, c);
    }
  }
}

}  // namespace
