#pragma once
// Device code and launch plumbing shared by the RMSNorm / LayerNorm forward and backward
// (internal to kernels/norms; the public API is norms.h).
//
// Plan (QuACK-style): every input byte is read once. The part of a row a thread owns stays in
// registers (fp32) between the reductions and the output pass; a row is spread over a warp, a
// CTA, or a cluster of CTAs depending on its width (the table below), and reduced with the
// ladder of tilekit/ops/reduce.cuh. Global accesses go through tilekit/ops/row_io.cuh, whose
// register layout depends only on column indices, so x, w, b, dy and the outputs of a row line
// up in the same registers whatever their dtypes and alignments.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "norms/norms.h"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit::kernels::norms_detail {

enum class norm_kind { rms, layer };

// ---------------------------------------------------------------------------------------------
// Configuration table: how a row is spread over threads, chosen from cols (the first class
// whose coverage reaches cols). `Elements` = fp32 registers per thread per row: 32 keeps a
// 512-thread CTA under 128 registers per thread with the weight also in registers.
//   ThreadsPerRow 32 -> a warp per row (RowsPerCta rows per CTA), warp-shuffle reduction only;
//   ThreadsPerRow = CTA -> a CTA per row, block_reduce;
//   Clustered -> a row over a cluster of 2..16 such CTAs (cols / 16384 rounded up), DSMEM
//   reduction. 16 x 512 threads x 32 = 262144 = max_norm_cols.
// ---------------------------------------------------------------------------------------------
template <int ThreadsPerRow, int RowsPerCta, int Elements, bool Clustered>
struct norm_config {
  static_assert(ThreadsPerRow == warp_threads || RowsPerCta == 1,
                "several rows per CTA only with a warp per row (block_reduce spans the whole CTA)");
  static_assert(!Clustered || RowsPerCta == 1, "a clustered row occupies whole CTAs");
  static constexpr int threads_per_row = ThreadsPerRow;
  static constexpr int rows_per_cta = RowsPerCta;
  static constexpr int threads = ThreadsPerRow * RowsPerCta;
  static constexpr int elements = Elements;
  static constexpr bool warp_per_row = ThreadsPerRow == warp_threads;
  static constexpr bool clustered = Clustered;
  // Columns one CTA (or one warp, for warp_per_row) covers.
  static constexpr int columns = ThreadsPerRow * Elements;
  // Register budget: at least min_ctas_per_sm CTAs of this size per SM, i.e. at most 128
  // registers per thread. Without a cap ptxas spends up to 255 registers hoisting loads,
  // which halves the resident warps that hide HBM latency.
  static constexpr int min_ctas_per_sm = threads >= 512 ? 1 : 512 / threads;
  template <class T>
  using layout = row_layout<ThreadsPerRow, Elements / vector_elements<T>, vector_elements<T>>;
};

// Forward: x and w in registers (2 x Elements floats per thread).
struct forward_table {
  using classes = std::tuple<norm_config<32, 8, 8, false>,    // cols <= 256
                             norm_config<32, 8, 32, false>,   // cols <= 1024
                             norm_config<128, 1, 16, false>,  // cols <= 2048
                             norm_config<256, 1, 16, false>,  // cols <= 4096
                             norm_config<256, 1, 32, false>,  // cols <= 8192
                             norm_config<512, 1, 32, false>,  // cols <= 16384
                             norm_config<512, 1, 32, true>>;  // cols <= 262144, 2..16 CTAs per row
};
// Backward: x, dy (and transients of the two reductions) in registers, w / dw / db in shared
// memory; at 32 registers per array ptxas spilled under the 128-register cap, so every class
// holds 16 values and uses twice the threads.
struct backward_table {
  using classes = std::tuple<norm_config<32, 8, 8, false>,     // cols <= 256
                             norm_config<32, 8, 16, false>,    // cols <= 512
                             norm_config<64, 1, 16, false>,    // cols <= 1024
                             norm_config<128, 1, 16, false>,   // cols <= 2048
                             norm_config<256, 1, 16, false>,   // cols <= 4096
                             norm_config<512, 1, 16, false>,   // cols <= 8192
                             // cols <= 262144, 1..16 CTAs of 16384 columns per row. (1024-thread
                             // CTAs spilled under their 64-register cap; the clustered 512 x 32
                             // variant fits in 128, and a cluster of 1 serves cols <= 16384.)
                             norm_config<512, 1, 32, true>>;
};

