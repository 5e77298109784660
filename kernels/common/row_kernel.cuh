#pragma once
// The persistent row kernel behind every memory-bound kernel of the library (norms, softmax,
// cross-entropy): size-class tables, one loop, and per-kernel "row ops" that hold only the
// math of one row (internal header of kernels/).
//
// Plan. A fixed set of workers (CTAs of 512 threads, or clusters of such CTAs for wide rows)
// walks over work items of consecutive rows. Each item's rows flow through a row_stream
// (tilekit/pipeline/row_stream.cuh): bulk copies fill a ring of shared-memory stages
// `stages - 1` items ahead of the one being computed, so HBM sees a constant queue of reads
// while the CTA reduces and writes. Inside an item, a row is handled by a GROUP of
// `group_threads` threads (a warp, several warps, the CTA, or the CTA's share of a cluster);
// each thread owns `elements_per_thread` columns laid out by tilekit::row_layout (16-byte
// groups dealt round-robin: conflict-free shared reads and coalesced global writes), and the
// row is reduced with the ladder of tilekit/ops/reduce.cuh.
//
//   class | max cols | group threads | rows/group | cluster | elements/thread | row reduction
//   ------+----------+---------------+------------+---------+-----------------+----------------------
//     0   |     256  |  32 (warp)    |      4     |    1    |        8        | warp shuffles
//     1   |    1024  |  32 (warp)    |      1     |    1    |       32        | warp shuffles
//     2   |    2048  |      64       |      1     |    1    |       32        | named barrier per group
//     3   |    4096  |     128       |      1     |    1    |       32        | named barrier per group
//     4   |    8192  |     256       |      1     |    1    |       32        | named barrier per group
//     5   |   16384  |     512       |      1     |    1    |       32        | CTA (__syncthreads)
//     6   |   32768  |     512       |      1     |    2    |       32        | cluster (DSMEM)
//     7   |   65536  |     512       |      1     |    4    |       32        | cluster
//     8   |  131072  |     512       |      1     |    8    |       32        | cluster
//     9   |  262144  |     512       |      1     |   16    |       32        | cluster (non-portable)
//
// That is default_row_table; an op may declare another (packed_row_table, wide_row_table below:
// 64 columns per thread for 16-bit rows held as packed pairs).
//
// Why these numbers: a CTA always has 512 threads and the whole SM (the stages take most of
// the shared memory), so an item is 512 threads x 32 columns: 32 KiB of bf16 per input, with
// 16 rows of 1K or 1 row slice of 16K. 32 fp32 registers per thread and input keep a row in
// registers under the 128-register cap of 512 threads; wide rows add CTAs (a cluster), not
// registers. Clusters cost SMs, though: on the H200 only 30 clusters of 4, 15 of 8 and 7 of 16
// are co-resident (120, 120 and 112 of the 132 SMs; clusters of 2 use all of them;
// cudaOccupancyMaxActiveClusters, 2026-12-02; clusters of 5, the CE classes of 131073-163840
// columns, not measured), so a class that can take 64 columns per thread
// instead (the 16-bit tables below) halves its cluster and may gain SMs as well. (A row's CTAs
// as any CTAs of a cooperative launch, exchanging through L2 instead, ran the LayerNorm forward
// at 0.86-0.98x of its clusters at 64K-256K, and 0.87-0.91x even with no wait at all:
// docs/performance_log.md, "Spread rows". Such groups only on the SMs the clusters leave, beside
// the clusters, gained at 256K alone and only below a sharp limit: "Hybrid rows".) A cluster
// deals its row out evenly (row_cluster_span: at 50304 columns over 4 CTAs of up to 16384,
// 12576 each), not as whole chunks with the rest in the last CTA (16384 x 3 + 1152), so that each
// SM streams as many bytes of the row as its peers. Rows <= 256
// columns use 8 columns per thread and 4 rows per warp, so that a stage still holds 64 rows.
// Stages: as many as fit in `stream_budget_bytes` (minus what the op keeps in shared memory),
// at most max_stream_stages (8) or the op's max_stages(config), e.g. 7 x 32 KiB for bf16
// softmax at 1K-16K, 3 x 64 KiB for two bf16 inputs. Three stages in flight is ~96-192 KiB per
// SM, several times what HBM latency needs; more is not always faster (H200, 2026-12-04: the
// softmax forward's deferred rows gained up to 1% with two stages of 64 KiB instead of three,
// the LayerNorm forward at 256K lost 2.2% with three of 32 KiB instead of two, the
// cross-entropy forward's deferred and streamed rows lost 1.7-3% with two instead of three).
//
// Item order. Workers that take items in a fixed stride (worker w: w, w + W, w + 2W, ...) drift
// apart over a long launch, and the items in flight spread over an ever wider stretch of the
// matrix; measured on the H200, such persistent copies reach ~0.90x of cudaMemcpy, the same
// copies taking their items IN ORDER from a global counter ~0.94-0.95x (bench_row_stream:
// BM_bulk_copy vs BM_ordered_bulk_copy). So staged launches of ops without per-worker results
// may CLAIM their items (a second instantiation, row_kernel<..., Claimed = true>, so that the
// static kernel carries none of it): thread 0 of each CTA takes the next item number from a
// counter with an atomic add (row_item_order below: claims run stages + 2 uses ahead and each
// atomic's latency is hidden behind one item; the claimed numbers reach the other threads
// through the stages' barriers). In a cluster, thread 0 of rank 0 claims for the cluster and
// pushes each item number into every peer's table (row_item_order, "published"); each CTA
// still loads its own chunks. The counter is a slot of a per-stream array
// (row_claim_counters: a stream's launches run one after the other, so they can share one), and
// the launch's last claimer resets it, so no launch needs a memset or a workspace. Launches under
// CUDA-graph capture, and small ones (below row_claim_min_items_per_worker items per worker),
// keep the static order; TILEKIT_ROW_ORDER overrides it for measurements and tests (row_order
// below).
//
// Paced order. Claims cannot serve ops with per-worker results (the norm backward: each
// worker's partial dw must sum the same rows in every run, or dw is not deterministic), but the
// static order can be kept from drifting: every CTA counts its visits (its items started) on
// the same counter, and a CTA starts its u-th item only once the CTAs have started
// u - row_pace_quarters / 4 items each on average (row_item_order, static order with a slot).
// The items, and every result, are those of the static order; only the timing changes. Copies
// paced so (bench_row_stream, BM_paced_bulk_copy; H200, 2026-12-01) reach what claimed copies
// reach (0.95x against 0.94-0.95 claimed, 0.89 static); looser paces lose it gradually (1.5 items
// 0.94, 2 items 0.93, 3 items 0.91). Since the wait is only a hint, it gives up after
// row_pace_patience_polls: a launch whose CTAs are not all resident (a GPU shared with other
// kernels or MPS clients) must not wait forever for CTAs that cannot start.
//
// Which order a size class takes is the op's choice (item_order_for(config), from measurements;
// row_op_defaults: claimed for one CTA per worker, static for clusters). Same-binary A/Bs on the
// H200, bf16, x copy: claims lifted RMSNorm / LayerNorm / softmax forward at 1K-32K by 2-6%
// (0.87-0.89 -> 0.90-0.93) and the softmax and cross-entropy backward by 2-5% (2026-11-30);
// cluster classes claim where the op measured it faster (softmax forward 128K 0.870 -> 0.901,
// softmax backward 32K-128K 0.93-0.97 -> 0.985-0.990, RMSNorm forward 64K 0.886 -> 0.933;
// RMSNorm 256K on clusters of 16 lost, 0.923 -> 0.781; 2026-12-01). The cross-entropy
// forwards measured 2-16% SLOWER claimed (cause not known; they run at the 128-register cap).
// Paced (2026-12-01, 06:11 UTC): RMSNorm backward 1K-16K 0.88 -> 0.92-0.93, LayerNorm backward
// 1K-8K 0.75 / 0.85 / 0.84 -> 0.76 / 0.87 / 0.87 (16K 0.838 -> 0.828: static), the
// cross-entropy forward with dlogits 4K-32K 0.87 -> 0.88-0.90, its backward on clusters
// (32K-256K) 0.85-0.89 -> 0.90-0.92; but every norm forward and norm backward cluster class,
// the softmax forward and the cross-entropy forward without dlogits lost (up to 25%: a paced
// cluster waits in lock-step for each of its CTAs' paces), so those keep their orders.
//
// Stage release. With several row groups per CTA, the last warp out of a stage refills it
// (see the loop). Its bulk copies must come after every thread's reads of the stage. By
// default each warp fences its reads (__syncwarp, then fence.cta in lane 0) before counting
// itself out with a shared atomic, and the last warp fences again after its count: correct
// under the PTX memory model, and the fastest order measured, but compute-sanitizer's
// racecheck does not follow fences and atomics and reports each refill as a race (TMA write vs
// the previous lap's ld.shared). Built with TILEKIT_CHECKABLE_RELEASE=1 (CMake option of the
// same name), every thread arrives on the stage's empty mbarrier instead and the last warp
// waits on it: the order racecheck follows (0 hazards, H200, 2026-11-30: tests RowOrder,
// softmax forward claimed at every width), which is also correct but measured 2-8% slower in
// the cross-entropy forward at 1K-16K (same-run A/B) and ~15% in the LayerNorm backward at 1K
// (against the previous table; it also doubles that kernel's spills), unchanged elsewhere
// (the cause in detail is not established). Two cheaper candidates did not satisfy
// racecheck: lane 0 arriving for its warp after __syncwarp, and bar.arrive / bar.sync on a
// named barrier per stage (it still reported the refills, and also hazards in the
// named-barrier group reductions); the named barrier was still 4-9% slower than the fenced
// count at 1K, 4K and 16K. So: the fenced count in production, the mbarrier build to check the
// rest of the kernel's shared-memory protocol.
//
// Unaligned matrices. Bulk copies need 16-byte aligned rows (row_stream.cuh); when a streamed
// matrix has a base address, a row stride or a row length that is not a multiple of 16 bytes,
// the same ops run on a SHIFTED stream (row_kernel<..., Aligned = false>): the same loop, ring and
// item order, but each row chunk is bulk-copied as the 16-byte units that hold it and lands in
// its stage row as it lies in global memory, `shift` elements past a unit boundary (the stage
// rows are one unit longer). The op then gets a shifted_row for each input instead of a pointer
// (stage_row<S>), and load_row_aligned / load_row_pairs_aligned realign each 16-byte group from
// the two units it straddles (tilekit/ops/row_io.cuh), so an op's code is the same for both.
// (A reduction may read either kind order-free instead, load_row_unordered /
// load_row_pairs_unordered: a shifted row's units as they lie, no realignment.)
// Shifted launches keep the static (or paced) order: a claimed variant would be one more kernel
// per class. (Until 2026-12-04 such matrices took a direct path: one CTA per item copying its
// rows with ordinary loads, no prefetch, 0.11-0.40x of copy: docs/performance_log.md, "Unaligned
// rows".)
//
// A row op is a struct with (see the kernels' .cu files for real ones; row_op_defaults below
// supplies the ones marked *):
//   using element = T;                            streamed matrices' element type
//   using reduce_value = V;                       what its reductions combine (float, exp2_sum..)
//   using params = P;                             kernel parameters, with `rows` and `cols`
//   static constexpr int inputs = K;              streamed matrices
// * static constexpr const row_table& table;     its size classes (default_row_table)
// * static constexpr bool per_worker_results;     end() writes one result per worker
// * static constexpr size_t shared_bytes(row_config);  its own dynamic shared memory
//   static row_source<T> source(const P&, int i);       streamed matrix i (base, row stride)
// * struct row_scalars; static row_scalars fetch(const P&, int64_t row);  per-row inputs
//                                                 (labels, saved statistics), fetched ahead
// * template <class S> void begin(const P&, const row_place&, void* shared);  per-thread state
//   template <class S, class Ctx>
//   void row(const P&, const row_place&, int64_t row, row_scalars, const stage_row<S> (&in)[K], const Ctx&);
// * template <class S> void end(const P&, const row_place&, void* shared);    per-worker results
// `in[i]` (a stage_row<S>) is this CTA's chunk of row `row` of matrix i in shared memory: a
// 16-byte aligned pointer, or a shifted_row for unaligned matrices; read it with
// load_row_aligned / load_row_pairs_aligned (`in[i] + offset` with offset a multiple of the
// 16-byte vector, and `in[i][column]`, work for both); ctx.reduce(value, op) reduces over the
// row's group.
//
// Deferred rows (an op whose `deferred_rows(config)` is true for a size class): besides row(),
// which the other classes use, the op splits its row in two halves,
//   template <class S> struct pending { ... };        what finish() needs of a row (e.g. the
//                                                      row itself, as packed pairs)
//   template <class S> reduce_value partial(const P&, const row_place&, int64_t row, row_scalars,
//                                           const stage_row<S> (&in)[K], pending<S>&);   a warp-uniform partial
//   template <class S> R total(const P&, const reduce_value* partials, uint32_t count) const;
//                                                      the row's total from its warps' partials
//                                                      (or its CTAs': combines_ctas_first)
//   template <class S> void finish(const P&, const row_place&, int64_t row, const pending<S>&,
//                                  R total);           the row's outputs
// (and optionally template <class S> keep(const P&, const row_place&, const stage_row<S> (&in)[K],
// pending<S>&), with keeps_stage = true, called after the previous row is finished, for what
// finish() needs of the row but partial() need not keep: two rows' pending states are then
// never live at once; streamed rows pass their last segment's stage; and, for clusters,
// combine(): see row_op_defaults::combines_ctas_first)
// and the kernel finishes each row one row later: every WARP posts its partial of row r
// (posted_reduce_post, tilekit/ops/reduce.cuh: into every CTA's slots, no CTA barrier),
// finishes row r - 1 (waiting for that row's partials only), then moves on; the stage is
// released warp by warp too (see the loop), after that, or, for ops that opt in
// (releases_early), as soon as partial() has read it: an op that writes the row (a norm's y)
// keeps what it needs in `pending`, in registers. So the warps of a row --
// 4 to 16 of a CTA, times the CTAs of a cluster -- never wait for each other in lock-step: a
// slow warp's or a slow CTA's partial is collected one row later, while everyone computes the
// next row. Rows of fewer warps are not deferred (a warp's butterfly completes when it ends,
// and rows of 2 warps measured slower deferred: holding a row's state across the next one
// costs registers; row_defer_min_warps).
//
// Streamed rows (size classes with row_config::segments > 1). An op whose rows end in a
// reduction only (the cross-entropy forward without dlogits: loss and lse) does not need its
// row at once. Its wide rows need not be split over a cluster: one group (of 4 warps or more)
// reads the row as `segments` chunks (segments), one after the other, each in a stage of the
// ring: a deferred op's partial() is called once per segment (row_place::col0 is the segment's
// first column, row_place::segment its index and row_place::segments the row's count; segments
// past the row's end are skipped). `pending` carries over the segments (partial() of segment 0
// starts it, later ones add to it: e.g. each thread's running statistics), and the value
// partial() returns for the row's LAST segment is the warp's partial of the whole row, posted
// as for any deferred row (the others are ignored). A row's warps then meet once per row and
// never wait for other CTAs, and every SM streams rows of its own (clusters must be
// co-resident: only 7 clusters of 16 fit on 132 SMs). Measured on the H200 (CE forward, bf16,
// 2026-11-30, same-run A/Bs): clusters -> streamed rows 0.78 -> 0.92 at 64K, 0.70 -> 0.96 at
// 256K (docs/performance_log.md, "Streamed rows"). Segmented classes are
// deferred, of one row per group, never clustered, and keep the static item order (claimed:
// 0.885 -> 0.835 at 32K; and visiting each row's segments in a rotated order, so that the
// workers read different segments at once, measured 7-8% slower at 32K-128K).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tilekit/core/device.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/reduce.cuh"
#include "tilekit/ops/row_io.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/pipeline/row_stream.cuh"
#include "tilekit/pipeline/stage_ring.cuh"

