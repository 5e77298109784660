// RMSNorm / LayerNorm forward and backward against fp64 CPU references.
//
// Shapes cover every size class of the configuration table (warp per row, CTA per row,
// clusters of 2..16 CTAs), widths that are not a multiple of any vector or tile (1, 7, 100,
// 1000, 4097, 65543), strided rows (including strides whose rows are not 16-byte aligned:
// the shifted stream, row_kernel.cuh "Unaligned matrices", in every size class of 16-bit
// rows), and row counts that make backward workers loop over several rows. Outputs are
// poisoned (NaN bits); the padding columns of strided outputs must stay poisoned (nothing
// written outside [0, cols)).
//
// Tolerances. Norm-wise (TILEKIT_EXPECT_CLOSE): outputs rounded to T carry a relative error of at
// most 2^-8 (bf16) / 2^-11 (fp16) per element, so the norm-wise relative error is bounded by
// tolerance<T>(); fp32 outputs: 1e-4. Element by element (compare_scaled, gpu_test.cuh) each
// output is checked against the fp32 computation's own error, beyond its rounding to T, so that
// an error below bf16's rounding (a row's scale off by 0.1%, one partial of a sum missing) fails
// in every dtype: arithmetic_tolerance of max(|ref|, rms(ref)) (dx: also rms(rstd * g), see
// run_backward). The kernels' sums are per-thread chains of at most 64 terms followed by trees
// (a row of 262144 columns: ~45 fp32 roundings deep, 2.7e-6 in the worst case); rsqrt.approx
// is within 2^-22.9; a few roundings per element: 1e-5 holds with margin. dw / db sum over rows
// of mixed sign, so their worst case grows with sum |dy xhat| (~200 |dw| at 40000 rows): 1e-5 of
// max(|dw|, rms) holds by the roundings' cancelling, as measured, not from a bound. Measured (H100,
// 2026-12-06, tools/device_margins.sh): rstd at most 3.3e-6 (bf16 offset rows), dx 7.8e-7, dw /
// db 6.9e-7, y 3.9e-7 (fp32 offset rows: 0.42 of their allowance, run_forward).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/gpu_test.cuh"
#include "norms/norms.h"

namespace {
using namespace tilekit;
using namespace tilekit::testing;
namespace tk = tilekit::kernels;

enum class kind { rms, layer };

struct shape {
  int64_t rows, cols, pad;
  int64_t stride() const { return cols + pad; }
};

template <class T>
double output_tolerance() {
  return std::is_same_v<T, float> ? 1e-4 : tolerance<T>();
}

// Padding columns of a strided [rows, stride] buffer must still hold the poison bits.
template <class T>
bool padding_untouched(const std::vector<T>& host, const shape& s) {
  return padding_written(host, s.rows, s.cols, s.stride()) == 0;
}

template <class T>
std::vector<T> valid_part(const std::vector<T>& host, const shape& s) {
  std::vector<T> out;
  out.reserve(s.rows * s.cols);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c) out.push_back(host[r * s.stride() + c]);
  return out;
}

// Row pads of each operand (-1: the shape's pad), so that each operand has its own stride.
// Forward: x, other_in = residual, out = y, extra = residual_out; backward: x, other_in = dy,
// out = dx, extra = dresidual_out (an input: the gradient that reached residual_out).
struct operand_pads {
  int64_t x = -1, other_in = -1, out = -1, extra = -1;
};
int64_t pad_or(int64_t pad, const shape& s) { return pad < 0 ? s.pad : pad; }

// `host`, rows of stride cols + s.pad, in rows of stride cols + `pad`; new padding holds `fill`.
template <class T>
std::vector<T> repad(const std::vector<T>& host, const shape& s, int64_t pad, T fill) {
  if (pad == s.pad) return host;
  const int64_t from = s.stride(), to = s.cols + pad;
  std::vector<T> out(size_t(s.rows * to), fill);
  for (int64_t r = 0; r < s.rows; ++r)
    std::copy_n(host.begin() + r * from, s.cols, out.begin() + r * to);
  return out;
}

// mean and rstd of row r of h (fp64).
template <class T>
void reference_stats(kind k, const std::vector<T>& h, const shape& s, int64_t r, double eps, double& mean,
                     double& rstd) {
  const int64_t stride = s.stride();
  double sum = 0;
  for (int64_t c = 0; c < s.cols; ++c) sum += to_double(h[r * stride + c]);
  mean = k == kind::layer ? sum / s.cols : 0.0;
  double sq = 0;
  for (int64_t c = 0; c < s.cols; ++c) {
    const double d = to_double(h[r * stride + c]) - mean;
    sq += d * d;
  }
  rstd = 1.0 / std::sqrt(sq / s.cols + eps);
}

// Rows far from 0 and uneven along the row, for the LayerNorm statistics: row r is
// offset_r + 4 (c / cols - 1/2) + U(-1, 1), offset_r = 1000, -300, 500 in turn (period 3, so
// that rows 4 apart, a posted slot's reuse, differ; rounded to T: 16-bit inputs become
// multiples of 4 / 2 / 2 near 1000 / 300 / 500, still far from 0 for their spread).
// A single-pass E[x^2] - E[x]^2 would lose ~20 of fp32's 24 bits here; the ramp makes the
// slices of a row that a cluster splits have different means (their spread is 4/5 of the
// variance), so a fold of per-slice statistics that dropped or misweighted the between-slice
// term would be far off.
template <class T>
std::vector<T> offset_rows(const shape& s, std::mt19937_64& rng) {
  const int64_t stride = s.stride();
  std::vector<T> x(size_t(s.rows * stride));
  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      x[r * stride + c] =
          convert<T>((r % 3 == 0 ? 1000.0f : r % 3 == 1 ? -300.0f : 500.0f) +
                     4.0f * (float(c) / float(s.cols) - 0.5f) + noise(rng));
  return x;
}