// Index of the first class of Table whose coverage reaches cols (the last one, clustered,
// covers everything up to max_norm_cols).
template <class Table, size_t I = 0>
constexpr size_t size_class_index(int64_t cols) {
  using C = std::tuple_element_t<I, typename Table::classes>;
  if constexpr (I + 1 == std::tuple_size_v<typename Table::classes>) {
    static_assert(C::clustered && C::columns * int64_t(max_cluster_ctas) >= max_norm_cols,
                  "the last class of a table must be clustered and cover max_norm_cols");
    return I;
  } else {
    return cols <= C::columns ? I : size_class_index<Table, I + 1>(cols);
  }
}

// Call f.template operator()<Config>() for the size class of cols in Table.
template <class Table, class F, size_t I = 0>
void dispatch_size_class(int64_t cols, F&& f) {
  if constexpr (I < std::tuple_size_v<typename Table::classes>) {
    if (size_class_index<Table>(cols) == I) f.template operator()<std::tuple_element_t<I, typename Table::classes>>();
    else dispatch_size_class<Table, F, I + 1>(cols, std::forward<F>(f));
  }
}

// CTAs per row (1 unless clustered; a clustered class may also use clusters of 1).
template <class Table>
int cluster_ctas(int64_t cols) {
  using last = std::tuple_element_t<std::tuple_size_v<typename Table::classes> - 1, typename Table::classes>;
  return size_class_index<Table>(cols) + 1 == std::tuple_size_v<typename Table::classes>
             ? int(ceil_div<int64_t>(cols, last::columns))
             : 1;
}

// Backward workers: a fixed number of CTAs (two per SM of a 132-SM H100 / H200) loop over the
// rows and each keeps one fp32 partial of dw / db. A constant rather than the device's SM
// count makes the workspace size and the summation order, hence the bits of dw, independent
// of the device.
inline constexpr int64_t backward_target_ctas = 264;

inline int64_t backward_workers(int64_t rows, int64_t cols) {
  int64_t workers = 0;
  dispatch_size_class<backward_table>(cols, [&]<class Config>() {
    if constexpr (Config::warp_per_row)
      workers = std::min(ceil_div<int64_t>(rows, Config::rows_per_cta), backward_target_ctas);
    else
      workers = std::min(rows, std::max<int64_t>(1, backward_target_ctas / cluster_ctas<backward_table>(cols)));
  });
  return workers;
}

// ---------------------------------------------------------------------------------------------
// Kernel parameters (one struct for both norms; unused fields are null).
// ---------------------------------------------------------------------------------------------
struct forward_params {
  void* y;
  int64_t y_stride;
  const void* x;
  int64_t x_stride;
  const void* weight;
  const void* bias;
  const void* residual;
  int64_t residual_stride;
  void* residual_out;
  int64_t residual_out_stride;
  float* mean;
  float* rstd;
  int rows;
  int cols;
  float eps;
};

struct backward_params {
  void* dx;
  int64_t dx_stride;
  const void* dy;
  int64_t dy_stride;
  const void* x;
  int64_t x_stride;
  const void* weight;
  const float* mean;
  const float* rstd;
  const void* dresidual_out;
  int64_t dresidual_out_stride;
  float* dweight_partials;  // [workers, cols] or null
  float* dbias_partials;    // [workers, cols] or null
  int rows;
  int cols;
  float eps;
};

