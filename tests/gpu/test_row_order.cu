// The row kernel's item order (kernels/common/row_kernel.cuh, "Item order", "Paced order"):
// staged launches may claim their items from a per-stream counter instead of the static stride,
// or keep the static stride paced by that counter. Checked with a small row op of this file
// (y = x * scale[row], one visit count per row, a group reduction per row so that rows meet in
// barriers as real ops do), in a claiming and a paced version:
//   * the three orders, every size class of the default table (4 rows per warp .. 16K columns,
//     the clusters of 2 to 16 CTAs, whose rank 0 claims for the cluster and pushes the item
//     numbers into every CTA's table, and a misaligned matrix, which stays static), rows from 1
//     to several items per worker: every row written once with its own per-row scalar (the
//     scalars are fetched one item ahead from the table, so a wrong or stale table entry shows
//     up here);
//   * the counter is back at zero after every launch (the last CTA resets it);
//   * many launches back to back on one stream, with no host synchronization in between;
//   * a paced launch with three times more workers than can be resident completes (the CTAs
//     that run first stop waiting for the pace of CTAs that cannot start yet);
//   * launches on four streams at once, each with its own slot;
//   * under CUDA-graph capture the planner hands out no slot, and the captured launch (static
//     order) replays correctly;
//   * a big enough launch is claimed in automatic order (the planner's threshold).
// TILEKIT_TEST_SMALL=1 (for racecheck, which is too slow for the full sizes): every order and
// class with at most 2^20 elements per launch (1, 7 and 300 rows; the cluster classes 1 and
// 7), and the published table through 20000 uses instead of 200000 (still 625 turns of its
// 32 slots).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "common/row_kernel.cuh"

using namespace tilekit;
using namespace tilekit::testing;
namespace tkd = tilekit::kernels::detail;

namespace {

struct scale_params {
  const float* x;
  const float* scale;  // one per row
  float* y;
  float* sums;         // one per row: the row's sum of y (a group reduction)
  unsigned* visits;    // one per row: how often the row was computed
  int64_t rows;
  int cols;
  int64_t stride;
};

template <tkd::item_order Order>
struct scale_op_in : tkd::row_op_defaults {
  using element = float;
  using reduce_value = float;
  using params = scale_params;
  static constexpr int inputs = 1;
  TILEKIT_HOST_DEVICE static constexpr tkd::item_order item_order_for(tkd::row_config) { return Order; }
  struct row_scalars {
    float scale;
  };
  TILEKIT_HOST_DEVICE static row_source<float> source(const params& p, int) { return {p.x, p.stride}; }
#if defined(__CUDACC__)
  TILEKIT_DEVICE static row_scalars fetch(const params& p, int64_t row) { return {p.scale[row]}; }
  template <class S, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void row(const params& p, const tkd::row_place& at, int64_t row, row_scalars s,
                                         const tkd::stage_row<S> (&in)[1], const Ctx& ctx) {
    using layout = typename S::layout;
    const int cols = at.cols;
    float v[layout::elements];
    load_row_aligned<layout>(v, in[0], cols, at.thread);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < layout::elements; ++j) {
      v[j] *= s.scale;
      sum += v[j];  // padding columns load as 0
    }
    sum = ctx.reduce(sum, sum_op{});
    store_row<layout>(p.y + row * p.stride + at.col0, v, cols, at.thread);
    if (at.leader()) {
      p.sums[row] = sum;
      atomicAdd(&p.visits[row], 1u);
    }
  }
#endif
};
using scale_op = scale_op_in<tkd::item_order::claimed>;       // claims in every class
using paced_scale_op = scale_op_in<tkd::item_order::paced>;  // paced in every class

// One problem: inputs, outputs and the expected results (computed on the host).
struct problem {
  int64_t rows;
  int cols;
  int64_t stride;
  std::vector<float> x, scale;
  device_buffer<float> dx, dscale, dy, dsums;
  device_buffer<unsigned> dvisits;

