// cross_entropy_reduce: the per-row losses folded into PyTorch's reduction='sum' / 'mean' in one
// launch (contract in cross_entropy.h).
//
// Why a kernel of its own: through PyTorch, `loss.sum() / (labels != ignore_index).sum()` and
// the cast to the input's dtype are six small launches, 17-28 us per call on an H200, i.e. 12-20%
// of a 2^28-element bf16 cross-entropy forward (docs/performance_log.md, "CE forward through
// PyTorch"). This is one launch, and its gradient scale stays on the device.
//
// Shape: one cluster of `ctas` CTAs (1..16, from `rows` alone: 4096 rows per CTA), each CTA a
// contiguous slice of the rows, each thread every reduce_threads-th row of its slice. A thread
// sums its losses in fp64 and counts its non-ignored labels; the CTA and then the cluster combine
// the (sum, count) partials with the reduction ladder of tilekit/ops/reduce.cuh (warp butterfly,
// shared memory, st.async into every peer). Which thread adds which row, and the order of every
// combine, depend on `rows` only: the result has the same bits in every run. In fp64 the sum's
// rounding error (at most rows x 2^-53 of the sum of magnitudes, rows <= max_rows = 2^27 - 1) stays
// below the fp32 result's own rounding, and the count is exact (32 bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>

#include "common/arg_checks.h"
#include "cross_entropy/cross_entropy.h"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/sync/cluster.cuh"