// Rows of their own centre and scale, x = centre_r + scale_r * u with u ~ U(lo, hi) (returned in
// `u` when given): centre_r = 0.5 ((r mod 7) - 3), scale_r = 0.5 + 0.25 (r mod 5). Periods 7
// and 5 share no factor with the row kernel's cycles (4 posted rounds, 2 or 4 rows per item), so
// a row that took another row's statistics or posted partials (a stale or mixed-up slot) is off
// by O(1), not by the O(1 / sqrt(cols)) by which rows of one distribution differ.
template <class T>
std::vector<T> varied_rows(const shape& s, std::mt19937_64& rng, float lo, float hi, std::vector<float>* u = nullptr) {
  const int64_t stride = s.stride();
  std::vector<T> x(size_t(s.rows * stride));
  if (u) u->resize(x.size());
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float centre = 0.5f * float(r % 7 - 3), scale = 0.5f + 0.25f * float(r % 5);
    for (int64_t c = 0; c < stride; ++c) {
      const float v = dist(rng);
      // The padding between rows: 1000, far from every row, so a kernel that took it into a
      // row's statistics or sums would be far off.
      x[size_t(r * stride + c)] = convert<T>(c < s.cols ? centre + scale * v : 1000.0f);
      if (u) (*u)[size_t(r * stride + c)] = v;
    }
  }
  return x;
}

template <class T, class W>
void run_forward(kind k, shape s, bool with_residual, bool with_bias, bool far_rows = false,
                 const operand_pads& pads = {}) {
  SCOPED_TRACE(::testing::Message() << (k == kind::rms ? "rms" : "layer") << " " << dtype_traits<T>::name << "/"
                                  << dtype_traits<W>::name << " rows " << s.rows << " cols " << s.cols << " pad "
                                  << s.pad << (with_residual ? " residual" : "") << (with_bias ? " bias" : "")
                                  << (far_rows ? " offset rows" : "") << " pads " << pads.x << "/" << pads.other_in
                                  << "/" << pads.out << "/" << pads.extra);
  std::mt19937_64 rng(test_seed() + s.rows * 131 + s.cols);
  const int64_t stride = s.stride();
  const size_t count = size_t(s.rows * stride);
  // Rows whose means are not ~0 (the two-pass variance must matter) and differ from row to row.
  const std::vector<T> x_host = far_rows ? offset_rows<T>(s, rng) : varied_rows<T>(s, rng, -1.f, 3.f);
  const auto res_host = random_vector<T>(count, rng);
  const auto w_host = random_vector<W>(s.cols, rng, 0.5f, 1.5f);
  const auto b_host = random_vector<W>(s.cols, rng);
  const double eps = 1e-5;

  // Each operand in rows of its own stride (pads); inputs' new padding 1000, outputs' poison.
  const shape x_s{s.rows, s.cols, pad_or(pads.x, s)}, res_s{s.rows, s.cols, pad_or(pads.other_in, s)};
  const shape y_s{s.rows, s.cols, pad_or(pads.out, s)}, h_s{s.rows, s.cols, pad_or(pads.extra, s)};
  device_buffer<T> x(repad(x_host, s, x_s.pad, convert<T>(1000.f))), res(repad(res_host, s, res_s.pad, convert<T>(1000.f)));
  device_buffer<T> y(size_t(s.rows * y_s.stride())), h(size_t(s.rows * h_s.stride()));
  device_buffer<W> w(w_host), b(b_host);
  device_buffer<float> mean(s.rows), rstd(s.rows);

  if (k == kind::rms) {
    tk::rms_norm_forward_args a;
    a.y = y.get(), a.y_row_stride = y_s.stride(), a.x = x.get(), a.x_row_stride = x_s.stride();
    a.weight = w.get();
    if (with_residual) {
      a.residual = res.get(), a.residual_row_stride = res_s.stride();
      a.residual_out = h.get(), a.residual_out_row_stride = h_s.stride();
    }
    a.rstd = rstd.get(), a.rows = s.rows, a.cols = s.cols, a.x_dtype = dtype_traits<T>::tag;
    a.weight_dtype = dtype_traits<W>::tag, a.eps = float(eps);
    tk::rms_norm_forward(a, nullptr);
  } else {
    tk::layer_norm_forward_args a;
    a.y = y.get(), a.y_row_stride = y_s.stride(), a.x = x.get(), a.x_row_stride = x_s.stride();
    a.weight = w.get(), a.bias = with_bias ? b.get() : nullptr;
    if (with_residual) {
      a.residual = res.get(), a.residual_row_stride = res_s.stride();
      a.residual_out = h.get(), a.residual_out_row_stride = h_s.stride();
    }
    a.mean = mean.get(), a.rstd = rstd.get(), a.rows = s.rows, a.cols = s.cols, a.x_dtype = dtype_traits<T>::tag;
    a.weight_dtype = dtype_traits<W>::tag, a.eps = float(eps);
    tk::layer_norm_forward(a, nullptr);
  }
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());

  // h = x + residual rounded to T, exactly as the kernel does (fp32 add, one rounding).
  std::vector<T> h_ref = x_host;
  if (with_residual)
    for (size_t i = 0; i < count; ++i) h_ref[i] = convert<T>(convert<float>(x_host[i]) + convert<float>(res_host[i]));
  std::vector<double> y_ref(s.rows * s.cols), mean_ref(s.rows), rstd_ref(s.rows);
  for (int64_t r = 0; r < s.rows; ++r) {
    reference_stats(k, h_ref, s, r, eps, mean_ref[r], rstd_ref[r]);
    for (int64_t c = 0; c < s.cols; ++c) {
      double v = (to_double(h_ref[r * stride + c]) - mean_ref[r]) * rstd_ref[r] * to_double(w_host[c]);
      if (k == kind::layer && with_bias) v += to_double(b_host[c]);
      y_ref[r * s.cols + c] = v;
    }
  }
  // Element by element: y of offset rows (|mean| ~ 1000, far_rows) moves with the kernel's fp32
  // mean, whose last few ulps (ulp(1000) = 2^-14) shift a whole row's (h - mean) * rstd * w by
  // ~2.4e-4 rstd |w| at 4 ulps, more than 1e-5 of the row's rms; the norm-wise check is
  // unchanged.
  double y_tolerance = arithmetic_tolerance;
  if (k == kind::layer) {
    double max_mean = 0, max_rstd = 0, max_w = 0, y_sq = 0;
    for (int64_t r = 0; r < s.rows; ++r)
      max_mean = std::max(max_mean, std::abs(mean_ref[r])), max_rstd = std::max(max_rstd, rstd_ref[r]);
    for (const W& v : w_host) max_w = std::max(max_w, std::abs(to_double(v)));
    for (double v : y_ref) y_sq += v * v;
    const float m = float(max_mean);
    const double mean_ulp = double(std::nextafter(m, INFINITY)) - double(m);
    const double y_rms = std::sqrt(y_sq / double(y_ref.size()));
    if (y_rms > 0) y_tolerance = std::max(y_tolerance, 4 * mean_ulp * max_rstd * max_w / y_rms);
  }
  const auto y_out = y.download();
  TILEKIT_EXPECT_CLOSE(valid_part(y_out, y_s), y_ref, output_tolerance<T>());
  TILEKIT_EXPECT_CLOSE_EACH(valid_part(y_out, y_s), y_ref, y_tolerance);
  EXPECT_TRUE(padding_untouched(y_out, y_s)) << "y written outside [0, cols)";
  TILEKIT_EXPECT_CLOSE_EACH(rstd.download(), rstd_ref, arithmetic_tolerance);
  if (k == kind::layer) {
    // Compare mean - ref relative to the row scale (means can be close to 0).
    const auto mean_out = mean.download();
    // Offset rows: within 16 fp32 ulps of the row's offset.
    const double mean_tolerance = far_rows ? 1e-6 : 1e-5;
    for (int64_t r = 0; r < s.rows; ++r)
      EXPECT_NEAR(mean_out[r], mean_ref[r], mean_tolerance * (1 + std::abs(mean_ref[r])));
  }
  if (with_residual) {
    const auto h_out = h.download();
    std::vector<double> h_expect;
    for (auto v : valid_part(h_ref, s)) h_expect.push_back(to_double(v));
    TILEKIT_EXPECT_CLOSE(valid_part(h_out, h_s), h_expect, 0.0);  // bitwise the same rounding
    EXPECT_TRUE(padding_untouched(h_out, h_s)) << "residual_out written outside [0, cols)";
  }
}

