// A CPU model of the GPU tests' backward and softmax checks (tests/gpu/test_norms.cu run_backward,
// tests/gpu/test_softmax.cu check_forward / check_backward): does a correct kernel pass them with
// margin, and do plausible bugs fail them? No GPU: the "kernel" is the same math in fp32 with its
// output rounded to bf16, and each bug is that math with one mistake:
//   no-b / no-a      a term of dx left out (LayerNorm mean(g); mean(g * xhat); the softmax's
//                    sum(dy * y))
//   stats-r-4        the mean and rstd of the row 4 back (a posted slot reused too early)
//   sums-r-4         the row sums of the row 4 back
//   rstd-r-1         the rstd of the previous row
//   cta-missing      the row sums without the last 1/16 of the row (one CTA of 16 left out)
//   no-p-label       cross-entropy dlogits: the label column without its probability term
//                    (-scale (1 - eps + eps / V) instead of scale (p_t (1 + 2 z lse) - 1 + eps - eps / V))
// For each, the tests' two metrics against their bounds, "ratio" <= 1 passes: "norm", the
// norm-wise error against bf16's tolerance 1e-2, and "elem", the element check (compare_scaled in
// tests/common/gpu_test.cuh): each element's error beyond its rounding to bf16 against 1e-5 of the
// element's scale as the test file defines it.
// "old" inputs are those of the tests before 2026-12-05 (rows of one distribution, dy
// independent noise; cross-entropy: random labels), "new" those of now (per-row centre and
// scale, dy related to x; cross-entropy: tests/gpu/test_cross_entropy.cu's likely labels).
//
//   c++ -O2 -std=c++17 -o /tmp/test_strength tools/test_strength.cpp && /tmp/test_strength
//
// It exits 1 if, with the "new" inputs, the correct kernel fails or a bug passes
// (tools/ci_checks.sh runs it, ~3 s). Printed on 2026-12-06 (eighteenth session, with the
// element check): "new" correct norm 0.06-0.18, elem 0.000-0.017; every bug norm 4.8-35000, elem
// 6100 and more; "old" correct norm 0.14-0.17, and of 34 bugs 29 passed the norm-wise check and
// one the element check (the cross-entropy label at 262144 columns with random labels, where
// p_label ~ 4e-6 is below 1e-5 of its terms: hence the likely labels).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

