#pragma once
// How the row-wise softmax-family kernels (softmax forward/backward, cross-entropy forward)
// map rows onto warps, CTAs and clusters (internal header of kernels/softmax and
// kernels/cross_entropy).
//
// Every row is held in registers, as fp32, between its reduction and its output pass, so each
// input byte is read from HBM once. A row is split over `threads_per_row` threads of one CTA,
// or over a cluster of `cluster_ctas` CTAs for wide rows; each thread owns
// `elements_per_thread` columns laid out by tilekit::row_layout (16-byte groups dealt
// round-robin, so every warp-wide access is coalesced). CTA `rank` of a cluster owns the
// contiguous chunk of columns [rank * chunk, (rank + 1) * chunk), chunk = threads_per_row *
// elements_per_thread.
//
// Configuration table (one size class per row width; the first class whose max_cols >= cols
// is used). 32 fp32 registers per thread and input keep the register count low enough for
// several CTAs per SM (bytes in flight hide HBM latency); wide rows add CTAs, not registers:
//
//   class | max cols | threads/row | rows/CTA | cluster | elements/thread | reduction
//   ------+----------+-------------+----------+---------+-----------------+---------------------
//     0   |     256  |   32 (warp) |     8    |    1    |        8        | warp shuffles
//     1   |    1024  |   32 (warp) |     8    |    1    |       32        | warp shuffles
//     2   |    2048  |      64     |     1    |    1    |       32        | CTA (shared memory)
//     3   |    4096  |     128     |     1    |    1    |       32        | CTA
//     4   |    8192  |     256     |     1    |    1    |       32        | CTA
//     5   |   16384  |     512     |     1    |    1    |       32        | CTA
//     6   |   32768  |     512     |     1    |    2    |       32        | cluster (DSMEM)
//     7   |   65536  |     512     |     1    |    4    |       32        | cluster
//     8   |  131072  |     512     |     1    |    8    |       32        | cluster
//     9   |  262144  |     512     |     1    |   16    |       32        | cluster (non-portable)
//
// Registers (ptxas, sm_90a, nvcc 13.0): softmax forward 72, softmax backward 80-104, cross-entropy
// forward 48-64 (86 with the fused gradient), no spills. So 512-thread classes run ONE CTA per
// SM (a 64-register cap via __launch_bounds__(512, 2) spilled 60 bytes); if the H200 shows the
// load/reduce/store phases of that single CTA not overlapping, the knobs are here (e.g. 256
// threads x 2x the cluster size up to 128K). UNMEASURED on hardware at the time of writing.
//
// Why these numbers: a warp per row below 1K columns needs no barrier at all; 64..512 threads
// per row keep 32 values per thread (4 x 16-byte loads of bf16, 8 of fp32 in flight per thread)
// as the row grows; beyond 16K a cluster spreads the row so registers still hold it (256K
// columns = 16 CTAs x 512 threads x 32), with one DSMEM exchange per reduction. Rows per CTA
// > 1 is only used with a warp per row, whose reduction involves no CTA barrier.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit::kernels::detail {

struct row_config {
  int max_cols;
  int threads_per_row;
  int rows_per_cta;
  int cluster_ctas;
  int elements_per_thread;
};

inline constexpr row_config row_configs[] = {
    {256, 32, 8, 1, 8},       //
    {1024, 32, 8, 1, 32},     //
    {2048, 64, 1, 1, 32},     //
    {4096, 128, 1, 1, 32},    //
    {8192, 256, 1, 1, 32},    //
    {16384, 512, 1, 1, 32},   //
    {32768, 512, 1, 2, 32},   //
    {65536, 512, 1, 4, 32},   //
    {131072, 512, 1, 8, 32},  //
    {262144, 512, 1, 16, 32},
};
inline constexpr int row_config_count = int(sizeof(row_configs) / sizeof(row_configs[0]));

// Index of the size class for `cols` (cols <= the last class's max_cols, checked by the caller).
inline int row_config_index(int64_t cols) {
  for (int i = 0; i < row_config_count; ++i)
    if (cols <= row_configs[i].max_cols) return i;
  return row_config_count - 1;
}

// Calls f.template operator()<I>() with I = index as a compile-time constant.
template <class F, int... I>
void dispatch_row_config(int index, F&& f, std::integer_sequence<int, I...>) {
  (void)((index == I ? (f.template operator()<I>(), true) : false) || ...);
}
template <class F>
void dispatch_row_config(int index, F&& f) {
  dispatch_row_config(index, std::forward<F>(f), std::make_integer_sequence<int, row_config_count>{});
}