namespace tilekit::kernels::detail {

// How a launch's workers take their items ("Item order", "Paced order" above): the static
// stride, claimed from a counter, or the static stride paced by a counter.
enum class item_order { fixed, claimed, paced };

struct row_config {
  // Zero-initialised where a table leaves a class out (row_table::configs past count): nvcc
  // rejects a constexpr table whose trailing members are left uninitialised.
  int max_cols = 0;
  int group_threads = 0;
  int rows_per_group = 0;
  int cluster_ctas = 0;
  int elements_per_thread = 0;
  // 16-bit rows held in registers as packed pairs (bf16x2 / f16x2), half a register per column:
  // only in the 16-bit tables below (packed_rows<S>).
  bool pairs = false;
  // Streamed rows (see "Streamed rows" above): the group reads its row as `segments` chunks of
  // group_threads x elements_per_thread columns, one after the other.
  int segments = 1;
};

inline constexpr int row_cta_threads = 512;
// Rows of fewer warps are not deferred (see "Deferred rows"): measured on the H200 (CE forward,
// 2026-11-30), rows of 2 warps lost 5% deferred (4K columns: 0.971 -> 0.923x copy), while 4 warps
// (8K) were even and 8-16 warps and clusters gained (16K 0.85 -> 0.91, 256K 0.66 -> 0.69).
inline constexpr int row_defer_min_warps = 4;

// Stage release of staged launches with several row groups per CTA (see "Stage release").
#ifndef TILEKIT_CHECKABLE_RELEASE
#define TILEKIT_CHECKABLE_RELEASE 0
#endif
inline constexpr bool row_checkable_release = TILEKIT_CHECKABLE_RELEASE != 0;
inline constexpr int64_t row_max_cols = 262144;

// Columns per CTA of a row of `cols` columns dealt over a cluster of `ctas` CTAs: an even share,
// rounded up to row_span_granule columns, so that every CTA's first column keeps the row's
// 16-byte alignment in every array indexed by column (64 bytes of fp32, 32 of a 16-bit row:
// inputs, outputs, the norms' fp32 weights). The last CTA takes what is left. At most the chunk
// of the class (a multiple of the granule) for the columns of its class. E.g. 50304 columns over
// 4 CTAs of 16384: 12576 each, instead of 16384 x 3 + 1152, which left one SM of the four nearly
// idle.
inline constexpr int row_span_granule = 16;
TILEKIT_HOST_DEVICE constexpr int row_cluster_span(int cols, int ctas) {
  return (cols + ctas * row_span_granule - 1) / (ctas * row_span_granule) * row_span_granule;
}
// Room for three classes more than the ten power-of-two classes (with_class_inserted below).
inline constexpr int max_row_configs = 13;

// A size-class table: classes by increasing max_cols, the last one covering row_max_cols.
struct row_table {
  row_config configs[max_row_configs];
  int count;
  // Index of the size class for `cols` (1 <= cols <= row_max_cols, checked by the caller).
  constexpr int index(int64_t cols) const {
    for (int i = 0; i < count; ++i)
      if (cols <= configs[i].max_cols) return i;
    return count - 1;
  }
  // What every table an op declares must be (static_asserts beside the tables,
  // tests/cpu/test_row_spans.cu): 1..max_row_configs classes by strictly increasing max_cols, the
  // last at row_max_cols, each class's layout (group x elements x cluster x segments) holding its
  // max_cols, a cluster only for rows of one group per CTA, and at most 16 CTAs (the non-portable
  // cluster maximum). Not the whole rule set: row_schedule's static_asserts check the rest where
  // a class is instantiated (whole warps per group, streamed classes without clusters). Parts of
  // a table (classes_between) end below row_max_cols and are exempt.
  constexpr bool well_formed() const {
    if (count < 1 || count > max_row_configs || configs[count - 1].max_cols != row_max_cols) return false;
    for (int i = 0; i < count; ++i) {
      const row_config& c = configs[i];
      if (c.max_cols < 1 || c.group_threads < 1 || c.rows_per_group < 1 || c.elements_per_thread < 1 ||
          c.segments < 1 || c.cluster_ctas < 1 || c.cluster_ctas > 16)
        return false;
      if (i > 0 && c.max_cols <= configs[i - 1].max_cols) return false;
      if (int64_t(c.group_threads) * c.elements_per_thread * c.cluster_ctas * c.segments < c.max_cols) return false;
      if (c.cluster_ctas > 1 && c.group_threads != row_cta_threads) return false;
    }
    return true;
  }
};

// The table above: every op's, unless it declares its own (row_op_defaults::table).
inline constexpr row_table default_row_table = {{
                                                    {256, 32, 4, 1, 8},
                                                    {1024, 32, 1, 1, 32},
                                                    {2048, 64, 1, 1, 32},
                                                    {4096, 128, 1, 1, 32},
                                                    {8192, 256, 1, 1, 32},
                                                    {16384, 512, 1, 1, 32},
                                                    {32768, 512, 1, 2, 32},
                                                    {65536, 512, 1, 4, 32},
                                                    {131072, 512, 1, 8, 32},
                                                    {262144, 512, 1, 16, 32},
                                                },
                                                10};

// Two more tables, for 16-bit rows only (a stage of 512 x 64 fp32 would be 128 KiB: one stage).
// 64 columns per thread spread a thread's per-row work (reductions, labels, control) over twice
// the elements and halve the cluster of wide rows; a stage is 512 x 64 x 2 bytes = 64 KiB (3
// stages). Such rows stay in registers as packed pairs (row_config::pairs: 32 registers for 64
// columns), so ops that write the row recompute what they need from the pairs in the output
// pass.
//
// packed_row_table, pairs from 1K columns on (e.g. the cross-entropy forward without dlogits: a
// pure reduction, instruction-bound at 32 columns per thread, where pairs take the max with
// one HMNMX2 per two columns), and wide_row_table, the default table up to 16K columns and 64
// columns per thread from 32K on (softmax forward and the cross-entropy forward with dlogits,
// which recompute the exponentials: more instructions per element, worth it only where the
// cluster reduction dominates). P: held as pairs.
//
//   class | max cols | packed_row_table             | wide_row_table
//         |          | group thr. cluster elements  | group thr. cluster elements
//   ------+----------+------------------------------+-----------------------------
//     0   |     256  |  32 x 4 rows  1      8       |  32 x 4 rows  1      8
//     1   |    1024  |  32           1     32 P     |  32           1     32
//     2   |    2048  |  32           1     64 P     |  64           1     32
//     3   |    4096  |  64           1     64 P     | 128           1     32
//     4   |    8192  | 128           1     64 P     | 256           1     32
//     5   |   16384  | 256           1     64 P     | 512           1     32
//     6   |   32768  | 512           1     64 P     | 512           1     64 P
//     7   |   65536  | 512           2     64 P     | 512           2     64 P
//     8   |  131072  | 512           4     64 P     | 512           4     64 P
//     9   |  262144  | 512           8     64 P     | 512           8     64 P
inline constexpr row_table packed_row_table = {{
                                                   {256, 32, 4, 1, 8},
                                                   {1024, 32, 1, 1, 32, true},
                                                   {2048, 32, 1, 1, 64, true},
                                                   {4096, 64, 1, 1, 64, true},
                                                   {8192, 128, 1, 1, 64, true},
                                                   {16384, 256, 1, 1, 64, true},
                                                   {32768, 512, 1, 1, 64, true},
                                                   {65536, 512, 1, 2, 64, true},
                                                   {131072, 512, 1, 4, 64, true},
                                                   {262144, 512, 1, 8, 64, true},
                                               },
                                               10};
inline constexpr row_table wide_row_table = {{
                                                 {256, 32, 4, 1, 8},
                                                 {1024, 32, 1, 1, 32},
                                                 {2048, 64, 1, 1, 32},
                                                 {4096, 128, 1, 1, 32},
                                                 {8192, 256, 1, 1, 32},
                                                 {16384, 512, 1, 1, 32},
                                                 {32768, 512, 1, 1, 64, true},
                                                 {65536, 512, 1, 2, 64, true},
                                                 {131072, 512, 1, 4, 64, true},
                                                 {262144, 512, 1, 8, 64, true},
                                             },
                                             10};
// `table`'s size classes first .. last: an op variant that serves only some classes (e.g. the
// LayerNorm backward's deferred rows, norm_kernels.cuh), for rows of more than
// table.configs[first - 1].max_cols and at most table.configs[last].max_cols columns.
constexpr row_table classes_between(row_table table, int first, int last) {
  row_table part{};
  for (int i = first; i <= last; ++i) part.configs[i - first] = table.configs[i];
  part.count = last - first + 1;
  return part;
}
// `table` with size classes first, first + 1, ... replaced by `configs`: an op's table that
// differs from another in a few classes (e.g. the RMSNorm's, norm_kernels.cuh).
template <int N>
constexpr row_table with_classes(row_table table, int first, const row_config (&configs)[N]) {
  for (int i = 0; i < N; ++i) table.configs[first + i] = configs[i];
  return table;
}
// `table` with one more size class, `config`, at `index`: the classes from `index` on move up by
// one (e.g. a cluster of 5 CTAs between those of 4 and 8 for the rows it fills better:
// fused_packed_table in cross_entropy/cross_entropy_tables.cuh). The table must have room
// (count < max_row_configs) and 0 <= index <= count: otherwise a compile error in a constant
// expression, an exception at run time.
constexpr row_table with_class_inserted(row_table table, int index, row_config config) {
  if (table.count >= max_row_configs || index < 0 || index > table.count)
    throw std::invalid_argument("with_class_inserted: no room in the table, or an index past its classes");
  for (int i = table.count; i > index; --i) table.configs[i] = table.configs[i - 1];
  table.configs[index] = config;
  ++table.count;
  return table;
}
static_assert(default_row_table.well_formed() && packed_row_table.well_formed() && wide_row_table.well_formed(),
              "row tables: classes by increasing max_cols up to row_max_cols, each layout holding its class");
// Whether schedule S holds 16-bit rows as packed pairs (row_config::pairs).
template <class S>
inline constexpr bool packed_rows = is_16bit_float<typename S::T> && S::config.pairs;

// Shared memory the stream stages and the op's own arrays may use together: the opt-in maximum
// (227 KiB) less the static shared memory, 3 KiB for the reduction scratch, or for deferred
// rows 1 KiB plus their posted partials (up to 16 KiB; row_schedule).
inline constexpr size_t shared_limit_bytes = 227 * 1024;
inline constexpr size_t stream_budget_bytes = shared_limit_bytes - 3 * 1024;
inline constexpr size_t deferred_static_bytes = 1024;  // besides the posted partials
inline constexpr int max_stream_stages = 8;
// Most CTAs a persistent launch uses (the SMs of an H100 / H200): keeps per-worker workspaces a
// function of the shape alone.
inline constexpr int64_t row_worker_limit = 132;

// Calls f.template operator()<I>() with I = index as a compile-time constant (I < Table.count).
template <const row_table& Table, class F, int... I>
void dispatch_row_config(int index, F&& f, std::integer_sequence<int, I...>) {
  (void)((index == I ? (f.template operator()<I>(), true) : false) || ...);
}
template <const row_table& Table = default_row_table, class F>
void dispatch_row_config(int index, F&& f) {
  dispatch_row_config<Table>(index, std::forward<F>(f), std::make_integer_sequence<int, Table.count>{});
}

// Where a thread works: its group (row slot within an item), its index in the group, its CTA's
// first column and its count of the row's columns, and the worker (CTA or cluster) it belongs to.
struct row_place {
  int group;
  int thread;
  int col0;
  // The row's columns from col0 in this CTA (segment): at most the chunk's; <= 0: none. Streamed
  // rows: the segment's in partial(); keep() and finish() get the row's place (col0 0, the first
  // segment's count).
  int cols;
  int64_t worker;
  int64_t workers;
  int segment = 0;   // streamed rows: the segment at col0 (see "Streamed rows")
  int segments = 1;  // streamed rows: the row's segments
  // The one thread of a row that writes per-row outputs (statistics, losses).
  TILEKIT_HOST_DEVICE bool leader() const { return thread == 0 && col0 == 0; }
};

// What a row op that needs nothing special inherits: no per-worker results, no shared memory
// of its own, no per-row scalars, empty begin / end. An op derives from it and declares only
// what it uses (a member of the op hides the default of the same name).
struct row_op_defaults {
  static constexpr const row_table& table = default_row_table;  // size classes (see above)
  static constexpr bool per_worker_results = false;
  // Whether the op is launched for aligned matrices only (its caller takes another op where
  // plan_rows says the rows are not; the shifted kernels are then not compiled).
  static constexpr bool aligned_only = false;
  // Whether the rows of size class `c` are deferred (see "Deferred rows" above; classes of
  // fewer than row_defer_min_warps warps never are).
  TILEKIT_HOST_DEVICE static constexpr bool deferred_rows(row_config) { return false; }
  // Deferred rows over clusters: whether the op combines each CTA's warp partials first, with
  //   template <class S> reduce_value combine(const P&, const reduce_value* partials, uint32_t warps) const;
  // (the CTA's partial, from its warps'; run by the CTA's last warp to post), so that only CTA
  // partials travel and total() folds one per CTA instead of one per warp of the cluster
  // (posted reductions, "CTA partials first", tilekit/ops/reduce.cuh).
  TILEKIT_HOST_DEVICE static constexpr bool combines_ctas_first(row_config) { return false; }
  // The order of size class `c`'s items in big staged launches ("Item order", "Paced order"
  // above): claimed with one CTA per worker, static for clusters (a cluster's rank 0 claims for
  // it, row_item_order "published", only where an op measured that faster). Claims need rows in
  // one stage each (not streamed: claims count items, not segments) and no per-worker results.
  TILEKIT_HOST_DEVICE static constexpr item_order item_order_for(row_config c) {
    return c.cluster_ctas == 1 ? item_order::claimed : item_order::fixed;
  }
  TILEKIT_HOST_DEVICE static constexpr size_t shared_bytes(row_config) { return 0; }
  // Most stages of size class `c` in its ring: by default as many as fit (row_schedule::stages,
  // at most max_stream_stages); an op asks for fewer only where that measured faster (more
  // stages are not always better: see softmax.cu).
  TILEKIT_HOST_DEVICE static constexpr int max_stages(row_config) { return max_stream_stages; }
  struct row_scalars {};
  template <class S>
  struct pending {};
#if defined(__CUDACC__)
  template <class P>
  TILEKIT_DEVICE static row_scalars fetch(const P&, int64_t) {
    return {};
  }
  // Deferred rows: whether the op takes from the row's stage, with
  //   template <class S> void keep(const P&, const row_place&, const stage_row<S> (&in)[K], pending<S>&);
  // what finish() needs of it but partial() did not keep, once the previous row is finished (see
  // "Deferred rows").
  static constexpr bool keeps_stage = false;
  // Deferred rows of size class `c` (one row per group, no keep()): whether each warp leaves
  // its stage as soon as partial() has read it, before it finishes the previous row, instead of
  // after ("Early release", in the row loop); only where an op measured that faster.
  TILEKIT_HOST_DEVICE static constexpr bool releases_early(row_config) { return false; }
  template <class S, class P>
  TILEKIT_DEVICE void begin(const P&, const row_place&, void*) {}
  template <class S, class P>
  TILEKIT_DEVICE void end(const P&, const row_place&, void*) {}
#endif
};

// The compile-time schedule of size class `ConfigIndex` for row op Op; Shifted: for matrices
// whose rows are not 16-byte aligned (a shifted row_stream; see "Unaligned matrices").
template <int ConfigIndex, class Op, bool Shifted = false>
struct row_schedule {
  using T = typename Op::element;
  static constexpr int Inputs = Op::inputs;
  static constexpr row_config config = Op::table.configs[ConfigIndex];
  static constexpr size_t OpSharedBytes = Op::shared_bytes(config);
  static constexpr int group_threads = config.group_threads;
  static constexpr int groups = row_cta_threads / group_threads;
  static constexpr int rows_per_item = groups * config.rows_per_group;
  static constexpr int cluster_ctas = config.cluster_ctas;
  static constexpr int cta_threads = row_cta_threads;
  static constexpr bool warp_per_row = group_threads == warp_threads;
  static constexpr int group_warps = group_threads / warp_threads;
  // Deferred rows (see above): rows of 4 warps or more, whose reduction is posted warp by warp
  // (posted_reduce_post) and collected one row later.
  static constexpr bool defers = Op::deferred_rows(config) && group_warps >= row_defer_min_warps;
  // Deferred rows over clusters whose op combines its CTA's warp partials first (see
  // row_op_defaults::combines_ctas_first; posted reductions, "CTA partials first").
  static constexpr bool cta_first = defers && cluster_ctas > 1 && Op::combines_ctas_first(config);
  // The row's registers (tilekit/ops/row_io.cuh): groups dealt round-robin over the group's
  // threads, or, in shifted schedules, over each warp's own stretch of the chunk
  // (warp_blocked_row_layout), so that a realigned store's pieces come once per warp and row
  // instead of once per group ("Unaligned matrices").
  using layout = std::conditional_t<Shifted,
                                    warp_blocked_row_layout<group_threads, config.elements_per_thread / vector_elements<T>,
                                                            vector_elements<T>>,
                                    row_layout<group_threads, config.elements_per_thread / vector_elements<T>,
                                               vector_elements<T>>>;
  static constexpr int chunk_cols = layout::columns;  // columns of one CTA's chunk (or segment) of a row
  static constexpr int segments = config.segments;
  static constexpr bool segmented = segments > 1;
  static constexpr int max_cols = chunk_cols * cluster_ctas * segments;
  static_assert(chunk_cols % row_span_granule == 0, "row_schedule: a chunk is a whole number of span granules");
  static_assert(row_span_granule * sizeof(T) % 16 == 0,
                "row_schedule: a cluster's CTAs must start at 16-byte aligned columns (bulk copies, can_stream)");
  TILEKIT_HOST_DEVICE static constexpr int cluster_span(int cols) { return row_cluster_span(cols, cluster_ctas); }