float bf16(float f) {  // round to nearest even, as the kernels' conversions do
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// How far from o (a bf16 value) an exact r may lie and still round to o: half the spacing of
// bf16 on r's side of o (gpu_test.cuh, rounding_allowance<bf16>; 8 significant bits).
double bf16_allowance(double o, double r) {
  const bool toward_zero = o != 0 && (std::abs(r) < std::abs(o) || (r < 0) != (o < 0));
  const double v = toward_zero ? std::nextafter(std::abs(o), 0.0) : std::abs(o);
  int f = 0;
  if (v != 0) std::frexp(v, &f);
  return std::ldexp(1.0, std::max(f - 1, -126) - 8);
}

// The element check's largest error beyond the rounding, in units of 1e-5 of the scale.
struct element_check {
  double worst = 0;
  void add(double out, double ref, double scale) {
    const double e = std::max(std::abs(out - ref) - bf16_allowance(out, ref), 0.0);
    worst = std::max(worst, scale > 0 ? e / (1e-5 * scale) : e > 0 ? INFINITY : 0.0);
  }
};

int weak_checks = 0;  // "new" inputs: a correct kernel failing, or a bug passing, either check

void report(const char* what, bool fresh, int rows, int cols, const char* bug, double ratio, double element) {
  const bool correct = std::strcmp(bug, "none") == 0;
  if (fresh && correct != (ratio <= 1.0)) ++weak_checks;
  if (fresh && correct != (element <= 1.0)) ++weak_checks;
  std::printf("%-14s %-3s %5d x %-6d %-12s %10.3f %-6s %12.3f %s\n", what, fresh ? "new" : "old", rows, cols, bug,
              ratio, ratio <= 1.0 ? "passes" : "FAILS", element, element <= 1.0 ? "passes" : "FAILS");
}

// run_backward's dx check: ||dx - ref|| <= 1e-2 max(||ref||, ||rstd g||).
void norm_backward(bool layer, bool fresh, int rows, int cols) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> U(-1.f, 3.f), noise(fresh ? -0.25f : -1.f, fresh ? 0.25f : 1.f), W(0.5f, 1.5f);
  std::vector<float> x(size_t(rows) * cols), dy(x.size()), w(cols);
  for (int r = 0; r < rows; ++r) {
    const float centre = fresh ? 0.5f * float(r % 7 - 3) : 0.f, scale = fresh ? 0.5f + 0.25f * float(r % 5) : 1.f;
    const float alpha = 0.5f * float(r % 3 - 1), beta = 0.25f + 0.125f * float(r % 5);
    for (int c = 0; c < cols; ++c) {
      const float u = U(rng), n = bf16(noise(rng));
      x[size_t(r) * cols + c] = bf16(centre + scale * u);
      dy[size_t(r) * cols + c] = fresh ? bf16(alpha + beta * (u - 1.f) + n) : n;
    }
  }
  for (auto& v : w) v = bf16(W(rng));
  const double eps = 1e-5;
  const int part = cols / 16 * 15;
  std::vector<double> mean(rows), rstd(rows), mg(rows), mgx(rows), mg_part(rows), mgx_part(rows);
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * cols];
    double m = 0, q = 0;
    for (int c = 0; c < cols; ++c) m += xr[c];
    m = layer ? m / cols : 0.0;
    for (int c = 0; c < cols; ++c) q += (xr[c] - m) * (xr[c] - m);
    mean[r] = m, rstd[r] = 1 / std::sqrt(q / cols + eps);
    double sg = 0, sgx = 0, sg_part = 0, sgx_part = 0;
    for (int c = 0; c < cols; ++c) {
      const double xh = (xr[c] - m) * rstd[r], g = double(dy[size_t(r) * cols + c]) * w[c];
      sg += g, sgx += g * xh;
      if (c < part) sg_part += g, sgx_part += g * xh;
    }
    mg[r] = layer ? sg / cols : 0.0, mgx[r] = sgx / cols;
    mg_part[r] = layer ? sg_part / cols : 0.0, mgx_part[r] = sgx_part / cols;
  }
  const char* bugs[] = {"none", "no-b", "no-a", "stats-r-4", "sums-r-4", "rstd-r-1", "cta-missing"};
  for (int bug = 0; bug < 7; ++bug) {
    if (!layer && bug == 1) continue;  // RMSNorm has no b term
    double err2 = 0, ref2 = 0, term2 = 0;
    std::vector<double> outs, refs;
    for (int r = 0; r < rows; ++r) {
      const int back4 = r >= 4 ? r - 4 : r, back1 = r >= 1 ? r - 1 : r;
      const int rs = bug == 3 ? back4 : r, rsum = bug == 4 ? back4 : r;
      const float fm = float(mean[rs]), fr = float(bug == 5 ? rstd[back1] : rstd[rs]);
      float b = bug == 1 ? 0.f : float(mg[rsum]), a = bug == 2 ? 0.f : float(mgx[rsum]);
      if (bug == 6) b = float(mg_part[r]), a = float(mgx_part[r]);
      for (int c = 0; c < cols; ++c) {
        const double xv = x[size_t(r) * cols + c], g = double(dy[size_t(r) * cols + c]) * w[c];
        const double ref = rstd[r] * (g - mg[r] - (xv - mean[r]) * rstd[r] * mgx[r]);
        const double out = bf16(fr * (float(g) - b - (float(xv) - fm) * fr * a));
        err2 += (out - ref) * (out - ref), ref2 += ref * ref, term2 += rstd[r] * g * rstd[r] * g;
        outs.push_back(out), refs.push_back(ref);
      }
    }
    // run_backward's element check: against max(|ref|, rms(ref), rms(rstd g)).
    const double floor = std::sqrt(std::max(ref2, term2) / double(refs.size()));
    element_check each;
    for (size_t i = 0; i < refs.size(); ++i) each.add(outs[i], refs[i], std::max(std::abs(refs[i]), floor));
    report(layer ? "layer bwd dx" : "rms bwd dx", fresh, rows, cols, bugs[bug],
           std::sqrt(err2) / (1e-2 * std::sqrt(std::max(ref2, term2))), each.worst);
  }
}