// fp64 dw = sum over rows of dy (x - mean) rstd and db = sum of dy, for [rows, cols] x and dy of
// stride s.stride(); the rows' mean / rstd as given (the kernel's saved fp32 statistics, or the
// caller's fp64 ones) or, where null, from x (reference_stats: mean 0 for RMSNorm), as the
// kernels define them.
template <class T>
void weight_gradients(kind k, const std::vector<T>& x, const std::vector<T>& dy, const shape& s,
                      const std::vector<double>* saved_mean, const std::vector<double>* saved_rstd, double eps,
                      std::vector<double>& dw, std::vector<double>& db) {
  dw.assign(size_t(s.cols), 0.0), db.assign(size_t(s.cols), 0.0);
  for (int64_t r = 0; r < s.rows; ++r) {
    double mean = 0, rstd = 0;
    if (saved_rstd) {
      mean = saved_mean ? (*saved_mean)[size_t(r)] : 0.0, rstd = (*saved_rstd)[size_t(r)];
    } else {
      reference_stats(k, x, s, r, eps, mean, rstd);
    }
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.stride() + c);
      dw[size_t(c)] += to_double(dy[i]) * (to_double(x[i]) - mean) * rstd;
      db[size_t(c)] += to_double(dy[i]);
    }
  }
}