  static constexpr bool shifted = Shifted;
  // What an op's row()/partial()/keep() get for each input's row: a 16-byte aligned pointer, or
  // a shifted_row (tilekit/ops/row_io.cuh), which load_row_aligned / load_row_pairs_aligned read
  // the same way.
  using stage_row = std::conditional_t<Shifted, shifted_row<T>, const T*>;
  static constexpr size_t stage_bytes =
      size_t(rows_per_item) * (chunk_cols + (Shifted ? vector_elements<T> : 0)) * sizeof(T) * Inputs;
  // Deferred rows' posted reductions (static shared memory, row_reduce_storage): 4 rounds of
  // one partial per warp and CTA, e.g. 16 KiB for 16-byte partials of 16 warps x 16 CTAs.
  static constexpr size_t posted_bytes =
      defers ? groups * sizeof(posted_reduce_scratch<group_warps, typename Op::reduce_value, cluster_ctas, cta_first>) : 0;
  static constexpr size_t stream_budget = defers ? shared_limit_bytes - deferred_static_bytes - posted_bytes
                                                 : stream_budget_bytes;
  static constexpr size_t stream_bytes_available = OpSharedBytes < stream_budget ? stream_budget - OpSharedBytes : 0;
  static constexpr int stages = int(std::min<size_t>(Op::max_stages(config), stream_bytes_available / stage_bytes));
  using stream = row_stream<T, Inputs, rows_per_item, chunk_cols, stages < 1 ? 1 : stages, Shifted>;