// check_forward / check_backward: relative L2 of y or dx <= 1e-2.
void softmax(bool forward, bool fresh, int rows, int cols) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> L(forward ? -4.f : -3.f, forward ? 4.f : 3.f), noise(-1.f, 1.f);
  std::vector<float> x(size_t(rows) * cols), dy(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float v = bf16(L(rng));
      if (forward && fresh) v = bf16((0.5f + 0.5f * float(r % 5)) * v);  // the range's middle is 0
      x[size_t(r) * cols + c] = v;
      const float n = bf16(noise(rng));
      dy[size_t(r) * cols + c] = !forward && fresh ? bf16(float(r % 3 - 1) + v + n) : n;
    }
  const int part = cols / 16 * 15;
  std::vector<double> mx(rows), sum(rows), sum_part(rows), dot(rows), dot_part(rows);
  std::vector<float> y(x.size());  // the backward's input: a softmax rounded to bf16
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * cols];
    double m = -INFINITY, s = 0, sp = 0, d = 0, dp = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, double(xr[c]));
    for (int c = 0; c < cols; ++c) {
      const double e = std::exp(xr[c] - m);
      s += e;
      if (c < part) sp += e;
    }
    for (int c = 0; c < cols; ++c) {
      y[size_t(r) * cols + c] = bf16(float(std::exp(xr[c] - m) / s));
      const double t = double(y[size_t(r) * cols + c]) * dy[size_t(r) * cols + c];
      d += t;
      if (c < part) dp += t;
    }
    mx[r] = m, sum[r] = s, sum_part[r] = sp, dot[r] = d, dot_part[r] = dp;
  }
  const char* bugs[] = {"none", forward ? "sums-r-4" : "no-a", forward ? "max-sum-r-4" : "sums-r-4", "cta-missing"};
  for (int bug = 0; bug < 4; ++bug) {
    if (forward && bug == 1) continue;  // the same as bug 2 for the forward
    double err2 = 0, ref2 = 0;
    element_check each;
    for (int r = 0; r < rows; ++r) {
      const int back4 = r >= 4 ? r - 4 : r;
      double dot_terms = 0;  // sum |y dy|
      for (int c = 0; c < cols && !forward; ++c) dot_terms += std::abs(double(y[size_t(r) * cols + c]) * dy[size_t(r) * cols + c]);
      for (int c = 0; c < cols; ++c) {
        const size_t i = size_t(r) * cols + c;
        double ref, out, scale;
        if (forward) {
          const double m = bug == 2 ? mx[back4] : mx[r], s = bug == 2 ? sum[back4] : bug == 3 ? sum_part[r] : sum[r];
          ref = std::exp(x[i] - mx[r]) / sum[r];
          out = bf16(float(std::exp(double(x[i]) - m) / s));
          scale = ref * (1 + (std::abs(mx[r]) + std::abs(x[i] - mx[r])) / 64);  // softmax_scales
        } else {
          const double d = bug == 1 ? 0.0 : bug == 2 ? dot[back4] : bug == 3 ? dot_part[r] : dot[r];
          ref = double(y[i]) * (dy[i] - dot[r]);
          out = bf16(y[i] * (dy[i] - float(d)));
          scale = std::abs(double(y[i])) * (std::abs(double(dy[i])) + dot_terms);  // check_backward's
        }
        err2 += (out - ref) * (out - ref), ref2 += ref * ref;
        each.add(out, ref, scale);
      }
    }
    report(forward ? "softmax fwd y" : "softmax bwd dx", fresh, rows, cols, bugs[bug], std::sqrt(err2 / ref2) / 1e-2,
           each.worst);
  }
}

// test_cross_entropy.cu expect_gradient_close, the label columns: relative L2 <= 1e-2 (bf16).
// Logits U(-4, 4) + 2 ((r mod 7) - 3), label smoothing 0.1, z-loss 1e-3, per-row scale
// U(0.5, 2); "new": the label's logit 2 ((r mod 7) - 3) + 2 + ln(vocab) (options::likely_labels).
void cross_entropy_labels(bool fresh, int rows, int cols) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> L(-4.f, 4.f), S(0.5f, 2.f);
  std::uniform_int_distribution<int> label_of(0, cols - 1);
  const double eps = 0.1, z = 1e-3;
  std::vector<float> x(static_cast<size_t>(cols));
  for (int bug = 0; bug < 2; ++bug) {
    double err2 = 0, ref2 = 0;
    element_check each;
    for (int r = 0; r < rows; ++r) {
      const float offset = 2.f * float(r % 7 - 3);
      for (float& v : x) v = bf16(L(rng) + offset);
      const int t = label_of(rng);
      if (fresh) x[size_t(t)] = bf16(offset + 2.f + std::log(float(cols)));
      const double scale = S(rng);
      double m = -INFINITY, sum = 0;
      for (float v : x) m = std::max(m, double(v));
      for (float v : x) sum += std::exp(v - m);
      const double lse = m + std::log(sum), p = std::exp(x[size_t(t)] - lse);
      const double ref = scale * (p * (1 + 2 * z * lse) - (1 - eps) - eps / cols);
      const double out = bf16(float(bug == 1 ? scale * (-(1 - eps) - eps / cols) : ref));
      err2 += (out - ref) * (out - ref), ref2 += ref * ref;
      each.add(out, ref, scale * (p * (1 + 2 * z * lse) + (1 - eps) + eps / cols));  // reference_gradient's terms
    }
    report("ce dlogit@t", fresh, rows, cols, bug == 1 ? "no-p-label" : "none", std::sqrt(err2 / ref2) / 1e-2,
           each.worst);
  }
}

}  // namespace

int main() {
  std::printf("%-14s %-3s %-14s %-12s %10s %-6s %12s\n", "check", "in", "rows x cols", "bug", "norm", "", "elem");
  for (bool fresh : {false, true}) {
    for (bool layer : {true, false}) {
      norm_backward(layer, fresh, 40, 30000);
      norm_backward(layer, fresh, 12, 262144);
    }
    for (bool forward : {true, false}) {
      softmax(forward, fresh, 60, 30001);
      softmax(forward, fresh, 12, 262144);
    }
    cross_entropy_labels(fresh, 41, 1000);
    cross_entropy_labels(fresh, 4, 262144);
  }
  if (weak_checks) std::printf("test_strength: %d checks with the new inputs do not separate correct from buggy\n", weak_checks);
  return weak_checks ? 1 : 0;
}