// Backward against the analytic fp64 gradients. `saved_stats`: pass the forward's mean/rstd
// (computed here in fp64, rounded to fp32) or let the kernel recompute them. x: varied_rows; dy
// = alpha_r + beta_r (u - 1) + U(-0.25, 0.25), related to x through u, alpha_r = 0.5 ((r mod 3)
// - 1), beta_r = 0.25 + 0.125 (r mod 5): mean(g) and mean(g * xhat) are O(1), not O(1 /
// sqrt(cols)), and differ from row to row. With dy independent noise, a dx without its b or a
// term, with another row's statistics or sums, or with one CTA's partial of 16 missing passed
// the norm-wise check (bf16, 30000 and 262144 columns of 40 and 12 rows in tools/test_strength.cpp,
// a CPU model of both checks); now each fails there by 5-400x its bound while an fp32
// computation with bf16 dx uses 0.06-0.12 of it, and the element check by 14000x and more (the
// fp32 computation: 0.02 of its bound).
template <class T, class W>
void run_backward(kind k, shape s, bool saved_stats, bool with_dresidual, const operand_pads& pads = {}) {
  SCOPED_TRACE(::testing::Message() << (k == kind::rms ? "rms" : "layer") << " backward " << dtype_traits<T>::name
                                  << "/" << dtype_traits<W>::name << " rows " << s.rows << " cols " << s.cols
                                  << " pad " << s.pad << (saved_stats ? " saved" : " recomputed")
                                  << (with_dresidual ? " dresidual" : "") << " pads " << pads.x << "/" << pads.other_in
                                  << "/" << pads.out << "/" << pads.extra);
  std::mt19937_64 rng(test_seed() + s.rows * 7919 + s.cols);
  const int64_t stride = s.stride();
  const size_t count = size_t(s.rows * stride);
  std::vector<float> u;
  const auto x_host = varied_rows<T>(s, rng, -1.f, 3.f, &u);
  auto dy_host = random_vector<T>(count, rng, -0.25f, 0.25f);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float alpha = 0.5f * float(r % 3 - 1), beta = 0.25f + 0.125f * float(r % 5);
    for (int64_t c = 0; c < stride; ++c) {
      const size_t i = size_t(r * stride + c);
      dy_host[i] = convert<T>(alpha + beta * (u[i] - 1.0f) + convert<float>(dy_host[i]));
    }
  }
  const auto dres_host = random_vector<T>(count, rng);
  const auto w_host = random_vector<W>(s.cols, rng, 0.5f, 1.5f);
  const double eps = 1e-5;

  std::vector<double> mean_ref(s.rows), rstd_ref(s.rows);
  for (int64_t r = 0; r < s.rows; ++r) reference_stats(k, x_host, s, r, eps, mean_ref[r], rstd_ref[r]);
  std::vector<float> mean_f(mean_ref.begin(), mean_ref.end()), rstd_f(rstd_ref.begin(), rstd_ref.end());

  // Each operand in rows of its own stride (pads); inputs' new padding 1000, outputs' poison.
  const shape x_s{s.rows, s.cols, pad_or(pads.x, s)}, dy_s{s.rows, s.cols, pad_or(pads.other_in, s)};
  const shape dx_s{s.rows, s.cols, pad_or(pads.out, s)}, dres_s{s.rows, s.cols, pad_or(pads.extra, s)};
  device_buffer<T> x(repad(x_host, s, x_s.pad, convert<T>(1000.f))), dy(repad(dy_host, s, dy_s.pad, convert<T>(1000.f)));
  device_buffer<T> dres(repad(dres_host, s, dres_s.pad, convert<T>(1000.f))), dx(size_t(s.rows * dx_s.stride()));
  device_buffer<W> w(w_host), dw(s.cols), db(s.cols);
  device_buffer<float> mean(mean_f), rstd(rstd_f);
  const size_t ws_bytes = k == kind::rms ? tk::rms_norm_backward_workspace_bytes(s.rows, s.cols)
                                         : tk::layer_norm_backward_workspace_bytes(s.rows, s.cols);
  device_buffer<unsigned char> workspace(ws_bytes);

  if (k == kind::rms) {
    tk::rms_norm_backward_args a;
    a.dx = dx.get(), a.dx_row_stride = dx_s.stride(), a.dweight = dw.get(), a.dy = dy.get();
    a.dy_row_stride = dy_s.stride(), a.x = x.get(), a.x_row_stride = x_s.stride(), a.weight = w.get();
    a.rstd = saved_stats ? rstd.get() : nullptr;
    if (with_dresidual) a.dresidual_out = dres.get(), a.dresidual_out_row_stride = dres_s.stride();
    a.workspace = workspace.get(), a.workspace_bytes = ws_bytes, a.rows = s.rows, a.cols = s.cols;
    a.x_dtype = dtype_traits<T>::tag, a.weight_dtype = dtype_traits<W>::tag, a.eps = float(eps);
    tk::rms_norm_backward(a, nullptr);
  } else {
    tk::layer_norm_backward_args a;
    a.dx = dx.get(), a.dx_row_stride = dx_s.stride(), a.dweight = dw.get(), a.dbias = db.get(), a.dy = dy.get();
    a.dy_row_stride = dy_s.stride(), a.x = x.get(), a.x_row_stride = x_s.stride(), a.weight = w.get();
    a.mean = saved_stats ? mean.get() : nullptr, a.rstd = saved_stats ? rstd.get() : nullptr;
    if (with_dresidual) a.dresidual_out = dres.get(), a.dresidual_out_row_stride = dres_s.stride();
    a.workspace = workspace.get(), a.workspace_bytes = ws_bytes, a.rows = s.rows, a.cols = s.cols;
    a.x_dtype = dtype_traits<T>::tag, a.weight_dtype = dtype_traits<W>::tag, a.eps = float(eps);
    tk::layer_norm_backward(a, nullptr);
  }
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<double> dx_ref(s.rows * s.cols), dw_ref, db_ref;
  weight_gradients(k, x_host, dy_host, s, &mean_ref, &rstd_ref, eps, dw_ref, db_ref);  // the fp64 statistics
  double term_norm_sq = 0;  // ||rstd * g||^2: the size of the terms that cancel in dx
  for (int64_t r = 0; r < s.rows; ++r) {
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < s.cols; ++c) {
      const double xhat = (to_double(x_host[r * stride + c]) - mean_ref[r]) * rstd_ref[r];
      const double g = to_double(dy_host[r * stride + c]) * to_double(w_host[c]);
      sum_g += g;
      sum_gx += g * xhat;
    }
    const double mean_g = k == kind::layer ? sum_g / s.cols : 0.0, mean_gx = sum_gx / s.cols;
    for (int64_t c = 0; c < s.cols; ++c) {
      const double xhat = (to_double(x_host[r * stride + c]) - mean_ref[r]) * rstd_ref[r];
      const double g = to_double(dy_host[r * stride + c]) * to_double(w_host[c]);
      double v = rstd_ref[r] * (g - mean_g - xhat * mean_gx);
      term_norm_sq += (rstd_ref[r] * g) * (rstd_ref[r] * g);
      if (with_dresidual) v += to_double(dres_host[r * stride + c]);
      dx_ref[r * s.cols + c] = v;
    }
  }
  const auto dx_out = dx.download();
  {
    // dx is a difference of terms of size |rstd * g| that cancel almost completely when the
    // row is short (cols = 1: dx is O(eps)), so fp32 rounding of those terms, not of dx, sets
    // the attainable error: measure ||dx - ref|| against max(||ref||, ||rstd * g||).
    const auto dx_valid = valid_part(dx_out, dx_s);
    const auto stats = tilekit::testing::compare(dx_valid, dx_ref);
    double ref_norm_sq = 0;
    for (double v : dx_ref) ref_norm_sq += v * v;
    const double error_norm = stats.relative * (ref_norm_sq > 0 ? std::sqrt(ref_norm_sq) : 1.0);
    EXPECT_EQ(stats.nonfinite, 0u) << "non-finite or unwritten dx";
    EXPECT_LE(error_norm, output_tolerance<T>() * std::max(std::sqrt(ref_norm_sq), std::sqrt(term_norm_sq)))
        << "dx error norm " << error_norm << " (relative " << stats.relative << ")";
    // And element by element against max(|ref|, rms(ref), rms(rstd * g)): one wrong row of
    // many would hardly move the norm.
    const double n = double(dx_ref.size());
    const double floor = std::max(std::sqrt(ref_norm_sq / n), std::sqrt(term_norm_sq / n));
    TILEKIT_EXPECT_CLOSE_SCALED(dx_valid, dx_ref, floored_scales(dx_ref, floor), arithmetic_tolerance);
  }
  EXPECT_TRUE(padding_untouched(dx_out, dx_s)) << "dx written outside [0, cols)";
  TILEKIT_EXPECT_CLOSE_EACH(dw.download(), dw_ref, arithmetic_tolerance);
  if (k == kind::layer) TILEKIT_EXPECT_CLOSE_EACH(db.download(), db_ref, arithmetic_tolerance);
}