// ---------------------------------------------------------------------------------------------
// Host-side validation helpers (throw before any CUDA call).
// ---------------------------------------------------------------------------------------------
inline bool is_input_dtype(dtype t) { return t == dtype::bf16 || t == dtype::fp16 || t == dtype::fp32; }

inline void check_shape(int64_t rows, int64_t cols) {
  TILEKIT_CHECK_ARG(rows >= 1, "rows must be >= 1, got ", rows);
  TILEKIT_CHECK_ARG(cols >= 1 && cols <= max_norm_cols, "cols must be in [1, ", max_norm_cols, "], got ", cols);
  // Forward grids have rows * CTAs-per-row CTAs (at most 2^31 - 1 along x).
  TILEKIT_CHECK_ARG(rows <= int64_t(INT32_MAX) / max_cluster_ctas, "rows must be <= ",
                    int64_t(INT32_MAX) / max_cluster_ctas, ", got ", rows);
}
inline void check_dtypes(dtype x_dtype, dtype weight_dtype) {
  TILEKIT_CHECK_ARG(is_input_dtype(x_dtype), "x_dtype must be bf16, fp16 or fp32, got ", dtype_name(x_dtype));
  TILEKIT_CHECK_ARG(weight_dtype == x_dtype || weight_dtype == dtype::fp32,
                    "weight_dtype must be x_dtype (", dtype_name(x_dtype), ") or fp32, got ",
                    dtype_name(weight_dtype));
}
// A [rows, cols] matrix: stride >= cols, pointer aligned to its element (the vector path of
// row_io checks 16-byte alignment per row itself and falls back to element accesses).
inline void check_matrix(const void* p, int64_t stride, int64_t cols, dtype t, const char* name, bool required) {
  if (!required && p == nullptr) return;
  TILEKIT_CHECK_ARG(p != nullptr, name, " must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(p) % uintptr_t(dtype_bytes(t)) == 0, name, " must be aligned to its ",
                    dtype_bytes(t), "-byte elements");
  TILEKIT_CHECK_ARG(stride >= cols, name, " row stride must be >= cols (", cols, "), got ", stride);
}
inline void check_vector(const void* p, dtype t, const char* name, bool required) {
  if (!required && p == nullptr) return;
  TILEKIT_CHECK_ARG(p != nullptr, name, " must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(p) % uintptr_t(dtype_bytes(t)) == 0, name, " must be aligned to its ",
                    dtype_bytes(t), "-byte elements");
}
inline void check_eps(float eps) {
  TILEKIT_CHECK_ARG(eps > 0.0f && eps < infinity, "eps must be positive and finite, got ", eps);
}

// Bytes of fp32 partials: one [workers, cols] array per reduced gradient.
inline size_t backward_workspace_bytes(int64_t rows, int64_t cols, int gradients) {
  check_shape(rows, cols);
  return size_t(gradients) * size_t(backward_workers(rows, cols)) * size_t(cols) * sizeof(float);
}

// ---------------------------------------------------------------------------------------------
// Launch: cudaLaunchKernelEx with the cluster dimension as a launch attribute (the size is a
// run-time choice). Clusters above the portable 8 need the non-portable attribute (HOPPER_NOTES
// 7.1).
// ---------------------------------------------------------------------------------------------
template <class Kernel, class Params>
void launch(Kernel kernel, int64_t grid, int threads, bool clustered, int cluster, size_t shared_bytes,
            cudaStream_t stream, const Params& params, const char* what) {
  if (cluster > 8) TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  // The 48 KiB default limit counts static + dynamic shared memory (HOPPER_NOTES 9.1): a
  // kernel with 48 KiB of dynamic slots and a few static bytes of reduction scratch needs the
  // opt-in too, so raise the limit for every kernel that takes dynamic shared memory.
  if (shared_bytes > 0)
    TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = clustered ? 1 : 0;  // clustered kernels read %cluster_* registers: launch as clusters, even of 1
  TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, params));
  TILEKIT_CHECK_LAUNCH(what);
}