  static_assert(stages >= 1, "row_schedule: not even one stage fits next to the op's shared memory");
  static_assert(stream::stage_bytes == stage_bytes, "row_schedule: the stream's stages are the schedule's");
  static_assert(config.elements_per_thread % vector_elements<T> == 0,
                "elements_per_thread must be a multiple of the 16-byte vector (8 for bf16/fp16, 4 for fp32)");
  static_assert(max_cols >= config.max_cols, "row_table: group threads x elements x cluster must cover max_cols");
  static_assert(row_cta_threads % group_threads == 0, "groups must tile the CTA");
  static_assert(cluster_ctas == 1 || groups == 1, "clusters split rows over whole CTAs");
  static_assert(!segmented || (defers && cluster_ctas == 1 && config.rows_per_group == 1),
                "streamed rows: deferred, one row per group, no cluster");
  static_assert(groups <= named_barrier_count - first_free_barrier_id || warp_per_row || groups == 1,
                "one named barrier per group");

#if defined(__CUDACC__)
  // The CTA's share of a row of `cols` columns: a cluster deals the row out evenly (cluster_span),
  // so that no CTA holds much less of it than its peers.
  TILEKIT_DEVICE TILEKIT_INLINE static row_place locate(int cols) {
    if constexpr (cluster_ctas > 1) {
      const int span = cluster_span(cols);
      const int col0 = int(cluster::rank()) * span;
      return {0, int(threadIdx.x), col0, min(span, cols - col0), int64_t(cluster::id_x()),
              int64_t(cluster::count_x())};
    } else {
      return {int(threadIdx.x) / group_threads, int(threadIdx.x) % group_threads, 0, min(chunk_cols, cols),
              int64_t(blockIdx.x), int64_t(gridDim.x)};
    }
  }

  // Shared memory for reductions of V: nothing for a warp per row, two alternating
  // block_reduce scratch arrays per group (one barrier per reduction), or the cluster scratch
  // and two alternating arrays for reductions over the CTA's slice only (reduce_cta); for
  // deferred rows, the posted-reduction slots of every group (posted_storage).
  struct empty_storage {};
  template <class V>
  struct group_storage {
    block_reduce_scratch<group_threads, V> group[groups][2];
  };
  template <class V>
  struct cluster_storage {
    cluster_reduce_scratch<cta_threads, V> cluster;
    block_reduce_scratch<cta_threads, V> slice[2];
#if defined(__CUDACC__)
    TILEKIT_DEVICE TILEKIT_INLINE void init() { cluster.init(); }  // thread 0
#endif
  };
  template <class V>
  using reduce_storage = std::conditional_t<warp_per_row, empty_storage,
                                            std::conditional_t<(cluster_ctas > 1), cluster_storage<V>, group_storage<V>>>;
  template <class V>
  struct posted_storage {
    posted_reduce_scratch<group_warps, V, cluster_ctas, cta_first> group[groups];
#if defined(__CUDACC__)
    TILEKIT_DEVICE TILEKIT_INLINE void init() {  // thread 0
#pragma unroll
      for (int g = 0; g < groups; ++g) group[g].init();
    }
#endif
  };

  // Reduce over the threads of the row (all of them call it); every one gets the result.
  // WarpUniform: the value is already reduced over each warp (identical in its lanes). `call`
  // counts the thread's reductions (all threads of a row make the same calls): it picks the
  // group's scratch array.
  template <bool WarpUniform, class Storage, class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE static V reduce(V value, ReduceOp op, Storage& storage, const row_place& at,
                                                uint32_t call) {
    if constexpr (warp_per_row) return WarpUniform ? value : warp_reduce(value, op);
    else if constexpr (cluster_ctas > 1) return cluster_reduce<cta_threads, WarpUniform>(value, op, storage.cluster);
    else if constexpr (groups == 1)
      return block_reduce_alternating<cta_threads, WarpUniform>(value, op, storage.group[0], call);
    else
      return group_reduce_alternating<group_threads, WarpUniform>(value, op, storage.group[at.group], call,
                                                                  first_free_barrier_id + at.group);
  }

  // For a cluster: reduce over THIS CTA's threads only (its slice of the row), then fold the
  // CTAs' partials with the caller's `fold(partials, ctas)` (cluster_reduce_fold), so that an
  // op can exchange per-CTA statistics that are not a plain sum (the LayerNorm's (shift,
  // deviation sums, count) per slice). reduce_cta alternates between its own two arrays by
  // `call` (one barrier per reduction; every reduction of a cluster row has a CTA barrier, so
  // call n + 2 reuses call n's array only after every thread read it).
  template <bool WarpUniform, class Storage, class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE static V reduce_cta(V value, ReduceOp op, Storage& storage, uint32_t call) {
    static_assert(cluster_ctas > 1, "reduce_cta: only clusters split a row over CTAs");
    return block_reduce_alternating<cta_threads, WarpUniform>(value, op, storage.slice, call);
  }
  template <bool WarpUniform, class Storage, class V, class ReduceOp, class Fold>
  TILEKIT_DEVICE TILEKIT_INLINE static auto reduce_fold(V value, ReduceOp op, Storage& storage, Fold fold) {
    static_assert(cluster_ctas > 1, "reduce_fold: only clusters split a row over CTAs");
    return cluster_reduce_fold<cta_threads, WarpUniform>(value, op, storage.cluster, fold);
  }