// Every size class (clusters of 2, 4, 8 and 16 CTAs from 20000 columns on); odd pads and odd
// widths make 16-bit rows start misaligned (the shifted stream) in every class of 1 warp and up;
// an odd width with an aligned stride (65543 + 1) takes the shifted stream too (its length is not
// a multiple of 16 bytes), at shift 0; rows not multiples of the rows per CTA; M = 1 for the
// widest.
const shape forward_shapes[] = {
    {3, 1, 0},      {5, 7, 3},      {37, 100, 0},  {9, 300, 1},   {16, 1000, 8}, {16, 1024, 0},
    {4, 1500, 0},   {3, 3000, 2},   {4, 4097, 5},  {3, 8192, 0},  {2, 16000, 8}, {2, 20000, 0},
    {3, 40000, 0},  {2, 50000, 3},  {2, 65543, 1}, {2, 12289, 3}, {2, 32767, 0}, {2, 131071, 0},
    {1, 262144, 0}, {2, 262139, 0}};
// Backward: enough rows that workers loop (264 workers; 8 rows per CTA for warp classes).
// One shape per size class of backward_table (256, 512, 1024, 2048, 4096, 8192, 16K, and the
// clusters of 2, 4, 8 and 16 CTAs), and 16-bit rows that do not start 16-byte aligned (the shifted
// stream) in every class from one warp up: strides of 7 + 3, 302, 1500, 3001, 4102, 12292, 32767,
// 50003, 131071 and 262139 elements (the RMSNorm backward holds the rows of 2 to 16 warps as pairs,
// norm_backward_op::held_row; the LayerNorm's row() votes once per row from 16 warps and stores dx
// as pairs in some classes).
const shape backward_shapes[] = {{3, 1, 0},      {5, 7, 3},       {2500, 100, 0}, {70, 300, 2},   {40, 1000, 8},
                                 {600, 1500, 0}, {200, 3001, 0},  {64, 4096, 0},  {300, 4097, 5}, {3, 8192, 0},
                                 {40, 12289, 3}, {2, 16000, 8},   {90, 30000, 0}, {12, 50001, 2}, {60, 65543, 1},
                                 {7, 32767, 0},  {5, 131071, 0}, {1, 262144, 0}, {2, 262139, 0}};

class Norms : public GpuTest {};