// Call f.template operator()<T, W>() for the run-time dtypes (validated before).
template <class F>
void dispatch_dtypes(dtype x_dtype, dtype weight_dtype, F&& f) {
  const bool fp32_weight = weight_dtype == dtype::fp32;
  switch (x_dtype) {
    case dtype::bf16: fp32_weight ? f.template operator()<bf16, float>() : f.template operator()<bf16, bf16>(); break;
    case dtype::fp16: fp32_weight ? f.template operator()<fp16, float>() : f.template operator()<fp16, fp16>(); break;
    default: f.template operator()<float, float>(); break;
  }
}
#if defined(__CUDACC__)

// Sum of two floats at once (LayerNorm backward reduces sum(g) and sum(g * xhat) together).
struct sum2_op {
  TILEKIT_DEVICE TILEKIT_INLINE float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
  TILEKIT_HOST_DEVICE static constexpr float2 identity() { return float2{0.0f, 0.0f}; }
};

// Shared memory of the reduction for a size class: nothing is used by a warp per row, a
// block_reduce scratch by a CTA per row, a cluster_reduce scratch by a clustered row.
template <class Config, class T>
struct reduce_scratch {
  std::conditional_t<Config::clustered, cluster_reduce_scratch<Config::threads, T>,
                     block_reduce_scratch<Config::threads, T>>
      storage;
};

template <class Config, class T, class Op>
TILEKIT_DEVICE TILEKIT_INLINE T row_reduce(T value, Op op, reduce_scratch<Config, T>& scratch) {
  if constexpr (Config::warp_per_row) return warp_reduce(value, op);
  else if constexpr (Config::clustered) return cluster_reduce<Config::threads>(value, op, scratch.storage);
  else return block_reduce<Config::threads>(value, op, scratch.storage.values);
}

template <class Config>
TILEKIT_DEVICE TILEKIT_INLINE void init_reduce_scratch(reduce_scratch<Config, float>& a,
                                                       reduce_scratch<Config, float2>* b = nullptr) {
  if constexpr (Config::clustered) {
    if (threadIdx.x == 0) {
      a.storage.init();
      if (b) b->storage.init();
    }
    init_barriers_fence();
    cluster::sync();
  }
}

// Where this thread's share of a row is: the row, the thread's index among the row's threads,
// and the first column of its CTA's chunk (clustered rows are cut into Config::columns chunks,
// one per CTA rank).
// Row indices are 32-bit (check_shape bounds rows by 2^31 / 16): it saves the registers that
// kept the wide backward kernels from spilling.
struct row_slice {
  int row;
  int row_step;  // distance to the next row this slice handles (backward loops)
  int thread;
  int col0;
};
template <class Config>
TILEKIT_DEVICE TILEKIT_INLINE row_slice my_row_slice() {
  if constexpr (Config::warp_per_row) {
    return {int(blockIdx.x) * Config::rows_per_cta + warpid(), int(gridDim.x) * Config::rows_per_cta, laneid(), 0};
  } else if constexpr (Config::clustered) {
    return {int(cluster::id_x()), int(cluster::count_x()), int(threadIdx.x), int(cluster::rank()) * Config::columns};
  } else {
    return {int(blockIdx.x), int(gridDim.x), int(threadIdx.x), 0};
  }
}

// Mean and rstd of the row held in v (columns >= cols_here hold 0). LayerNorm: two passes over
// the registers, mean first, then the mean of squared deviations (no E[x^2] - E[x]^2
// cancellation). RMSNorm: mean = 0.
template <norm_kind Kind, class Config, class Layout>
TILEKIT_DEVICE TILEKIT_INLINE void row_statistics(const float (&v)[Layout::elements], int cols, int cols_here,
                                                  int thread, float eps, reduce_scratch<Config, float>& scratch,
                                                  float& mean, float& rstd) {
  const float inv_cols = 1.0f / float(cols);
  if constexpr (Kind == norm_kind::rms) {
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) sum_sq = fmaf(v[j], v[j], sum_sq);
    mean = 0.0f;
    rstd = rsqrtf(row_reduce<Config>(sum_sq, sum_op{}, scratch) * inv_cols + eps);
  } else {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) sum += v[j];
    mean = row_reduce<Config>(sum, sum_op{}, scratch) * inv_cols;
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < Layout::elements; ++j) {
      const float d = Layout::column(thread, j) < cols_here ? v[j] - mean : 0.0f;
      sum_sq = fmaf(d, d, sum_sq);
    }
    rstd = rsqrtf(row_reduce<Config>(sum_sq, sum_op{}, scratch) * inv_cols + eps);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward: one row (slice) per warp / CTA / cluster.