  problem(int64_t rows_, int cols_, int64_t stride_, std::mt19937_64& rng)
      : rows(rows_), cols(cols_), stride(stride_),
        x(random_vector<float>(size_t(rows_ * stride_), rng)),
        scale(random_vector<float>(size_t(rows_), rng, 0.5f, 2.f)),
        dx(x), dscale(scale), dy(size_t(rows_ * stride_)), dsums(size_t(rows_)), dvisits(size_t(rows_)) {
    TILEKIT_CHECK_CUDA(cudaMemset(dvisits.get(), 0, size_t(rows) * sizeof(unsigned)));
    // The uploads and memsets above run on the legacy stream, which the test's non-blocking
    // streams do not wait for.
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  }
  scale_params params() const {
    return {dx.get(), dscale.get(), dy.get(), dsums.get(), dvisits.get(), rows, cols, stride};
  }
  // Every row once, y and the row sums right (fp32 products are exact-rounded: compare
  // element by element; the sums to a relative tolerance).
  void check(const std::string& what) const {
    const std::vector<float> y = dy.download(), sums = dsums.download();
    const std::vector<unsigned> visits = dvisits.download();
    int64_t bad_visits = 0, bad_values = 0, bad_sums = 0;
    for (int64_t r = 0; r < rows; ++r) {
      bad_visits += visits[size_t(r)] != 1u;
      double sum = 0;
      for (int c = 0; c < cols; ++c) {
        const float want = x[size_t(r * stride + c)] * scale[size_t(r)];
        bad_values += y[size_t(r * stride + c)] != want;
        sum += double(want);
      }
      bad_sums += std::abs(double(sums[size_t(r)]) - sum) > 1e-4 * (1.0 + std::abs(sum)) + 1e-6 * cols;
    }
    EXPECT_EQ(bad_visits, 0) << what << ": rows not computed exactly once";
    EXPECT_EQ(bad_values, 0) << what << ": wrong outputs (a row with another row's scalar?)";
    EXPECT_EQ(bad_sums, 0) << what << ": wrong row sums";
  }
};

// Launches the op in `order` on `stream` with an explicit claim slot (-1: static order).
void launch(const problem& pr, cudaStream_t stream, int slot, tkd::item_order order = tkd::item_order::claimed) {
  const scale_params p = pr.params();
  if (order == tkd::item_order::paced)
    tkd::launch_rows_in_order<paced_scale_op>(p, tkd::plan_rows<paced_scale_op>(p), stream, slot);
  else
    tkd::launch_rows_in_order<scale_op>(p, tkd::plan_rows<scale_op>(p), stream, slot);
}

// The counter of `slot` as this file's kernels see it (each translation unit has its own
// array; the kernels above are instantiated here).
tkd::row_claim_counter read_counter(int slot) {
  tkd::row_claim_counter c{~0u, ~0u};
  TILEKIT_CHECK_CUDA(cudaMemcpyFromSymbol(&c, tkd::row_claim_counters, sizeof(c), size_t(slot) * sizeof(c)));
  return c;
}