TEST_F(Norms, RmsForwardBf16) {
  for (const shape& s : forward_shapes) run_forward<bf16, bf16>(kind::rms, s, false, false);
}
TEST_F(Norms, RmsForwardBf16Fp32WeightResidual) {
  for (const shape& s : forward_shapes) run_forward<bf16, float>(kind::rms, s, true, false);
}
TEST_F(Norms, RmsForwardFp32) {
  for (const shape& s : forward_shapes) run_forward<float, float>(kind::rms, s, s.cols % 2 == 0, false);
}
TEST_F(Norms, RmsForwardFp16) {
  for (const shape& s : {shape{5, 7, 3}, shape{16, 1000, 8}, shape{4, 4097, 5}, shape{2, 65543, 1}})
    run_forward<fp16, fp16>(kind::rms, s, true, false);
}
TEST_F(Norms, LayerForwardBf16) {
  for (const shape& s : forward_shapes) run_forward<bf16, bf16>(kind::layer, s, false, true);
}
TEST_F(Norms, LayerForwardBf16Fp32WeightResidualNoBias) {
  for (const shape& s : forward_shapes) run_forward<bf16, float>(kind::layer, s, true, false);
}
TEST_F(Norms, LayerForwardFp32) {
  for (const shape& s : forward_shapes) run_forward<float, float>(kind::layer, s, false, true);
}
// Statistics of rows far from 0, uneven along the row (offset_rows), at every width: the
// clusters' one-exchange fold of per-slice statistics must be as exact as one two-pass over the
// row. y is compared at the fp32 tolerance: the mean itself carries ~ulp(1000) / 2, i.e.
// ~2e-5 of y.
TEST_F(Norms, LayerForwardFp32OffsetRows) {
  for (const shape& s : forward_shapes) run_forward<float, float>(kind::layer, s, false, true, true);
}
// 16-bit LayerNorm rows of 4 warps or more (4K columns and up) and RMSNorm rows over clusters
// of 2-8 CTAs are deferred rows (norm_kernels.cuh: each warp's statistics are posted, y is
// written one row later from the row kept in registers): enough rows that every row group of
// every worker posts > 8 rounds (each of the 4 posted buffers reused), at every deferred size
// class: 4 / 8 / 16 warps per row (4, 2, 1 rows per CTA), clusters of 2, 4, 8 and 16 CTAs
// (and RMSNorm's undeferred ones with as many rows). With the residual (h kept instead of x),
// an odd stride (shifted stream), and (next test) offset rows: the warps' two-pass partials
// folded into one mean and M2 as exact as the fp32 path's.
const shape deferred_shapes[] = {{4800, 4096, 0},  {2400, 8000, 0}, {1200, 16384, 0}, {600, 30000, 8},
                                 {300, 65543, 0}, {150, 131072, 0}, {80, 262144, 0}};
TEST_F(Norms, DeferredRowsManyRounds) {
  for (const shape& s : deferred_shapes) {
    run_forward<bf16, bf16>(kind::rms, s, false, false);
    run_forward<bf16, float>(kind::layer, s, true, true);
  }
  run_forward<fp16, fp16>(kind::layer, {1200, 16000, 0}, false, true);
  run_forward<bf16, bf16>(kind::rms, {300, 20000, 3}, true, false);
}
// RMSNorm of 16-bit rows with a 16-bit weight and no residual takes rows of 16K-32K columns in
// one CTA, 64 columns per thread as packed pairs, the weight as a 16-bit thread vector
// (rms_row_table): both ends of that class, bf16 and fp16, many rows per worker (claimed items),
// a misaligned stride (shifted stream), one row.
TEST_F(Norms, RmsForwardPackedClass) {
  for (const shape& s : {shape{1300, 16385, 0}, shape{700, 32768, 0}, shape{40, 24000, 3}, shape{1, 30001, 0}})
    run_forward<bf16, bf16>(kind::rms, s, false, false);
  run_forward<fp16, fp16>(kind::rms, {300, 32768, 8}, false, false);
}
TEST_F(Norms, LayerForwardBf16OffsetRows) {
  for (const shape& s : forward_shapes) run_forward<bf16, bf16>(kind::layer, s, false, true, true);
  run_forward<bf16, bf16>(kind::layer, {150, 131072, 0}, true, true, true);
}
TEST_F(Norms, LayerForwardFp16) {
  for (const shape& s : {shape{5, 7, 3}, shape{16, 1000, 8}, shape{4, 4097, 5}, shape{2, 65543, 1}})
    run_forward<fp16, fp16>(kind::layer, s, true, true);
}