// ---------------------------------------------------------------------------------------------
template <norm_kind Kind, class T, class W, class Config>
__global__ void __launch_bounds__(Config::threads, Config::min_ctas_per_sm) norm_forward_kernel(const forward_params p) {
  using layout = typename Config::template layout<T>;
  constexpr int E = layout::elements;
  __shared__ reduce_scratch<Config, float> scratch;
  init_reduce_scratch<Config>(scratch);
  const row_slice s = my_row_slice<Config>();
  if (Config::warp_per_row && s.row >= p.rows) return;  // only warps; they use no CTA barrier
  const int cols_here = p.cols - s.col0;

  float v[E];
  load_row<layout, cache_policy::streaming>(v, static_cast<const T*>(p.x) + int64_t(s.row) * p.x_stride + s.col0, cols_here,
                                            s.thread);
  if (p.residual) {
    float r[E];
    load_row<layout, cache_policy::streaming>(
        r, static_cast<const T*>(p.residual) + int64_t(s.row) * p.residual_stride + s.col0, cols_here, s.thread);
    // h is rounded to T before normalizing: the same values a separate add would produce and
    // that the backward will read back.
#pragma unroll
    for (int j = 0; j < E; ++j) v[j] = convert<float>(convert<T>(v[j] + r[j]));
    store_row<layout, cache_policy::streaming>(static_cast<T*>(p.residual_out) + int64_t(s.row) * p.residual_out_stride + s.col0,
                                               v, cols_here, s.thread);
  }
  // Weight (and bias) are reused by every row: normal caching, issued before the reduction so
  // their L2 latency overlaps it.
  float w[E];
  load_row<layout>(w, static_cast<const W*>(p.weight) + s.col0, cols_here, s.thread);

  float mean, rstd;
  row_statistics<Kind, Config, layout>(v, p.cols, cols_here, s.thread, p.eps, scratch, mean, rstd);

#pragma unroll
  for (int j = 0; j < E; ++j) v[j] = (v[j] - mean) * rstd * w[j];
  if constexpr (Kind == norm_kind::layer) {
    if (p.bias) {
      load_row<layout>(w, static_cast<const W*>(p.bias) + s.col0, cols_here, s.thread);
#pragma unroll
      for (int j = 0; j < E; ++j) v[j] += w[j];
    }
  }
  store_row<layout, cache_policy::streaming>(static_cast<T*>(p.y) + int64_t(s.row) * p.y_stride + s.col0, v, cols_here,
                                             s.thread);
  if (s.thread == 0 && s.col0 == 0) {
    if (p.rstd) p.rstd[s.row] = rstd;
    if constexpr (Kind == norm_kind::layer)
      if (p.mean) p.mean[s.row] = mean;
  }
  if constexpr (Config::clustered) cluster::sync();  // no CTA exits while peers may still write into it
}