  // The row's reduction in two halves (deferred rows): post() sends this warp's warp-uniform
  // partial of round `round` to its group's slots (in every CTA of the cluster; cta_first: the
  // CTA's last warp sends cta_fold(warp partials, warps) instead), wait(round) collects the
  // total, fold(partials, count); no CTA barrier in either (posted_reduce_post /
  // posted_reduce_wait_fold).
  template <class V, class Storage, class CtaFold>
  TILEKIT_DEVICE TILEKIT_INLINE static void post(V value, Storage& storage, const row_place& at, uint32_t round,
                                                 CtaFold cta_fold) {
    static_assert(defers, "post: only deferred rows of row_defer_min_warps warps or more");
    posted_reduce_post(value, storage.group[at.group], round, at.thread / warp_threads, cta_fold);
  }
  template <class V, class Storage>
  TILEKIT_DEVICE TILEKIT_INLINE static void post(V value, Storage& storage, const row_place& at, uint32_t round) {
    static_assert(defers && !cta_first, "post without a CTA fold: deferred rows, every warp's partial to every CTA");
    posted_reduce_post(value, storage.group[at.group], round, at.thread / warp_threads);
  }
  template <class Storage, class Fold>
  TILEKIT_DEVICE TILEKIT_INLINE static auto wait(uint32_t round, Fold fold, Storage& storage, const row_place& at) {
    static_assert(defers, "wait: only deferred rows of row_defer_min_warps warps or more");
    return posted_reduce_wait_fold(round, storage.group[at.group], fold);
  }
#endif
};

// Item order (see "Item order" above). One counter per stream slot: `next` hands out item
// numbers (claimed) or counts the CTAs' visits (paced), `done` counts the CTAs that have
// finished; the last one resets both.
struct row_claim_counter {
  unsigned next;
  unsigned done;
};
inline constexpr int row_claim_slots = 1024;
// Paced order: a CTA may start its u-th item once the CTAs have visited (u - pace / 4) items
// each on average (measured best of 1 to 3 items for copies: 1.25). A CTA that polls the
// counter this often in one wait (each poll an L2 round trip, ~0.5-1 us) stops waiting for the
// rest of its launch. (Counting polls, not clock64 cycles: the 64-bit clock cost registers that
// spilled in the cross-entropy forward with dlogits, 4 -> 20 bytes.)
inline constexpr int row_pace_quarters = 5;
inline constexpr unsigned row_pace_patience_polls = 128;
// The order of schedule S of Op in big staged launches (Op::item_order_for; claims only where
// they are possible, which the kernel checks).
template <class Op, class S>
inline constexpr item_order row_items_order = Op::item_order_for(S::config);
// Whether schedule S of Op compiles the paced order's visits (only where it is the class's order).
template <class Op, class S>
inline constexpr bool row_paceable = row_items_order<Op, S> == item_order::paced;
template <class Op, class S>
inline constexpr bool row_claimable = row_items_order<Op, S> == item_order::claimed;

#if defined(__CUDACC__)
// What an op's row() / partial() / keep() get for each input: `const T*` (aligned streams) or a
// shifted_row (shifted ones); the ops read both with load_row_aligned / load_row_pairs_aligned,
// `in[i] + offset` (whole 16-byte units) and `in[i][column]`.
template <class S>
using stage_row = typename S::stage_row;

// Reduction scratch of a row kernel: one for floats (statistics) and one for the op's own
// reduce_value when that is another type (e.g. LayerNorm backward's float2 of two sums).
template <class S, class Value>
struct row_reduce_storage {
  using value_type = Value;
  // Deferred schedules only post (their ops' row() is not called).
  std::conditional_t<S::defers, typename S::empty_storage, typename S::template reduce_storage<float>> floats;
  std::conditional_t<std::is_same_v<Value, float> || S::defers, typename S::empty_storage,
                     typename S::template reduce_storage<Value>>
      values;
  // Deferred rows' posted reductions of the op's reduce_value.
  std::conditional_t<S::defers, typename S::template posted_storage<Value>, typename S::empty_storage> posted;
  TILEKIT_DEVICE TILEKIT_INLINE void init() {  // thread 0, before the kernel's first barrier
    if constexpr (S::cluster_ctas > 1 && !S::defers) {
      floats.init();
      if constexpr (!std::is_same_v<Value, float>) values.init();
    }
    if constexpr (S::defers) posted.init();
  }
};

// What a row op sees besides its row: the reduction over its group (of floats or of the op's
// reduce_value), from one value per thread (reduce) or per warp (reduce_warps: every lane holds
// its warp's result already, e.g. after a warp_reduce the op needed anyway, so the ladder
// starts at the warp partials). Rows split over a cluster (`cluster`) may also reduce over
// their CTA's slice only (reduce_cta) and combine the slices' partials themselves
// (reduce_fold; see row_schedule::reduce_fold).
template <class S, class Storage>
struct row_context {
  Storage& storage;
  const row_place& at;
  mutable uint32_t calls = 0;  // this thread's reductions so far (see row_schedule::reduce)
  mutable uint32_t posts = 0;  // this thread's posted reductions so far (deferred rows)
  static constexpr bool cluster = S::cluster_ctas > 1;
  // Whether reductions of V have scratch here (floats, and the op's reduce_value).
  template <class V>
  static constexpr bool reduces = std::is_same_v<V, float> || std::is_same_v<V, typename Storage::value_type>;

  template <class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE V reduce(V value, ReduceOp op) const {
    return reduce_from<false>(value, op);
  }
  template <class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE V reduce_cta(V value, ReduceOp op) const {
    return S::template reduce_cta<false>(value, op, storage_of<V>(), calls++);
  }
  template <class V, class ReduceOp, class Fold>
  TILEKIT_DEVICE TILEKIT_INLINE auto reduce_fold(V value, ReduceOp op, Fold fold) const {
    ++calls;
    return S::template reduce_fold<false>(value, op, storage_of<V>(), fold);
  }
  template <class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE V reduce_warps(V value, ReduceOp op) const {
    return reduce_from<true>(value, op);
  }
  // reduce_warps in two halves, for the kernel's deferred rows of the op's reduce_value (an
  // op's row() does not need them): post_warps returns the reduction's round, wait(round,
  // fold) the fold of its partials (row_schedule::post / wait; cta_fold: see there).
  template <class V, class CtaFold>
  TILEKIT_DEVICE TILEKIT_INLINE uint32_t post_warps(V value, CtaFold cta_fold) const {
    const uint32_t round = posts++;
    S::post(value, storage.posted, at, round, cta_fold);
    return round;
  }
  template <class V>
  TILEKIT_DEVICE TILEKIT_INLINE uint32_t post_warps(V value) const {
    const uint32_t round = posts++;
    S::post(value, storage.posted, at, round);
    return round;
  }
  template <class Fold>
  TILEKIT_DEVICE TILEKIT_INLINE auto wait(uint32_t round, Fold fold) const {
    return S::wait(round, fold, storage.posted, at);
  }

 private:
  template <class V>
  TILEKIT_DEVICE TILEKIT_INLINE auto& storage_of() const {
    if constexpr (std::is_same_v<V, float>) return storage.floats;
    else return storage.values;
  }
  template <bool WarpUniform, class V, class ReduceOp>
  TILEKIT_DEVICE TILEKIT_INLINE V reduce_from(V value, ReduceOp op) const {
    return S::template reduce<WarpUniform>(value, op, storage_of<V>(), at, calls++);
  }
};

// Zero at module load and after every launch; one array per translation unit (each kernel uses
// its own unit's copy, and a slot always belongs to one stream).
static __device__ row_claim_counter row_claim_counters[row_claim_slots];

// The items of one worker, by use (the worker's u-th item, u = 0, 1, ...): static
// (worker + u * workers) or claimed. Claimed: thread 0 writes the item of use u + Stages + 2 into
// `table` when it starts use u (`visit`, right after the stage of use u is full), from an atomic
// issued one use earlier (`pending`; issuing it two uses earlier measured the same). Readers:
// every thread reads item(u + 1) during use u (the per-row scalars are fetched an item ahead,
// and the loop moves on to it), and the thread that refills a stage after use v reads
// item(v + Stages). Both come after thread 0 left use u - Stages - 1 (resp. v): the stage of
// use u - 1 was refilled only after every thread, thread 0 included, left use u - 1 - Stages;
// thread 0's writes precede its leaving (the CTA barrier, its fenced count, or its release of
// the stage's empty mbarrier), and the refill's full-barrier completion orders them before the
// readers. Table slots:
// when thread 0 writes entry x + Stages + 2 (visit x), every warp has left use x - Stages, so the
// oldest entry still to be read is x - Stages + 1: 2 Stages + 2 entries in use at most.
//
// Published (a cluster, Ranks > 1): every CTA of the cluster must take the same items, so thread
// 0 of rank 0 alone claims (start, visit, finish as above) and pushes each item number into the
// table of every CTA, its own included, with st.async: the 4-byte store and its completion
// travel together to a per-slot mbarrier of the receiving CTA (the DSMEM protocol of the
// cluster reductions, ops/sync/cluster.cuh). Phase k of slot s is the item of use s + 32 k: a
// reader of use u waits for parity (u / 32) & 1, then reads the slot. The loop's readers do so
// once per warp (after_in_warp: lane 0 waits and reads, a shuffle hands the number to the other
// lanes), and ops without per-row scalars skip the lookup for the prefetch of those: one poll
// per warp and item instead of 64 (H200, 2026-12-04, same-run A/B, bf16: RMSNorm forward 64K
// +0.6-0.7%, the softmax forward and backward and the other RMSNorm widths within +-0.2%).
// Each phase expects one arrival and 4 bytes; thread 0 of each CTA arms the phase of use u + 32
// when it visits use u (after its own wait for use u: the phase of u has completed; the push may
// land before the arm, the transaction count just goes negative for a while). Timing: the entry of use u + Stages + 2
// is pushed when rank 0 starts use u, a peer reads it at the latest when it leaves use u + 2
// (refilling for use u + 2 + Stages), and a peer leaves a use only after the row reductions of
// its rows, to which rank 0 contributes; the same coupling keeps rank 0 from pushing the next
// entry of a slot (32 uses later) before every reader of the slot's current one has read it.
// Every entry pushed is waited for by each CTA before it exits (finish), so no store is in
// flight into a CTA that has left. (Weak pushes, st.shared::cluster of tagged words polled with
// ld.shared, measured ~3% faster for the softmax forward at 64K-256K, but rely on racing weak
// accesses, which the PTX memory model leaves undefined; an earlier version built on them failed
// the cluster tests, for a reason not found: a standalone replica of its protocol read no wrong
// item in 3.4e9 reads. Polling with ld.relaxed.cluster instead cost 0.876 -> 0.76x copy at 64K.)
// Claimed = false: the static order (worker + u * workers), paced when the kernel has a claim
// slot: thread 0 of every CTA adds one to the slot's `next` at each visit; before it, it
// checks the count that its previous visit's atomic returned (its latency hidden behind an
// item) against row_pace_quarters, and only if that is short polls the counter. The wait holds
// the CTA's threads at their next barrier and, through the ring, its loads. The last CTA out
// resets the slot as a claimed launch does. Paceable = false compiles none of it.
template <int Stages, bool Claimed, int Ranks = 1, bool Paceable = true>
struct row_item_order {
  static constexpr int slots = 32;
  static_assert(2 * Stages + 2 <= slots, "row_item_order: claims run further ahead than the table holds");
  static constexpr bool published = Claimed && Ranks > 1;
  // The shared table: item numbers by use slot; published, also the slots' mbarriers.
  struct published_table {
    uint32_t items[slots];
    mbarrier landed[slots];
  };
  // The static order's: whether thread 0 has given up waiting for the pace (in shared memory,
  // read only when it would wait: a register live across the kernel's loop spilled in the
  // kernels at the register cap).
  struct pace_state {
    unsigned impatient;
  };
  using table_t =
      std::conditional_t<published, published_table, std::conditional_t<Claimed, int64_t[slots], pace_state>>;
  table_t& table;      // shared
  int claim_slot;      // the kernel parameter
  int64_t worker, workers;
  bool claims;         // this CTA claims (every CTA, but only rank 0 of a cluster)
  unsigned pending = 0;  // thread 0 of a claimer: the claim of the next visit
  unsigned counted = 0;  // thread 0, paced: the visits counted when it last visited