TEST_F(Norms, RmsBackwardBf16) {
  for (const shape& s : backward_shapes) run_backward<bf16, bf16>(kind::rms, s, true, false);
}
TEST_F(Norms, RmsBackwardBf16Fp32WeightRecomputedResidual) {
  for (const shape& s : backward_shapes) run_backward<bf16, float>(kind::rms, s, false, true);
}
TEST_F(Norms, RmsBackwardFp32) {
  for (const shape& s : backward_shapes) run_backward<float, float>(kind::rms, s, true, false);
}
// The held rows without saved statistics (rstd from the posted sum of x^2, a float2 reduction),
// bf16, at every class of 2-16 warps with misaligned rows.
TEST_F(Norms, RmsBackwardBf16HeldRowsRecomputed) {
  for (const shape& s : {shape{600, 1500, 0}, shape{200, 3001, 0}, shape{300, 4097, 5}, shape{40, 12289, 3}})
    run_backward<bf16, bf16>(kind::rms, s, false, false);
}
TEST_F(Norms, RmsBackwardFp16) {
  for (const shape& s : {shape{5, 7, 3}, shape{40, 1000, 8}, shape{300, 4097, 5}, shape{60, 65543, 1}})
    run_backward<fp16, fp16>(kind::rms, s, false, false);
}
// RMSNorm backward of 16-bit rows over clusters takes deferred rows (norm_backward_op: x and dy
// held as pairs, dx written one row later, rstd recomputed from the posted sum of x^2 when none
// is saved): enough rows that every worker posts > 8 rounds (each posted buffer reused) at each
// cluster class (2, 4, 8, 16 CTAs; 66 / 30 / 15 / 7 workers on the H200: the co-resident
// clusters, cudaOccupancyMaxActiveClusters), widths that end inside a thread's
// columns, saved and recomputed statistics, the residual gradient, fp16 and an fp32 weight,
// and an odd stride (shifted stream, deferred too).
TEST_F(Norms, RmsBackwardDeferredRowsManyRounds) {
  for (const shape& s : {shape{700, 30000, 0}, shape{350, 50008, 8}, shape{170, 131064, 0}, shape{90, 262144, 0}}) {
    run_backward<bf16, bf16>(kind::rms, s, true, false);
    run_backward<bf16, float>(kind::rms, s, false, true);
  }
  run_backward<fp16, fp16>(kind::rms, {350, 65536, 0}, false, false);
  run_backward<bf16, bf16>(kind::rms, {200, 40001, 3}, false, true);
}
// LayerNorm backward of aligned 16-bit rows with saved statistics of 16K-64K columns takes
// deferred rows (norm_backward_op<..., Deferred = true>: each warp posts {sum g * d, sum g}, x
// and dy are held as pairs, dx, dw and db come one row later): enough rows that every worker
// posts > 8 rounds (each posted buffer reused) in the 16K class (one CTA of 16 warps; 132
// workers) and the clusters of 2 and 4 CTAs, widths that end inside a thread's columns, the
// residual gradient, fp16 and an fp32 weight (run_backward's dy related to x makes dx depend on
// the row's sums at O(1)); and, on row(), for contrast: the 128K and 256K classes, odd strides
// (shifted stream) and rows without saved statistics. TILEKIT_TEST_SMALL=1 (racecheck of a
// TILEKIT_CHECKABLE_RELEASE build): the deferred classes only, bf16, ~6 rounds per worker (each
// of the 4 posted-reduction slots still reused; row_kernel.cuh), which a bf16-only build
// (TILEKIT_DEV_BF16_ONLY) can run.
TEST_F(Norms, LayerBackwardDeferredRowsManyRounds) {
  if (small_problems()) {
    for (const shape& s : {shape{800, 16384, 0}, shape{400, 30000, 0}, shape{200, 50008, 8}}) {
      run_backward<bf16, bf16>(kind::layer, s, true, true);
    }
    return;
  }
  for (const shape& s : {shape{1200, 16384, 0}, shape{700, 30000, 0}, shape{350, 50008, 8}, shape{170, 131064, 0},
                         shape{90, 262144, 0}}) {
    run_backward<bf16, bf16>(kind::layer, s, true, false);
    run_backward<bf16, float>(kind::layer, s, true, true);
  }
  run_backward<fp16, fp16>(kind::layer, {350, 65536, 0}, true, false);
  run_backward<bf16, bf16>(kind::layer, {280, 40001, 3}, true, true);
  run_backward<bf16, bf16>(kind::layer, {1200, 12289, 3}, true, false);
  run_backward<bf16, bf16>(kind::layer, {700, 30000, 0}, false, false);
}
// Each operand its own stride: aligned x with a misaligned dy or residual (pad 3) and the
// reverse, outputs and dresidual_out at other pads, aligned or not. A plan streams aligned rows
// only when every streamed input is aligned (row_kernel.cuh, can_stream), so the LayerNorm
// backward's deferred rows (aligned only, 16K-64K) give way to row() in the first two cases; and
// a kernel that took one operand's stride or shift for another's would read or write the wrong
// columns. A warp class, a CTA class, the 16K class, clusters of 2 and 4.
TEST_F(Norms, OperandsOfTheirOwnStrides) {
  const operand_pads mixed[] = {{.x = 0, .other_in = 3, .out = 5, .extra = 8},
                                {.x = 3, .other_in = 0, .out = 0, .extra = 1},
                                {.x = 0, .other_in = 0, .out = 7, .extra = 2}};
  for (const shape& s : {shape{40, 1000, 0}, shape{300, 4096, 0}, shape{300, 16384, 0}, shape{140, 30000, 0},
                         shape{70, 65536, 0}}) {
    for (const operand_pads& p : mixed) {
      run_backward<bf16, bf16>(kind::layer, s, true, true, p);
      run_backward<bf16, bf16>(kind::rms, s, false, true, p);
      run_forward<bf16, bf16>(kind::layer, s, true, true, false, p);
      run_forward<bf16, bf16>(kind::rms, s, true, false, false, p);
    }
  }
}
TEST_F(Norms, LayerBackwardBf16) {
  for (const shape& s : backward_shapes) run_backward<bf16, bf16>(kind::layer, s, true, false);
}
TEST_F(Norms, LayerBackwardBf16Fp32WeightRecomputedResidual) {
  for (const shape& s : backward_shapes) run_backward<bf16, float>(kind::layer, s, false, true);
}
TEST_F(Norms, LayerBackwardFp32) {
  for (const shape& s : backward_shapes) run_backward<float, float>(kind::layer, s, true, false);
}
TEST_F(Norms, LayerBackwardFp16) {
  for (const shape& s : {shape{5, 7, 3}, shape{40, 1000, 8}, shape{300, 4097, 5}, shape{60, 65543, 1}})
    run_backward<fp16, fp16>(kind::layer, s, true, true);
}

// fp16 rows with an fp32 weight (the bf16 rows have such tests; fp16 had none): both norms, both
// directions, with the residual, the bias or dresidual_out, aligned and misaligned rows, one warp
// to clusters of 16.
TEST_F(Norms, Fp16RowsFp32Weight) {
  for (const shape& s : {shape{5, 7, 3}, shape{40, 1000, 8}, shape{300, 4097, 5}, shape{90, 30000, 0},
                         shape{12, 50001, 2}, shape{2, 262139, 0}}) {
    run_forward<fp16, float>(kind::rms, s, true, false);
    run_forward<fp16, float>(kind::layer, s, false, true);
    run_backward<fp16, float>(kind::rms, s, true, false);
    run_backward<fp16, float>(kind::layer, s, false, true);
  }
}