// The compile-time schedule of size class `ConfigIndex` for rows of element type T.
template <int ConfigIndex, class T>
struct row_schedule {
  static constexpr row_config config = row_configs[ConfigIndex];
  static constexpr int threads_per_row = config.threads_per_row;
  static constexpr int rows_per_cta = config.rows_per_cta;
  static constexpr int cluster_ctas = config.cluster_ctas;
  static constexpr int cta_threads = threads_per_row * rows_per_cta;
  static constexpr bool warp_per_row = threads_per_row == warp_threads;
  static constexpr int group_elements = vector_elements<T>;
  using layout = row_layout<threads_per_row, config.elements_per_thread / group_elements, group_elements>;
  // Columns of one CTA's chunk, and of the whole row the schedule can hold.
  static constexpr int chunk_columns = layout::columns;
  static constexpr int max_columns = chunk_columns * cluster_ctas;

  static_assert(config.elements_per_thread % group_elements == 0,
                "elements_per_thread must be a multiple of the 16-byte vector (8 for bf16/fp16, 4 for fp32)");
  static_assert(max_columns >= config.max_cols,
                "row_configs: threads_per_row * elements_per_thread * cluster_ctas must cover max_cols");
  static_assert(warp_per_row || rows_per_cta == 1,
                "several rows per CTA only with a warp per row (a CTA-wide reduction would mix rows)");
  static_assert(cluster_ctas == 1 || !warp_per_row, "clusters split rows over whole CTAs, not warps");
  static_assert(cluster_ctas <= max_cluster_ctas, "at most 16 CTAs per cluster on sm_90");
  static_assert(cta_threads <= 1024, "a CTA has at most 1024 threads");

  // Grid size (CTAs) for `rows` rows.
  static int64_t grid_ctas(int64_t rows) {
    return warp_per_row ? ceil_div(rows, int64_t(rows_per_cta)) : rows * cluster_ctas;
  }

#if defined(__CUDACC__)
  // Where this thread sits: its row, its index among the threads of the row's chunk, and the
  // first column of its CTA's chunk.
  struct position {
    int64_t row;
    int thread;
    int chunk_start;
    bool leader;  // the one thread of the row that writes per-row outputs (loss, lse)
  };
  TILEKIT_DEVICE TILEKIT_INLINE static position locate() {
    if constexpr (warp_per_row) {
      return {int64_t(blockIdx.x) * rows_per_cta + warpid(), laneid(), 0, laneid() == 0};
    } else if constexpr (cluster_ctas == 1) {
      return {int64_t(blockIdx.x), int(threadIdx.x), 0, threadIdx.x == 0};
    } else {
      // Clusters are (cluster_ctas, 1, 1): cluster id = blockIdx.x / size, rank = blockIdx.x % size.
      const int rank = int(cluster::rank());
      return {int64_t(cluster::id_x()), int(threadIdx.x), rank * chunk_columns, rank == 0 && threadIdx.x == 0};
    }
  }

  // Shared memory for reductions of values of type V (nothing for a warp per row).
  struct empty_storage {};
  template <class V>
  using reduce_storage =
      std::conditional_t<warp_per_row, empty_storage,
                         std::conditional_t<(cluster_ctas > 1), cluster_reduce_scratch<cta_threads, V>,
                                            block_reduce_scratch<cta_threads, V>>>;

  // All threads, once, before the first reduce (cluster: barrier inits visible to the peers).
  template <class Storage>
  TILEKIT_DEVICE TILEKIT_INLINE static void begin(Storage& storage) {
    if constexpr (cluster_ctas > 1) cluster_reduce_init(storage);
  }
  // Reduce over the threads of the row (all of them must call it); every one gets the result.
  template <class Storage, class V, class Op>
  TILEKIT_DEVICE TILEKIT_INLINE static V reduce(V value, Op op, Storage& storage) {
    if constexpr (warp_per_row)
      return warp_reduce(value, op);
    else if constexpr (cluster_ctas > 1)
      return cluster_reduce<cta_threads>(value, op, storage);
    else
      return block_reduce<cta_threads>(value, op, storage.values);
  }
  // All threads, at the end: no CTA of a cluster exits while a peer may still write into its
  // shared memory (cluster.cuh exit rule).
  TILEKIT_DEVICE TILEKIT_INLINE static void end() {
    if constexpr (cluster_ctas > 1) cluster::sync();
  }
#endif
};

// Launch `kernel` with the grid of schedule S for `rows` rows, as clusters when S uses them.
template <class S, class... Params, class... Args>
void launch_rows(void (*kernel)(Params...), int64_t rows, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(unsigned(S::grid_ctas(rows)));
  launch.blockDim = dim3(unsigned(S::cta_threads));
  launch.dynamicSmemBytes = 0;
  launch.stream = stream;
  cudaLaunchAttribute attribute{};
  if constexpr (S::cluster_ctas > 1) {
    constexpr int portable_cluster_ctas = 8;
    if constexpr (S::cluster_ctas > portable_cluster_ctas) {
      // Clusters of 16 need the non-portable opt-in (HOPPER_NOTES 7.1); setting it every launch
      // is cheap and keeps the launch path free of static state.
      TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = unsigned(S::cluster_ctas);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    launch.attrs = &attribute;
    launch.numAttrs = 1;
  }
  TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(&launch, kernel, std::forward<Args>(args)...));
}

}  // namespace tilekit::kernels::detail