  TILEKIT_DEVICE TILEKIT_INLINE row_item_order(table_t& t, int slot, int64_t w, int64_t ws)
      : table(t), claim_slot(slot), worker(w), workers(ws), claims(!published || cluster::rank() == 0) {}
  TILEKIT_DEVICE TILEKIT_INLINE row_claim_counter& counter() const { return row_claim_counters[claim_slot]; }
  // The item of `use` (claimed order).
  TILEKIT_DEVICE TILEKIT_INLINE int64_t item_of(uint32_t use) const {
    if constexpr (published) {
      table.landed[use % slots].wait((use / slots) & 1u);
      return table.items[use % slots];
    } else {
      return table[use % slots];
    }
  }
  // Record the item of `use` (in every CTA's table when published).
  TILEKIT_DEVICE TILEKIT_INLINE void put(uint32_t use, unsigned item) {
    if constexpr (published) {
#pragma unroll 1
      for (uint32_t r = 0; r < uint32_t(Ranks); ++r)
        cluster::store_remote_async(cluster::map_shared(&table.items[use % slots], r), item,
                                    cluster::map_shared(&table.landed[use % slots], r));
    } else {
      table[use % slots] = item;
    }
  }
  TILEKIT_DEVICE TILEKIT_INLINE int64_t first() const {
    if constexpr (Claimed) return item_of(0);
    else return worker;
  }
  // The item `ahead` uses after `current`, the item of `use`.
  TILEKIT_DEVICE TILEKIT_INLINE int64_t after(int64_t current, uint32_t use, int ahead) const {
    if constexpr (Claimed) return item_of(use + ahead);
    else return current + ahead * workers;
  }
  // The same, called by every lane of a warp together (the loop's readers): published, lane 0
  // alone waits on the slot's mbarrier and reads it, and the warp takes the number by shuffle,
  // so a warp issues one barrier poll per lookup instead of 32.
  TILEKIT_DEVICE TILEKIT_INLINE int64_t after_in_warp(int64_t current, uint32_t use, int ahead) const {
    if constexpr (published) {
      uint32_t item = 0;
      if (laneid() == 0) item = uint32_t(item_of(use + ahead));
      return __shfl_sync(0xffffffffu, item, 0);
    } else {
      return after(current, use, ahead);
    }
  }
  // Thread 0, before the CTA barrier that follows it: the items of uses 0 .. Stages + 1.
  // Published: every CTA's thread 0 initialises and arms its slots here (before the
  // init_barriers_fence and the cluster barrier that follow), and the claimer claims after that
  // barrier (claim_first).
  TILEKIT_DEVICE TILEKIT_INLINE void start() {
    if constexpr (!Claimed) table.impatient = 0;
    if constexpr (published) {
      for (int s = 0; s < slots; ++s) {
        table.landed[s].init(1);
        table.landed[s].arrive_expect_tx(sizeof(uint32_t));
      }
    } else {
      claim_first();
    }
  }
  TILEKIT_DEVICE TILEKIT_INLINE void claim_first() {
    if constexpr (Claimed) {
      if (!claims) return;
      for (int u = 0; u < Stages + 2; ++u) put(u, atomicAdd(&counter().next, 1u));
      pending = atomicAdd(&counter().next, 1u);
    }
  }
  // Published: arm the phase of `use` + 32 of the slot of `use` (its phase of `use` is complete).
  TILEKIT_DEVICE TILEKIT_INLINE void rearm(uint32_t use) {
    table.landed[use % slots].arrive_expect_tx(sizeof(uint32_t));
  }
  // Thread 0, when the stage of `use` is full.
  TILEKIT_DEVICE TILEKIT_INLINE void visit(uint32_t use) {
    if constexpr (Claimed) {
      if constexpr (published) rearm(use);
      if (!claims) return;
      put(use + Stages + 2, pending);
      pending = atomicAdd(&counter().next, 1u);
    } else if constexpr (Paceable) {
      if (claim_slot >= 0) pace(use);
    }
  }
  // Thread 0, after the loop (`uses` uses visited): the last claimer out resets the counter for
  // the stream's next launch (every claimer's claims precede its count: fence, atomic; the last
  // one's reset follows all counts: atomic, fence). Published: the claimer pushed the items of
  // uses 0 .. uses + Stages + 1; wait for the ones this CTA may not have read.
  TILEKIT_DEVICE TILEKIT_INLINE void finish(uint32_t uses) {
    if constexpr (published)
      for (uint32_t u = uses; u < uses + Stages + 2; ++u) item_of(u);
    if (!claims || claim_slot < 0 || !(Claimed || Paceable)) return;  // peers (claimed), or not paced
    __threadfence();
    const unsigned counting = Claimed ? gridDim.x / uint32_t(Ranks) : gridDim.x;  // claimers, or every CTA
    if (atomicAdd(&counter().done, 1u) == counting - 1) {
      __threadfence();
      counter().next = 0;
      counter().done = 0;
    }
  }

 private:
  // Paced: wait until the CTAs have visited (use - pace / 4) items each on average, then count
  // this visit. `counted` is at most one visit old, so the poll runs only when the CTA leads.
  TILEKIT_DEVICE TILEKIT_INLINE void pace(uint32_t use) {
    const int64_t need = (4 * int64_t(use) - row_pace_quarters) * int64_t(gridDim.x) / 4;
    if (need > int64_t(counted) && !table.impatient) {
      for (unsigned polls = 0; int64_t(load_relaxed(&counter().next)) < need;)
        if (++polls == row_pace_patience_polls) {
          table.impatient = 1;
          break;
        }
    }
    counted = atomicAdd(&counter().next, 1u) + 1u;
  }
  TILEKIT_DEVICE TILEKIT_INLINE static unsigned load_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
};

// The total of deferred row `round` from its warps' partials (the op's fold).
template <class S, class Op, class P, class Ctx>
TILEKIT_DEVICE TILEKIT_INLINE auto deferred_total(const Op& op, const P& p, const Ctx& ctx, uint32_t round) {
  return ctx.wait(round, [&](const typename Op::reduce_value* partials, uint32_t count) {
    return op.template total<S>(p, partials, count);
  });
}

// Deferred rows: the one row whose reduction is in flight while the next row is computed.
// (replace() copies the next row's pending state into it: ~37 moves of ~690 instructions per
// warp and row in the LayerNorm forward at 16K. Two slots taking turns instead, the item loop
// unrolled by two so that each row's slot is known at compile time, copy nothing but raised
// the register pressure past 128: LayerNorm forward 8K 114 registers -> 128 and 128 / 820
// bytes of spill stores / loads, the RMSNorm backward's clusters 0 -> 200-950 bytes; ptxas,
// CUDA 13.0, 2026-12-02. Two copies of the loop body with the copy kept spilled too, 24 / 112.)
template <class S, class Op>
struct in_flight_row {
  bool valid = false;
  int64_t row = 0;
  typename Op::template pending<S> state{};
  uint32_t round = 0;  // of its posted reduction