// dw is reduced without atomics, and every worker's partial sums the same rows in every run
// (the norm backward's one-CTA classes run paced: the static order's items, row_kernel.cuh
// "Paced order"): three runs give the same bits. fp32 weights, so that dw is the fp32 sum
// itself; rows of 1000 and 4097 columns with ~19 items per worker on 132 SMs (big enough for
// the automatic order to pace them), where claimed items would change each worker's sums from
// run to run. The first run's dw is also checked against the fp64 sums (three runs of an
// unwritten dw would agree too).
TEST_F(Norms, BackwardWeightGradientIsDeterministic) {
  for (const shape s : {shape{40000, 1000, 0}, shape{5000, 4097, 0}}) {
    std::mt19937_64 rng(test_seed());
    const size_t count = size_t(s.rows * s.cols);
    const std::vector<bf16> x_host = random_vector<bf16>(count, rng), dy_host = random_vector<bf16>(count, rng);
    device_buffer<bf16> x(x_host), dy(dy_host), dx(count);
    device_buffer<float> w(random_vector<float>(s.cols, rng));
    const size_t ws_bytes = tk::rms_norm_backward_workspace_bytes(s.rows, s.cols);
    device_buffer<unsigned char> workspace(ws_bytes);
    tk::rms_norm_backward_args a;
    a.dx = dx.get(), a.dx_row_stride = s.cols, a.dy = dy.get(), a.dy_row_stride = s.cols, a.x = x.get();
    a.x_row_stride = s.cols, a.weight = w.get(), a.workspace = workspace.get(), a.workspace_bytes = ws_bytes;
    a.rows = s.rows, a.cols = s.cols, a.weight_dtype = dtype::fp32;
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 3; ++run) {
      device_buffer<float> dw(s.cols);
      a.dweight = dw.get();
      tk::rms_norm_backward(a, nullptr);
      TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
      runs.push_back(dw.download());
    }
    for (int run = 1; run < 3; ++run)
      EXPECT_EQ(std::memcmp(runs[0].data(), runs[size_t(run)].data(), runs[0].size() * sizeof(float)), 0)
          << "dw differs between runs, cols=" << s.cols << ", run " << run;
    std::vector<double> dw_ref, db_ref;
    weight_gradients(kind::rms, x_host, dy_host, s, nullptr, nullptr, a.eps, dw_ref, db_ref);
    SCOPED_TRACE(::testing::Message() << "dw against the reference, cols=" << s.cols);
    TILEKIT_EXPECT_CLOSE_EACH(runs[0], dw_ref, arithmetic_tolerance);
  }
}
// The same for the LayerNorm's dw and db, with saved statistics (the paced one-CTA classes, the
// static 16K class and clusters) and without, the first run against the fp64 sums.
TEST_F(Norms, LayerBackwardGradientsAreDeterministic) {
  for (const shape s : {shape{40000, 1000, 0}, shape{5000, 4097, 0}, shape{1200, 16384, 0}, shape{300, 65536, 0}}) {
    for (const bool saved : {true, false}) {
      std::mt19937_64 rng(test_seed());
      const size_t count = size_t(s.rows * s.cols);
      const std::vector<bf16> x_host = random_vector<bf16>(count, rng), dy_host = random_vector<bf16>(count, rng);
      device_buffer<bf16> x(x_host), dy(dy_host), dx(count);
      device_buffer<float> w(random_vector<float>(s.cols, rng, 0.5f, 1.5f));
      const std::vector<float> mean_host = random_vector<float>(size_t(s.rows), rng, -0.1f, 0.1f);
      const std::vector<float> rstd_host = random_vector<float>(size_t(s.rows), rng, 1.5f, 1.9f);
      device_buffer<float> mean(mean_host), rstd(rstd_host);
      const size_t ws_bytes = tk::layer_norm_backward_workspace_bytes(s.rows, s.cols);
      device_buffer<unsigned char> workspace(ws_bytes);
      tk::layer_norm_backward_args a;
      a.dx = dx.get(), a.dx_row_stride = s.cols, a.dy = dy.get(), a.dy_row_stride = s.cols, a.x = x.get();
      a.x_row_stride = s.cols, a.weight = w.get(), a.workspace = workspace.get(), a.workspace_bytes = ws_bytes;
      a.mean = saved ? mean.get() : nullptr, a.rstd = saved ? rstd.get() : nullptr;
      a.rows = s.rows, a.cols = s.cols, a.weight_dtype = dtype::fp32;  // dw, db in fp32: every bit shows
      std::vector<std::vector<float>> dws, dbs;
      for (int run = 0; run < 3; ++run) {
        device_buffer<float> dw(s.cols), db(s.cols);
        a.dweight = dw.get(), a.dbias = db.get();
        tk::layer_norm_backward(a, nullptr);
        TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
        dws.push_back(dw.download());
        dbs.push_back(db.download());
      }
      for (int run = 1; run < 3; ++run) {
        EXPECT_EQ(std::memcmp(dws[0].data(), dws[size_t(run)].data(), dws[0].size() * sizeof(float)), 0)
            << "dw differs between runs, cols=" << s.cols << (saved ? " saved" : " recomputed") << ", run " << run;
        EXPECT_EQ(std::memcmp(dbs[0].data(), dbs[size_t(run)].data(), dbs[0].size() * sizeof(float)), 0)
            << "db differs between runs, cols=" << s.cols << (saved ? " saved" : " recomputed") << ", run " << run;
      }
      std::vector<double> dw_ref, db_ref;
      const std::vector<double> saved_mean(mean_host.begin(), mean_host.end()),
          saved_rstd(rstd_host.begin(), rstd_host.end());
      weight_gradients(kind::layer, x_host, dy_host, s, saved ? &saved_mean : nullptr, saved ? &saved_rstd : nullptr,
                       a.eps, dw_ref, db_ref);
      SCOPED_TRACE(::testing::Message() << "against the reference, cols=" << s.cols << (saved ? " saved" : " recomputed"));
      TILEKIT_EXPECT_CLOSE_EACH(dws[0], dw_ref, arithmetic_tolerance);
      TILEKIT_EXPECT_CLOSE_EACH(dbs[0], db_ref, arithmetic_tolerance);
    }
  }
}

}  // namespace