namespace tilekit::kernels {

namespace detail {
namespace {

// Launch shape (see the file comment). The losses were just written by the forward, so they come
// from L2, and what bounds the kernel is how many loads are in flight: H200, 2026-12-03, 262144
// rows (3 MB of losses and labels), 8 CTAs with 4 loads per thread in flight took 12.8 us (245
// GB/s); 16 CTAs (the largest, non-portable cluster) with 8 each are meant to take a quarter of it.
// Fewer rows take fewer CTAs (one batch of loads per thread each): a cluster's set-up and exit
// barrier cost ~3 us on their own (a 1-CTA reduction of 1024 rows: 3.1 us).
constexpr int reduce_threads = 512;
constexpr int reduce_batch = 8;  // rows a thread loads before it adds (loads in flight)
constexpr int reduce_max_ctas = 16;
constexpr int64_t reduce_rows_per_cta = reduce_threads * reduce_batch;  // one batch per thread

// One thread's (CTA's, cluster's) partial: 16 bytes, one st.async per CTA at the cluster level.
struct loss_count {
  double sum;
  uint32_t count;
  uint32_t unused;  // pads the partial to 16 bytes
};
struct loss_count_op {
  TILEKIT_DEVICE TILEKIT_INLINE loss_count operator()(loss_count a, loss_count b) const {
    return {a.sum + b.sum, a.count + b.count, 0u};
  }
};

struct reduce_params {
  const float* loss;       // nullptr: count only
  const int64_t* labels;   // nullptr: nothing to count (sum)
  int64_t rows;
  int64_t ignore_index;
  bool mean;
  void* out;               // out_type scalar (nullptr iff loss is)
  float* row_gradient;     // optional fp32 scalar
};

// Number of CTAs (the cluster size) for `rows` rows.
int reduce_ctas(int64_t rows) {
  return int(std::clamp<int64_t>(ceil_div<int64_t>(rows, reduce_rows_per_cta), 1, reduce_max_ctas));
}

template <class Out>
__global__ void __launch_bounds__(reduce_threads) reduce_losses_kernel(const reduce_params p) {
  __shared__ cluster_reduce_scratch<reduce_threads, loss_count> scratch;
  cluster_reduce_init(scratch);

  const int64_t ctas = cluster::size();
  const int64_t slice = ceil_div<int64_t>(p.rows, ctas);
  const int64_t begin = int64_t(cluster::rank()) * slice;
  const int64_t end = begin + slice < p.rows ? begin + slice : p.rows;
  const float* __restrict__ loss = p.loss;
  const int64_t* __restrict__ labels = p.labels;
  double sum = 0.0;
  uint32_t count = 0;
  // reduce_batch rows per thread and step, all loads issued before the first add (predicated,
  // no branch between them), so that each thread keeps that many loads in flight.
  for (int64_t first = begin + threadIdx.x; first < end; first += reduce_batch * reduce_threads) {
    float losses[reduce_batch];
    int64_t targets[reduce_batch];
#pragma unroll
    for (int k = 0; k < reduce_batch; ++k) {
      const int64_t r = first + k * reduce_threads;
      losses[k] = loss != nullptr && r < end ? loss[r] : 0.0f;
      targets[k] = labels != nullptr && r < end ? labels[r] : p.ignore_index;
    }
#pragma unroll
    for (int k = 0; k < reduce_batch; ++k) {
      sum += double(losses[k]);
      count += targets[k] != p.ignore_index ? 1u : 0u;
    }
  }
  const loss_count total = cluster_reduce<reduce_threads>(loss_count{sum, count, 0u}, loss_count_op{}, scratch);

  if (cluster::rank() == 0 && threadIdx.x == 0) {
    // mean: 0 / 0 = NaN when every row is ignored, and row_gradient = 1 / 0 = inf (PyTorch's
    // values); the gradient of ignored rows is 0 whatever it is multiplied by.
    const double value = p.mean ? total.sum / double(total.count) : total.sum;
    if (p.out) *static_cast<Out*>(p.out) = convert<Out>(float(value));
    if (p.row_gradient) *p.row_gradient = p.mean ? float(1.0 / double(total.count)) : 1.0f;
  }
  cluster::sync();  // exit rule (cluster.cuh): no CTA leaves while a peer may still send to it
}

// Clusters above 8 CTAs are an opt-in per kernel, on each device (HOPPER_NOTES 7.1): made once.
template <class Out>
void allow_wide_clusters() {
  static std::mutex mutex;
  static std::set<int> devices;
  int device = 0;
  TILEKIT_CHECK_CUDA(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (devices.count(device)) return;
  cluster::allow_wide(reduce_losses_kernel<Out>);
  devices.insert(device);
}

}  // namespace
}  // namespace detail

void validate(const cross_entropy_reduce_args& a) {
  TILEKIT_CHECK_ARG(a.reduction == cross_entropy_reduction::sum || a.reduction == cross_entropy_reduction::mean,
                    "reduction: must be sum or mean, got ", int(a.reduction));
  TILEKIT_CHECK_ARG(a.rows >= 0, "rows: must be >= 0, got ", a.rows);
  TILEKIT_CHECK_ARG(a.rows <= detail::max_rows, "rows: must be <= ", detail::max_rows, ", got ", a.rows);
  TILEKIT_CHECK_ARG(a.out != nullptr || a.row_gradient != nullptr,
                    "out: nothing to compute (give out with loss, or row_gradient, or both)");
  if (a.out) {
    detail::check_type(a.out_type, "out_type");
    detail::check_pointer(a.out, "out", dtype_bytes(a.out_type));
    // The inputs are read only when there are rows (an empty tensor may have no address).
    if (a.rows > 0) detail::check_pointer(a.loss, "loss", sizeof(float));
  } else {
    TILEKIT_CHECK_ARG(a.loss == nullptr, "loss: given without out (the sum would be written nowhere)");
  }
  if (a.row_gradient) detail::check_pointer(a.row_gradient, "row_gradient", sizeof(float));
  // A mean counts the labels (when there are rows); a sum may still be given them.
  if (a.labels != nullptr || (a.reduction == cross_entropy_reduction::mean && a.rows > 0))
    detail::check_pointer(a.labels, "labels", sizeof(int64_t));
}

void cross_entropy_reduce(const cross_entropy_reduce_args& a, cudaStream_t stream) {
  validate(a);
  const bool mean = a.reduction == cross_entropy_reduction::mean;
  const detail::reduce_params params{a.rows > 0 ? a.loss : nullptr,
                                     mean && a.rows > 0 ? a.labels : nullptr,
                                     a.rows,
                                     a.ignore_index,
                                     mean,
                                     a.out,
                                     a.row_gradient};
  const int ctas = detail::reduce_ctas(a.rows);
  cluster::launch_config config{unsigned(ctas), unsigned(detail::reduce_threads), unsigned(ctas), 0, stream};
  auto launch = [&]<class Out>() {
    if (ctas > 8) detail::allow_wide_clusters<Out>();
    TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(config.get(), detail::reduce_losses_kernel<Out>, params));
  };
  switch (a.out ? a.out_type : dtype::fp32) {
    case dtype::bf16: launch.template operator()<bf16>(); break;
    case dtype::fp16: launch.template operator()<fp16>(); break;
    default: launch.template operator()<float>(); break;
  }
}

}  // namespace tilekit::kernels