// ---------------------------------------------------------------------------------------------
// Backward: a fixed set of workers (CTAs, or clusters for wide rows) loops over the rows.
//   xhat = (x - mean) * rstd, g = dy * w
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw += dy * xhat, db += dy   (per worker, in shared memory, then one fp32 partial per worker)
// The weight and the dw / db accumulators live in dynamic shared memory, one slot per (thread,
// register): slot(j) = j * threads + threadIdx.x, so a thread only ever touches its own slots
// (no barriers in the row loop), consecutive threads hit consecutive banks, and the registers
// hold only x and dy (2 x Elements) in the row loop.
// ---------------------------------------------------------------------------------------------
template <class Config>
inline constexpr size_t slot_array_bytes = size_t(Config::threads) * Config::elements * sizeof(float);
// Dynamic shared memory of the backward: weight + dw (+ db for LayerNorm) slot arrays.
template <class Config>
inline constexpr size_t backward_shared_bytes(bool layer) {
  return slot_array_bytes<Config> * (layer ? 3 : 2);
}

template <norm_kind Kind, class T, class W, class Config>
__global__ void __launch_bounds__(Config::threads, Config::min_ctas_per_sm) norm_backward_kernel(const backward_params p) {
  using layout = typename Config::template layout<T>;
  constexpr int E = layout::elements;
  constexpr bool is_layer = Kind == norm_kind::layer;
  extern __shared__ float slots[];
  float* w_slots = slots;
  float* dw_acc = slots + Config::threads * E;
  float* db_acc = slots + 2 * Config::threads * E;
  __shared__ reduce_scratch<Config, float> scratch;
  __shared__ reduce_scratch<Config, float2> scratch2;
  init_reduce_scratch<Config>(scratch, is_layer ? &scratch2 : nullptr);  // scratch2: LayerNorm only

  const row_slice s = my_row_slice<Config>();
  const int cols_here = p.cols - s.col0;
  const bool want_dw = p.dweight_partials != nullptr;
  const bool want_db = is_layer && p.dbias_partials != nullptr;
  {
    // The weight is the same for every row: park it in this thread's shared slots once, so
    // the row loop holds only x and dy in registers.
    float w[E];
    load_row<layout>(w, static_cast<const W*>(p.weight) + s.col0, cols_here, s.thread);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      w_slots[j * Config::threads + threadIdx.x] = w[j];
      if (want_dw) dw_acc[j * Config::threads + threadIdx.x] = 0.0f;
      if (want_db) db_acc[j * Config::threads + threadIdx.x] = 0.0f;
    }
  }

  const float inv_cols = 1.0f / float(p.cols);
  for (int row = s.row; row < p.rows; row += s.row_step) {
    float x[E], g[E];
    load_row<layout, cache_policy::streaming>(x, static_cast<const T*>(p.x) + int64_t(row) * p.x_stride + s.col0, cols_here,
                                              s.thread);
    load_row<layout, cache_policy::streaming>(g, static_cast<const T*>(p.dy) + int64_t(row) * p.dy_stride + s.col0, cols_here,
                                              s.thread);
    float mean, rstd;
    if (p.rstd) {
      rstd = p.rstd[row];
      mean = is_layer ? p.mean[row] : 0.0f;
    } else {
      row_statistics<Kind, Config, layout>(x, p.cols, cols_here, s.thread, p.eps, scratch, mean, rstd);
    }
#pragma unroll
    for (int j = 0; j < E; ++j) {
      // Padding columns: x = dy = 0 there, but x - mean is not: force xhat to 0.
      x[j] = layout::column(s.thread, j) < cols_here ? (x[j] - mean) * rstd : 0.0f;
      if (want_dw) dw_acc[j * Config::threads + threadIdx.x] += g[j] * x[j];
      if (want_db) db_acc[j * Config::threads + threadIdx.x] += g[j];
      g[j] *= w_slots[j * Config::threads + threadIdx.x];
    }
    float c_mean_g = 0.0f, c_mean_gx;
    if constexpr (is_layer) {
      float2 sums = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < E; ++j) {
        sums.x += g[j];
        sums.y = fmaf(g[j], x[j], sums.y);
      }
      sums = row_reduce<Config>(sums, sum2_op{}, scratch2);
      c_mean_g = sums.x * inv_cols;
      c_mean_gx = sums.y * inv_cols;
    } else {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < E; ++j) sum = fmaf(g[j], x[j], sum);
      c_mean_gx = row_reduce<Config>(sum, sum_op{}, scratch) * inv_cols;
    }