  // Finish this row, if there is one (its total folded from its posted partials).
  template <class P, class Ctx>
  TILEKIT_DEVICE TILEKIT_INLINE void finish(Op& op, const P& p, const row_place& at, const Ctx& ctx) const {
    if (valid) op.template finish<S>(p, at, row, state, deferred_total<S>(op, p, ctx, round));
  }
  // Post this warp's partial of row `next`, run `posted()` (the early release of its stage),
  // finish this row, and put `next` in flight with what its finish() will need (next_state,
  // and what op.keep() takes from `in`, next's stage).
  template <class P, class Ctx, class V, int K, class Posted>
  TILEKIT_DEVICE TILEKIT_INLINE void replace(Op& op, const P& p, const row_place& at, const Ctx& ctx, const V& partial,
                                             int64_t next, const typename Op::template pending<S>& next_state,
                                             const stage_row<S> (&in)[K], Posted posted) {
    uint32_t next_round;
    if constexpr (S::cta_first)
      next_round = ctx.post_warps(partial, [&](const V* partials, uint32_t warps) {
        return op.template combine<S>(p, partials, warps);
      });
    else
      next_round = ctx.post_warps(partial);
    posted();
    finish(op, p, at, ctx);
    *this = {true, next, next_state, next_round};
    if constexpr (Op::keeps_stage) op.template keep<S>(p, at, in, state);
  }
};

// Aligned: every streamed matrix is bulk_copyable (else the stream is shifted; see "Unaligned
// matrices"). Claimed: the items come from slot `claim_slot` of row_claim_counters (this
// launch's stream's; row_claimable only), else in the static order, paced on that slot if it is
// >= 0.
template <class Op, int ConfigIndex, bool Aligned, bool Claimed = false>
__global__ void __launch_bounds__(row_cta_threads, 1) row_kernel(const typename Op::params p, int claim_slot) {
  using S = row_schedule<ConfigIndex, Op, !Aligned>;
  using T = typename Op::element;
  using stream_t = typename S::stream;
  constexpr int K = Op::inputs;
  static_assert(!row_claimable<Op, S> || (!S::segmented && !Op::per_worker_results),
                "row_kernel: claims need rows in one stage each and no per-worker results (item_order_for)");
  static_assert(!Claimed || row_claimable<Op, S>, "row_kernel: only claimable schedules claim");
  extern __shared__ __align__(128) unsigned char dynamic_shared[];
  __shared__ row_reduce_storage<S, typename Op::reduce_value> storage;

  const int cols = p.cols;
  const row_place at = S::locate(cols);
  // Shared memory: the stream's stages, then the op's own.
  unsigned char* op_shared = dynamic_shared + stream_t::shared_bytes;
  stream_t stream(dynamic_shared);
  const int64_t rows = p.rows;
  const int chunk = at.cols;  // <= 0: nothing of the row here
  row_source<T> sources[K];
#pragma unroll
  for (int i = 0; i < K; ++i) sources[i] = Op::source(p, i);

  // Warps that have left each stage, over all laps (see the release below).
  __shared__ unsigned stage_leavers[stream_t::stages];
  // The worker's items, by use (see "Item order"; a cluster's are claimed by rank 0, the
  // claimer, and published to its peers).
  // Only classes whose order is paced compile the pace (row_paceable): the others would carry
  // its per-item code unused, and it costs them (the cross-entropy forward's staged classes:
  // 3-6 KB more code each and 1-10% lower bandwidth at 1K-256K, same-run A/B, H200, 2026-12-02).
  using order_t = row_item_order<stream_t::stages, Claimed, S::cluster_ctas, row_paceable<Op, S>>;
  __shared__ typename order_t::table_t claimed_items;
  order_t order{claimed_items, claim_slot, at.worker, at.workers};
  if (threadIdx.x == 0) {
    storage.init();
    stream.init(row_cta_threads);  // empty[]: every thread (checkable release)
    for (int s = 0; s < stream_t::stages; ++s) stage_leavers[s] = 0;
    order.start();
  }
  init_barriers_fence();
  Op op;
  op.template begin<S>(p, at, op_shared);  // may fill shared memory: the barrier below orders it
  if constexpr (S::cluster_ctas > 1) cluster::sync();  // peers' reduction barriers exist
  else __syncthreads();
  if constexpr (order_t::published)
    if (threadIdx.x == 0) order.claim_first();  // every CTA's table is armed

  // Only the last item can miss rows; with one row per item, items == rows and none does (the
  // item loop's row test relies on it).
  const int64_t items = ceil_div(rows, int64_t(S::rows_per_item));
  // Streamed rows (see above): the segments of this launch's rows (those past the row's end are
  // skipped). The stream's units are (item, segment): a worker's item takes `segments` stages
  // in a row. Other classes: one unit per item (segments = 1, folded away).
  const int segments = S::segmented ? ceil_div(cols, S::chunk_cols) : 1;
  // Thread 0 / the refilling lane: load into `stage` the unit `ahead` units after segment
  // `segment` of the worker's item `from` (its use `use`).
  auto issue_ahead = [&](int stage, int64_t from, uint32_t use, int segment, int ahead) {
    const int unit = segment + ahead;
    const int64_t target = order.after(from, use, S::segmented ? unit / segments : unit);
    if (target >= items) return;
    if constexpr (S::segmented) {
      const int col0 = at.col0 + unit % segments * S::chunk_cols;
      stream.issue(stage, sources, target * S::rows_per_item, rows, col0, min(int(S::chunk_cols), cols - col0), cols);
    } else {
      stream.issue(stage, sources, target * S::rows_per_item, rows, at.col0, chunk, cols);
    }
  };
  if (threadIdx.x == 0)
    for (int s = 0; s < stream_t::stages; ++s) issue_ahead(s, order.first(), 0, 0, s);
  const row_context<S, decltype(storage)> ctx{storage, at};
  // Per-row scalars (labels, saved statistics) are fetched one item ahead, so their global
  // latency overlaps the current item instead of stalling every row.
  constexpr int rows_per_group = S::config.rows_per_group;
  using scalars = typename Op::row_scalars;
  // Ops without such scalars skip the lookup of the next item for them (for claimed orders, a
  // read of the item table, published ones a poll of its barrier as well).
  constexpr bool has_scalars = !std::is_empty_v<scalars>;
  auto fetch = [&](int64_t item, scalars (&out)[rows_per_group]) {
#pragma unroll
    for (int k = 0; k < rows_per_group; ++k) {
      const int64_t row = item * S::rows_per_item + k * S::groups + at.group;
      out[k] = row < rows ? Op::fetch(p, row) : scalars{};
    }
  };
  scalars current[rows_per_group];
  int64_t item = order.first();
  fetch(item, current);
  // Deferred rows: the row in flight (in_flight_row).
  using pending = typename Op::template pending<S>;
  constexpr bool defer = S::defers;
  [[maybe_unused]] std::conditional_t<defer, in_flight_row<S, Op>, row_op_defaults> in_flight;
  // Streamed rows: the op's state of the row over its segments.
  [[maybe_unused]] std::conditional_t<S::segmented, pending, row_op_defaults> streamed;
  stage_ring<stream_t::stages> ring;
  uint32_t use = 0;  // counts only for the claimed order
  // Several row groups per CTA, or deferred rows: the stage is released without a CTA barrier.
  // Each warp counts itself out of the stage, and the LAST warp out refills it; warps that
  // finish early go on to the next stage instead of waiting for the slowest group (they can run
  // at most one lap ahead: a stage is refilled only when every warp left it). The count never
  // resets (a lap adds 16, and no warp counts itself into the next lap before the refill).
  // Measured on the H200: cross-entropy forward +16-18% at N = 1K-4K, LayerNorm forward +5% at
  // 4K-8K against a CTA barrier; with one group per CTA (rows of 16K and more, whose warps meet
  // in every reduction anyway) it was 2-6% slower than the barrier below, so those keep it,
  // unless their rows are deferred (no reduction meets the warps). See "Stage release" above
  // for the two orderings.
  auto leave_stage = [&](auto segment) {  // generic: compiled only where it is called
    constexpr unsigned warps = row_cta_threads / warp_threads;
    if constexpr (row_checkable_release) stream.release(ring);
    __syncwarp();
    if (laneid() == 0) {
      if constexpr (!row_checkable_release) __threadfence_block();
      if (atomicAdd(&stage_leavers[ring.index], 1u) % warps == warps - 1) {
        if constexpr (row_checkable_release) stream.wait_released(ring);
        else __threadfence_block();
        issue_ahead(ring.index, item, use, segment, stream_t::stages);
      }
    }
  };
  // Early release (Op::releases_early): a deferred op that takes nothing more from its stage
  // (no keep()) is done with it once partial() returns, so each warp can leave the stage then,
  // before it finishes the previous row (waits for that row's partials and writes it out),
  // which gives the stage's refill that much more of a lead. One row per group: a warp leaves
  // once per stage. Measured (bf16, H200, 2026-12-04, same-run A/B, x copy): the LayerNorm
  // forward's wide rows gain (norm_kernels.cuh), while the softmax forward lost 0.4-1.8% at
  // 64K-256K, the cross-entropy forward 2-6% at 8K-256K (its streamed rows from 32K: released
  // early at their last segment) and the RMSNorm forward 0.4% at 64K, so only the LayerNorm
  // forward opts in. One row per item (its rows of 16K and more): no item misses its row, which
  // the loop below is told at compile time, so the warps leave at the one early site and the
  // end-of-stage site is compiled out (5-12 KB less code per kernel). LayerNorm forward 16K /
  // 64K / 128K / 256K +1.3-2.4 / +0.5 / +1.4-1.5 / +3.0-3.4% (bf16, H200, 2026-12-04, same-run
  // A/B, x copy). Not kept (docs/performance_log.md, "One release site"): the one site for every
  // item, each step (partial, release, post) its own `if` on the row's presence, lost 3-4% at
  // 16K-128K despite its smaller code; the cross-entropy forward with that loop still lost
  // 3-7% (release before the post) and 16-18% (after it) in its streamed rows.
  constexpr bool early_release = defer && Op::releases_early(S::config) && S::config.rows_per_group == 1;
  static_assert(!(Op::releases_early(S::config) && Op::keeps_stage), "row_kernel: keep() needs the stage after partial()");
  for (; item < items; ++use) {
    scalars next[rows_per_group];
    if constexpr (has_scalars) fetch(order.after_in_warp(item, use, 1), next);
#pragma unroll 1
    for (int segment = 0; segment < segments; ++segment) {
      row_place here = at;  // the segment's place (the row's, unless streamed)
      if constexpr (S::segmented) {
        here.col0 += segment * S::chunk_cols;
        here.cols = min(int(S::chunk_cols), cols - here.col0);
        here.segment = segment;
        here.segments = segments;
      }
      stream.wait(ring);
      if (threadIdx.x == 0 && segment == 0) order.visit(use);
      const bool last_segment = segment + 1 == segments;
      bool left = false;  // this warp has left the stage (early release)
#pragma unroll
      for (int k = 0; k < rows_per_group; ++k) {
        const int slot = k * S::groups + at.group;  // row of the item
        const int64_t row = item * S::rows_per_item + slot;
        // Group-uniform. With one row per item no item misses its row (see `items`), which the
        // compiler is told: the test and, with early release, the end-of-stage release site go
        // (see "Early release" above the loop). Against the
        // test for every kernel (bf16, H200, 2026-12-04, same-run A/B): CE forward + dlogits
        // 64K-256K +1.4-1.8%, LayerNorm backward 64K-256K +0.4-1.1% but 32K -0.4-0.9%, RMSNorm
        // forward 64K -0.6-0.7%, every other cell within 0.5% in both rounds or within 0.3% in
        // one (docs/performance_log.md, "The row test").
        if (S::rows_per_item == 1 || row < rows) {
          typename S::stage_row in[K];
#pragma unroll
          for (int i = 0; i < K; ++i) {
            if constexpr (S::shifted)
              in[i] = stream.row(ring.index, i, slot, sources[i], item * S::rows_per_item, here.col0, here.cols,
                                 cols);
            else
              in[i] = stream.data(ring.index, i, slot);
          }
          // Early release, once partial() has read the stage: before the partial is posted, or,
          // where each CTA's last warp to post combines the CTA's partials (S::cta_first), after
          // it: a refill issued first would delay the one post that every CTA of the row waits
          // for.
          auto read = [&] {
            if constexpr (early_release && !S::cta_first) leave_stage(segment), left = true;
          };
          auto posted = [&] {
            if constexpr (early_release && S::cta_first) leave_stage(segment), left = true;
          };
          if constexpr (S::segmented) {
            const auto partial = op.template partial<S>(p, here, row, current[k], in, streamed);
            read();
            if (last_segment) in_flight.replace(op, p, at, ctx, partial, row, streamed, in, posted);
          } else if constexpr (defer) {
            pending state;
            const auto partial = op.template partial<S>(p, at, row, current[k], in, state);
            read();
            in_flight.replace(op, p, at, ctx, partial, row, state, in, posted);
          } else {
            op.template row<S>(p, at, row, current[k], in, ctx);
          }
        }
        if constexpr (has_scalars)
          if (last_segment) current[k] = next[k];
      }
      if constexpr (S::groups > 1 || defer) {
        if (!left) leave_stage(segment);
        ring.advance();
      } else {
        __syncthreads();  // every thread is done with this stage: refill it
        if (threadIdx.x == 0) issue_ahead(ring.index, item, use, segment, stream_t::stages);
        ring.advance();
      }
    }
    item = order.after_in_warp(item, use, 1);  // read again rather than held across the row: one register less
  }
  if (threadIdx.x == 0) order.finish(use);
  if constexpr (defer) in_flight.finish(op, p, at, ctx);
  __syncthreads();  // op.end may reuse shared memory that other threads read in the loop
  op.template end<S>(p, at, op_shared);
  if constexpr (S::cluster_ctas > 1) cluster::sync();  // no CTA exits while peers may write into it
}
#endif  // __CUDACC__

// Host side -------------------------------------------------------------------------------------

// Whether every streamed matrix of the op can be bulk-copied with schedule S.
template <class Op, class S>
bool can_stream(const typename Op::params& p) {
  for (int i = 0; i < Op::inputs; ++i) {
    const auto source = Op::source(p, i);
    if (!bulk_copyable(source.base, source.stride, int64_t(p.cols), int64_t(S::chunk_cols))) return false;
  }
  return true;
}

// A launch configuration of a row kernel: S's block, in clusters of S's CTAs per row.
template <class S>
cluster::launch_config row_launch_config(int64_t workers, size_t shared, cudaStream_t stream) {
  return {unsigned(workers * S::cluster_ctas), unsigned(S::cta_threads), unsigned(S::cluster_ctas), shared, stream};
}

// Dynamic shared memory of a launch.
template <class Op, int I, bool Aligned>
constexpr size_t row_kernel_shared_bytes() {
  using S = row_schedule<I, Op, !Aligned>;
  return S::stream::shared_bytes + S::OpSharedBytes;
}

// Workers (CTAs, or clusters) of this kernel that can be resident at once on the current device,
// at most one per SM and at most row_worker_limit CTAs; cached per (kernel, device). Also sets
// the kernel's attributes (shared memory opt-in, non-portable cluster size), which launches
// rely on.
template <class Op, int I, bool Aligned>
int64_t resident_workers() {
  using S = row_schedule<I, Op, !Aligned>;
  static std::mutex mutex;
  static std::map<int, int64_t> cache;
  int device = 0;
  TILEKIT_CHECK_CUDA(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  auto kernel = row_kernel<Op, I, Aligned>;
  constexpr size_t shared = row_kernel_shared_bytes<Op, I, Aligned>();
  // The 48 KiB default counts static + dynamic shared memory (HOPPER_NOTES 9.1): always opt in.
  auto set_attributes = [&](auto k) {
    if (S::cluster_ctas > 8) cluster::allow_wide(k);
    TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  };
  set_attributes(kernel);
  if constexpr (Aligned && row_claimable<Op, S>)  // the claimed variant: same launch shape
    set_attributes(row_kernel<Op, I, true, true>);
  const int sm_count = int(std::min<int64_t>(query_device(device).sm_count, row_worker_limit));
  int64_t workers = 0;
  if constexpr (S::cluster_ctas > 1) {
    cluster::launch_config config = row_launch_config<S>(1, shared, nullptr);
    int clusters = 0;
    TILEKIT_CHECK_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, config.get()));
    workers = std::min<int64_t>(clusters, sm_count / S::cluster_ctas);
  } else {
    int per_sm = 0;
    TILEKIT_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, S::cta_threads, shared));
    workers = per_sm >= 1 ? sm_count : 0;
  }
  if (workers < 1)
    throw error(::tilekit::detail::concat("row_kernel: not one worker of ", S::cluster_ctas, " CTA(s) x ",
                                          S::cta_threads, " threads with ", shared,
                                          " bytes of shared memory fits on device ", device),
                __FILE__, __LINE__);
  cache.emplace(device, workers);
  return workers;
}