struct stream_owner {
  cudaStream_t stream = nullptr;
  stream_owner() { TILEKIT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~stream_owner() { cudaStreamDestroy(stream); }
};

class RowOrder : public GpuTest {};

// Columns per size class of the default table (fp32: 4 columns per 16 bytes), the cluster
// classes (dealt evenly: 200000 columns over 16 CTAs of up to 16384 hold 12512 each but the
// last, 12320) and rows that are not 16-byte aligned (a shifted stream: static order, paced for
// the paced op; a claimed launch of it must leave the slot alone).
struct shape {
  int cols;
  int64_t stride;
};
const shape shapes[] = {{100, 100}, {1000, 1000}, {2000, 2004}, {3000, 3000}, {8000, 8000},
                        {16000, 16000}, {20000, 20000}, {40000, 40000}, {100000, 100004},
                        {200000, 200000}, {1001, 1001}};

TEST_F(RowOrder, EveryOrderComputesEveryRowOnce) {
  std::mt19937_64 rng(test_seed());
  stream_owner s;
  const int slot = tkd::row_claim_slot(s.stream);
  ASSERT_GE(slot, 0);
  struct variant {
    int slot;
    tkd::item_order order;
    const char* name;
  };
  const variant variants[] = {{-1, tkd::item_order::fixed, " static"},
                              {slot, tkd::item_order::claimed, " claimed"},
                              {slot, tkd::item_order::paced, " paced"}};
  const int64_t max_elements = int64_t(1) << (small_problems() ? 20 : 26);
  for (const shape& sh : shapes)
    for (int64_t rows : {int64_t(1), int64_t(7), int64_t(300), int64_t(5000)}) {
      if (int64_t(sh.cols) * rows > max_elements) continue;
      for (const variant& v : variants) {
        problem pr(rows, sh.cols, sh.stride, rng);
        launch(pr, s.stream, v.slot, v.order);
        TILEKIT_CHECK_CUDA(cudaStreamSynchronize(s.stream));
        pr.check("cols=" + std::to_string(sh.cols) + " rows=" + std::to_string(rows) + v.name);
        const tkd::row_claim_counter c = read_counter(slot);
        EXPECT_EQ(c.next, 0u) << "counter not reset, cols=" << sh.cols << " rows=" << rows;
        EXPECT_EQ(c.done, 0u) << "counter not reset, cols=" << sh.cols << " rows=" << rows;
      }
    }
}

// Several items per worker (stages refilled), launches back to back in one order.
void back_to_back(tkd::item_order order) {
  std::mt19937_64 rng(test_seed());
  stream_owner s;
  const int slot = tkd::row_claim_slot(s.stream);
  ASSERT_GE(slot, 0);
  std::vector<problem> problems;
  for (int i = 0; i < 12; ++i)
    problems.emplace_back(int64_t(3000 + 797 * i), (i % 2) ? 1000 : 3000, (i % 2) ? 1000 : 3000, rng);
  for (int i = 0; i < 4; ++i)  // clusters of 2 and 4 CTAs, several items per cluster
    problems.emplace_back(int64_t(700 + 97 * i), (i % 2) ? 20000 : 60000, (i % 2) ? 20000 : 60000, rng);
  // Shifted streams (rows not 16-byte aligned) in between: a warp per row, and clusters of 2.
  problems.emplace_back(int64_t(2500), 1001, 1003, rng);
  problems.emplace_back(int64_t(600), 20001, 20001, rng);
  for (const problem& pr : problems)  // no synchronization in between
    launch(pr, s.stream, order == tkd::item_order::fixed ? -1 : slot, order);
  TILEKIT_CHECK_CUDA(cudaStreamSynchronize(s.stream));
  for (size_t i = 0; i < problems.size(); ++i) problems[i].check("launch " + std::to_string(i));
  EXPECT_EQ(read_counter(slot).next, 0u);
}
TEST_F(RowOrder, BackToBackLaunchesShareTheStreamsCounter) { back_to_back(tkd::item_order::claimed); }
TEST_F(RowOrder, BackToBackPacedLaunchesShareTheStreamsCounter) { back_to_back(tkd::item_order::paced); }
TEST_F(RowOrder, BackToBackLaunchesInStaticOrder) { back_to_back(tkd::item_order::fixed); }

// A paced launch whose workers cannot all be resident: 3x the resident workers, so the CTAs
// that start first wait for the pace of CTAs that can only start once they exit. They must give
// up waiting (the patience), or the launch would never end. One CTA-wide class (8000 columns)
// and a cluster class (40000 columns over 4 CTAs).
TEST_F(RowOrder, PacedLaunchCompletesWhenNotEveryWorkerIsResident) {
  std::mt19937_64 rng(test_seed());
  stream_owner s;
  const int slot = tkd::row_claim_slot(s.stream);
  ASSERT_GE(slot, 0);
  for (int cols : {8000, 40000}) {
    problem pr((int64_t(1) << 24) / cols, cols, cols, rng);  // ~64 MiB of fp32 rows
    const scale_params p = pr.params();
    tkd::row_launch plan = tkd::plan_rows<paced_scale_op>(p);
    ASSERT_EQ(plan.order, tkd::item_order::paced);
    plan.workers = std::min(plan.items, 3 * plan.workers);
    tkd::launch_rows_in_order<paced_scale_op>(p, plan, s.stream, slot);
    TILEKIT_CHECK_CUDA(cudaStreamSynchronize(s.stream));
    pr.check("cols=" + std::to_string(cols) + ", 3x resident workers");
    EXPECT_EQ(read_counter(slot).next, 0u);
    EXPECT_EQ(read_counter(slot).done, 0u);
  }
}

TEST_F(RowOrder, ConcurrentStreamsHaveTheirOwnSlots) {
  std::mt19937_64 rng(test_seed());
  std::vector<stream_owner> streams(4);
  std::vector<int> slots;
  for (const auto& s : streams) slots.push_back(tkd::row_claim_slot(s.stream));
  for (size_t i = 0; i < slots.size(); ++i) {
    ASSERT_GE(slots[i], 0);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(slots[i], slots[j]) << "two streams share a claim slot";
    EXPECT_EQ(tkd::row_claim_slot(streams[i].stream), slots[i]) << "a stream's slot changed";
  }
  std::vector<problem> problems;
  for (size_t i = 0; i < 3 * streams.size(); ++i) problems.emplace_back(int64_t(8000 + 331 * i), 1000, 1000, rng);
  for (size_t i = 0; i < problems.size(); ++i) launch(problems[i], streams[i % streams.size()].stream, slots[i % streams.size()]);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  for (size_t i = 0; i < problems.size(); ++i) problems[i].check("stream " + std::to_string(i % streams.size()));
  for (int slot : slots) EXPECT_EQ(read_counter(slot).next, 0u);
}

TEST_F(RowOrder, GraphCaptureKeepsTheStaticOrder) {
  std::mt19937_64 rng(test_seed());
  stream_owner s, other;
  problem pr(int64_t(40000), 1000, 1000, rng);  // claimed in automatic order outside capture
  const scale_params p = pr.params();
  const tkd::row_launch plan = tkd::plan_rows<scale_op>(p);
  ASSERT_EQ(plan.order, tkd::item_order::claimed);
  cudaGraph_t graph = nullptr;
  TILEKIT_CHECK_CUDA(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  const int slot_in_capture = tkd::row_claim_slot(s.stream);
  tkd::launch_rows<scale_op>(p, plan, s.stream);
  TILEKIT_CHECK_CUDA(cudaStreamEndCapture(s.stream, &graph));
  EXPECT_EQ(slot_in_capture, -1) << "a captured launch must not claim (the graph may run on any stream)";
  cudaGraphExec_t exec = nullptr;
  TILEKIT_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TILEKIT_CHECK_CUDA(cudaGraphLaunch(exec, other.stream));
  TILEKIT_CHECK_CUDA(cudaStreamSynchronize(other.stream));
  pr.check("graph replay");
  TILEKIT_CHECK_CUDA(cudaGraphExecDestroy(exec));
  TILEKIT_CHECK_CUDA(cudaGraphDestroy(graph));
}

TEST_F(RowOrder, AutomaticOrderClaimsBigLaunchesOnly) {
  stream_owner s;
  std::mt19937_64 rng(test_seed());
  // 1000 fp32 columns: a warp per row, 16 rows per item; 40000 rows are ~19 items per worker
  // on 132 SMs, 4000 rows ~2.
  problem big(int64_t(40000), 1000, 1000, rng), small(int64_t(4000), 1000, 1000, rng);
  const tkd::row_launch big_plan = tkd::plan_rows<scale_op>(big.params());
  const tkd::row_launch small_plan = tkd::plan_rows<scale_op>(small.params());
  ASSERT_EQ(big_plan.order, tkd::item_order::claimed);
  ASSERT_EQ(small_plan.order, tkd::item_order::claimed);
  if (tkd::row_order_setting() == tkd::row_order::automatic) {
    EXPECT_GE(tkd::row_claim_slot(big_plan, s.stream), 0);
    EXPECT_EQ(tkd::row_claim_slot(small_plan, s.stream), -1);
  }
  tkd::launch_rows<scale_op>(big.params(), big_plan, s.stream);
  tkd::launch_rows<scale_op>(small.params(), small_plan, s.stream);
  TILEKIT_CHECK_CUDA(cudaStreamSynchronize(s.stream));
  big.check("big");
  small.check("small");
}

}  // namespace

// The published table of a cluster (row_item_order with Ranks > 1) on its own: rank 0 pushes
// the items of uses 0 .. uses - 1 (full 32-bit values), 8 uses ahead, while every thread of
// every CTA reads each use's item and counts wrong values; thread 0 of each CTA re-arms a slot
// once it has read it (visit). A cluster barrier every 16 uses keeps rank 0 less than 32 uses
// ahead of the slowest reader (what the row reductions do in the kernel). A reader that takes an
// entry before it landed, or the entry of another use, counts; one that waits for an entry that
// never comes hangs (the test's timeout).
namespace published_table {
constexpr int ranks = 4;
constexpr int lead = 8;
__host__ __device__ inline unsigned item_of_use(uint32_t use) { return use * 2654435761u ^ 0x9E3779B9u; }

__global__ void __cluster_dims__(ranks, 1, 1) poll_kernel(unsigned* wrong, uint32_t uses) {
  using order_t = tkd::row_item_order<3, true, ranks>;
  __shared__ order_t::table_t table;
  order_t order{table, 0, 0, 1};
  if (threadIdx.x == 0) order.start();
  init_barriers_fence();
  cluster::sync();
  const bool writer = cluster::rank() == 0 && threadIdx.x == 0;
  if (writer)
    for (uint32_t u = 0; u < uint32_t(lead); ++u) order.put(u, item_of_use(u));
  unsigned bad = 0;
  for (uint32_t u = 0; u < uses; ++u) {
    if (writer && u + lead < uses) order.put(u + lead, item_of_use(u + lead));
    bad += uint32_t(order.item_of(u)) != item_of_use(u);
    if (threadIdx.x == 0) order.rearm(u);  // arm use u + 32
    if (u % 16 == 15) cluster::sync();
  }
  if (bad) atomicAdd(wrong, bad);
  cluster::sync();
}
}  // namespace published_table

TEST_F(RowOrder, PublishedTableDeliversEveryItem) {
  device_buffer<unsigned> wrong(1);
  TILEKIT_CHECK_CUDA(cudaMemset(wrong.get(), 0, sizeof(unsigned)));
  published_table::poll_kernel<<<dim3(132 / published_table::ranks * published_table::ranks), dim3(128)>>>(
      wrong.get(), small_problems() ? 20000u : 200000u);
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(wrong.download()[0], 0u) << "a reader took an entry that was not the item of its use";
}