#pragma unroll
    for (int j = 0; j < E; ++j) g[j] = rstd * (g[j] - c_mean_g - x[j] * c_mean_gx);
    if (p.dresidual_out) {
      load_row<layout, cache_policy::streaming>(
          x, static_cast<const T*>(p.dresidual_out) + int64_t(row) * p.dresidual_out_stride + s.col0, cols_here, s.thread);
#pragma unroll
      for (int j = 0; j < E; ++j) g[j] += x[j];
    }
    store_row<layout, cache_policy::streaming>(static_cast<T*>(p.dx) + int64_t(row) * p.dx_stride + s.col0, g, cols_here,
                                               s.thread);
  }

  // One partial per worker, in fixed order. A warp-per-row worker first adds its warps'
  // accumulators (warp 0 first); otherwise each thread writes its own slots.
  const int64_t worker = Config::warp_per_row ? int64_t(blockIdx.x)
                                              : (Config::clustered ? int64_t(cluster::id_x()) : int64_t(blockIdx.x));
  if constexpr (Config::warp_per_row) {
    __syncthreads();
    constexpr int per_warp_slots = warp_threads * E;
    for (int i = threadIdx.x; i < per_warp_slots; i += Config::threads) {
      const int lane = i % warp_threads, j = i / warp_threads;
      const int col = layout::column(lane, j);
      if (col >= p.cols) continue;
      float dw = 0.0f, db = 0.0f;
#pragma unroll
      for (int w = 0; w < Config::rows_per_cta; ++w) {
        const int slot = j * Config::threads + w * warp_threads + lane;
        if (want_dw) dw += dw_acc[slot];
        if (want_db) db += db_acc[slot];
      }
      if (want_dw) p.dweight_partials[worker * p.cols + col] = dw;
      if (want_db) p.dbias_partials[worker * p.cols + col] = db;
    }
  } else {
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const int col = s.col0 + layout::column(s.thread, j);
      if (col >= p.cols) continue;
      if (want_dw) p.dweight_partials[worker * p.cols + col] = dw_acc[j * Config::threads + threadIdx.x];
      if (want_db) p.dbias_partials[worker * p.cols + col] = db_acc[j * Config::threads + threadIdx.x];
    }
  }
  if constexpr (Config::clustered) cluster::sync();
}

// dw[c] = sum over workers of partials[worker][c], in a fixed order: slice y of the CTA adds
// workers y, y + slices, ... in order, then slice 0 adds the slices in order.
inline constexpr int partial_sum_columns = warp_threads;  // columns per CTA: one 128-byte line of fp32
inline constexpr int partial_sum_slices = 8;              // worker slices per CTA

template <class W>
__global__ void __launch_bounds__(partial_sum_columns* partial_sum_slices)
    sum_partials_kernel(W* out, const float* partials, int64_t workers, int cols) {
  __shared__ float slice_sums[partial_sum_slices][partial_sum_columns];
  const int col = blockIdx.x * partial_sum_columns + threadIdx.x;
  float sum = 0.0f;
  if (col < cols)
    for (int64_t w = threadIdx.y; w < workers; w += partial_sum_slices) sum += partials[w * cols + col];
  slice_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < partial_sum_slices; ++y) total += slice_sums[y][threadIdx.x];
    out[col] = convert<W>(total);
  }
}

template <class W>
void launch_sum_partials(void* out, const float* partials, int64_t workers, int cols, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, partial_sum_columns)));
  const dim3 block(partial_sum_columns, partial_sum_slices);
  sum_partials_kernel<W><<<grid, block, 0, stream>>>(static_cast<W*>(out), partials, workers, cols);
  TILEKIT_CHECK_LAUNCH("sum_partials_kernel");
}

#endif  // __CUDACC__

}  // namespace tilekit::kernels::norms_detail