// Upper bound of the workers of any launch for (rows, cols), on any device: at most one CTA
// (or cluster) per SM of an H100 / H200 (row_worker_limit), never more than there are items.
// Ops with per-worker results size their workspace with it, so it depends on nothing else.
inline int64_t max_row_workers(int64_t rows, int64_t cols, const row_table& table = default_row_table) {
  const row_config& c = table.configs[table.index(cols)];
  const int64_t items = ceil_div(rows, int64_t(row_cta_threads / c.group_threads * c.rows_per_group));
  return std::min(items, std::max<int64_t>(1, row_worker_limit / c.cluster_ctas));
}
// Row groups per CTA for (cols): ops that keep one result per group (not per worker) multiply.
inline int64_t row_groups(int64_t cols, const row_table& table = default_row_table) {
  return row_cta_threads / table.configs[table.index(cols)].group_threads;
}

// A planned launch: size class, stream (aligned or shifted) and worker count (known before the
// launch, so that ops with per-worker results can lay out their workspace), and the order of its
// items.
struct row_launch {
  int config_index;
  bool aligned;  // every streamed matrix is bulk_copyable (else a shifted stream)
  int64_t workers;
  int64_t items;
  item_order order;  // the class's order (Op::item_order_for); shifted launches: paced or fixed
};

// Item order (see "Item order" and "Paced order" at the top). TILEKIT_ROW_ORDER, read once:
// `auto` (or unset): each size class's own order in big launches, the static order in small
// ones; `claimed`: each class's own order at any size (what the tests use to cover claims and
// paces); `static`: the static order; `paced`: the classes whose order is paced paced at any
// size, every other class static (only those classes compile the pace: row_paceable).
enum class row_order { automatic, claimed, fixed, paced };
inline row_order row_order_setting() {
  static const row_order order = [] {
    const char* value = std::getenv("TILEKIT_ROW_ORDER");
    if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return row_order::automatic;
    if (std::strcmp(value, "claimed") == 0) return row_order::claimed;
    if (std::strcmp(value, "static") == 0) return row_order::fixed;
    if (std::strcmp(value, "paced") == 0) return row_order::paced;
    throw ::tilekit::invalid_argument(::tilekit::detail::concat("TILEKIT_ROW_ORDER is '", value,
                                                               "'; expected auto, claimed, static or paced"),
                                     __FILE__, __LINE__);
  }();
  return order;
}
// Automatic order: claims (and paces) from this many items per worker on. Below, the launch is
// short (its CTAs have little time to drift apart), and claiming is even harmful when items are few: each
// CTA claims stages + 3 items as it starts, so the first CTAs to start could take all of them
// while the last ones find none (e.g. 600 items on 132 CTAs: ~86 CTAs with 7 items instead of
// 132 with 4-5).
inline constexpr int64_t row_claim_min_items_per_worker = 16;

// The claim slot of `stream` on the current device (row_claim_counters), or -1: under CUDA-graph
// capture (a graph may be replayed on any stream, concurrently with launches on the captured
// one) and when all slots are taken. Slots are keyed by the stream's unique id (cudaStreamGetId:
// never reused, and distinct for each thread's per-thread default stream), never released: a
// program that uses more than row_claim_slots streams per device runs the rest in static order.
inline int row_claim_slot(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TILEKIT_CHECK_CUDA(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return -1;
  unsigned long long id = 0;
  TILEKIT_CHECK_CUDA(cudaStreamGetId(stream, &id));
  int device = 0;
  TILEKIT_CHECK_CUDA(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::pair<int, unsigned long long>, int> slots;
  static std::map<int, int> taken;  // slots handed out per device
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = slots.find({device, id}); it != slots.end()) return it->second;
  int& count = taken[device];
  if (count == row_claim_slots) return -1;
  slots.emplace(std::make_pair(device, id), count);
  return count++;
}

// Plan a launch of Op for p: the size class of p.cols, an aligned stream when every streamed
// matrix is bulk-copyable (else a shifted one), and the workers: the resident ones (persistent).
// Shifted launches take the class's order only where it is paced: the claimed order would be a
// fourth kernel per class (compile time and code size) for a path that no measurement has
// claimed yet.
template <class Op>
row_launch plan_rows(const typename Op::params& p) {
  row_launch plan{Op::table.index(p.cols), false, 0, 0, item_order::fixed};
  dispatch_row_config<Op::table>(plan.config_index, [&]<int I>() {
    using S = row_schedule<I, Op>;
    plan.aligned = can_stream<Op, S>(p);
    plan.items = ceil_div(int64_t(p.rows), int64_t(S::rows_per_item));
    // An aligned-only Op has no shifted kernel (not even instantiated here, for its occupancy):
    // its plan of unaligned rows has no workers, and launch_rows_in_order rejects it.
    int64_t resident = 0;
    if constexpr (Op::aligned_only) resident = plan.aligned ? resident_workers<Op, I, true>() : 0;
    else resident = plan.aligned ? resident_workers<Op, I, true>() : resident_workers<Op, I, false>();
    plan.workers = std::min(plan.items, resident);
    // Claims count in 32 bits: items plus each worker's claims past the end stay below 2^32
    // (paced visits, items x CTAs per cluster, too: 2^31 rows of 16K+ columns do not fit in memory).
    constexpr item_order own = row_items_order<Op, S>;
    if (plan.items < (int64_t(1) << 31) && (plan.aligned || own == item_order::paced)) plan.order = own;
  });
  return plan;
}

// The order a planned launch takes under TILEKIT_ROW_ORDER (before the launch-size rule).
inline item_order row_setting_order(const row_launch& plan) {
  switch (row_order_setting()) {
    case row_order::fixed: return item_order::fixed;
    // Only the classes whose own order is paced can pace (row_paceable); the others run static,
    // and so take no claim slot (row_claim_slot below).
    case row_order::paced: return plan.order == item_order::paced ? item_order::paced : item_order::fixed;
    default: return plan.order;
  }
}

// The claim slot of a planned launch on `stream` (plan.order: the order it runs in, after
// row_setting_order), or -1 for the static order.
inline int row_claim_slot(const row_launch& plan, cudaStream_t stream) {
  if (plan.order == item_order::fixed) return -1;
  if (row_order_setting() == row_order::automatic && plan.items < row_claim_min_items_per_worker * plan.workers)
    return -1;
  return row_claim_slot(stream);
}

// Launch a planned launch in plan.order with claim slot `claim_slot` (-1: the static order; a
// slot: the stream's, row_claim_slot(stream)).
template <class Op>
void launch_rows_in_order(const typename Op::params& p, const row_launch& plan, cudaStream_t stream, int claim_slot) {
  const item_order order = claim_slot >= 0 ? plan.order : item_order::fixed;
  dispatch_row_config<Op::table>(plan.config_index, [&]<int I>() {
    using S = row_schedule<I, Op>;
    auto launch = [&](auto kernel, size_t shared, int slot) {
      cluster::launch_config config = row_launch_config<S>(plan.workers, shared, stream);
      TILEKIT_CHECK_CUDA(cudaLaunchKernelEx(config.get(), kernel, p, slot));
    };
    constexpr size_t aligned_shared = row_kernel_shared_bytes<Op, I, true>();
    // plan.order is the class's own order or fixed (plan_rows, row_setting_order), so a claimed
    // or paced order reaches only the classes that compile it (claimed: aligned plans only).
    if constexpr (row_claimable<Op, S>) {
      if (order == item_order::claimed) return launch(row_kernel<Op, I, true, true>, aligned_shared, claim_slot);
    }
    const int slot = row_paceable<Op, S> && order == item_order::paced ? claim_slot : -1;  // else the static order
    if constexpr (Op::aligned_only) {
      TILEKIT_CHECK_ARG(plan.aligned, "launch_rows: an aligned-only row op got a plan of unaligned rows");
      launch(row_kernel<Op, I, true>, aligned_shared, slot);
    } else if (plan.aligned) {
      launch(row_kernel<Op, I, true>, aligned_shared, slot);
    } else {
      launch(row_kernel<Op, I, false>, row_kernel_shared_bytes<Op, I, false>(), slot);
    }
  });
}
// Launch a planned launch in the order row_order_setting() and the plan choose.
template <class Op>
void launch_rows(const typename Op::params& p, const row_launch& plan, cudaStream_t stream) {
  row_launch chosen = plan;
  chosen.order = row_setting_order(plan);
  launch_rows_in_order<Op>(p, chosen, stream, row_claim_slot(chosen, stream));
}

// Plan and launch in one call (ops without per-worker results).
template <class Op>
void run_rows(const typename Op::params& p, cudaStream_t stream) {
  launch_rows<Op>(p, plan_rows<Op>(p), stream);
}

}  // namespace tilekit::kernels::detail
