#pragma once
// The size-class tables of the cross-entropy forward (row_config and row_table in
// kernels/common/row_kernel.cuh; cross_entropy.cu uses them, ce_forward_op::table), in a header of their own so that
// tests/cpu/test_row_spans.cu checks the very tables the kernels run (how clusters deal a row).
#include "common/row_kernel.cuh"

namespace tilekit::kernels::detail {

// The forward without dlogits streams its rows of 32K columns and more (row_kernel.cuh,
// "Streamed rows"): a group of 4 warps (32K-64K) or 8 warps (128K-256K) reads the row in
// segments of 8K / 16K columns for 16-bit logits (64 per thread, packed pairs), 4K / 8K for
// fp32 (32 per thread): 16 or 32 KiB per row and segment, 64 KiB stages, every group of a CTA
// a row of its own. Measured on the H200 (bf16, x copy at 32K / 64K / 128K / 256K, same-run
// A/Bs of 2026-11-30): clusters (packed_row_table) 0.80-0.82 / 0.78-0.79 / 0.70-0.71 /
// 0.68-0.70; one CTA per row (512 threads, segments of 32K) 0.80-0.82 / 0.86-0.87 / 0.90-0.91 /
// 0.93-0.94; groups of 8 warps 0.86 / 0.90 / 0.93 / 0.94; of 4 warps 0.87-0.89 / 0.90-0.92 /
// 0.92-0.94 / 0.93-0.95; this table 0.87-0.89 / 0.90-0.91 / 0.92-0.94 / 0.94-0.96 (warp
// partials per segment, combined per warp), and with per-thread running statistics
// (streamed_partial) 0.877 -> 0.883 / 0.906 -> 0.919 / 0.933 -> 0.939 / 0.948 -> 0.957 (same
// run, 23:02 UTC). At 16K the 8-warp row in one stage stays (0.90-0.92; 4 warps x 2 segments
// 0.85). Smaller groups with more segments lost (2026-12-04, same-run A/B, 32K / 64K: 4 warps
// 0.882 / 0.919, 2 warps 0.880 / 0.883, 1 warp 0.790 / 0.797; docs/performance_log.md,
// "Published lookups and the CE forward at 32K"). fp32 takes the same bytes per segment (not
// benchmarked: the benchmark is bf16).
//
//   class | max cols | 16-bit: threads x segments | fp32: threads x segments
//   ------+----------+----------------------------+-------------------------
//     6   |   32768  |  128 x 4  (8K columns)     |  128 x 8  (4K columns)
//     7   |   65536  |  128 x 8                   |  128 x 16
//     8   |  131072  |  256 x 8  (16K columns)    |  256 x 16 (8K columns)
//     9   |  262144  |  256 x 16                  |  256 x 32
inline constexpr row_table streamed_packed_table = with_classes(packed_row_table, 6,
                                                                {{32768, 128, 1, 1, 64, true, 4},
                                                                 {65536, 128, 1, 1, 64, true, 8},
                                                                 {131072, 256, 1, 1, 64, true, 8},
                                                                 {262144, 256, 1, 1, 64, true, 16}});
// fp32 logits without dlogits (the fp32 column above).
inline constexpr row_table streamed_table = with_classes(default_row_table, 6,
                                                         {{32768, 128, 1, 1, 32, false, 8},
                                                          {65536, 128, 1, 1, 32, false, 16},
                                                          {131072, 256, 1, 1, 32, false, 16},
                                                          {262144, 256, 1, 1, 32, false, 32}});
static_assert(streamed_packed_table.well_formed() && streamed_table.well_formed(),
              "cross-entropy: streamed tables well formed");
// The forward with dlogits of bf16 logits: packed_row_table, but rows of 1K columns as 32 floats
// per thread (see ce_forward_op::table), and one class more, rows of 131073-163840 columns over a
// cluster of 5 CTAs of 32768 instead of 8 (class 9; the 8-CTA class is then class 10, from 163841).
// Why: this kernel's rows are not deferred (ce_forward_op::deferred_rows), so every CTA of a row
// pays the row's whole critical path (its loads, the statistics, the cluster's exchange, the
// dlogits) however few of its columns it holds. A vocabulary of 151936 (Qwen2) fills 58% of 8 x
// 32768 and read 0.555x copy where full rows read 0.93-0.95 (H100, 2026-12-07); over 5 CTAs it
// fills 93%. cluster_reduce folds any cluster::size() partials, and a row's span is an even share
// of 16-column granules (row_cluster_span), so nothing needs a power of two to be right; but
// reduce_slots folds a count that is not a power of two one partial after another (here 5 CTA
// partials in 4 steps, against 3 shuffle levels for 8: no loss measured). A deferred op with such
// a class would fold every warp's partial so (16 x 5 per row): pad the slots first.
// Two classes more, for the same reason: rows of 32769-57344 and 65537-114688 columns over 2 and
// 4 CTAs of 7 groups (56 columns per thread, 28672 per CTA) instead of 8 (classes 7 and 9): 50304
// (GPT-2, padded) fills 88% of 2 x 28672 instead of 77% of 2 x 32768, 102400 89% of 4 x 28672
// instead of 78%. H100, 2026-12-08, same-run A/B, 2 rounds: 50304 2500 -> 2677 GB/s (+7.1%),
// 102400 2348 -> 2558 (+8.9%), `_odd` 50257 2288 -> 2397 (+4.8%); 65536 and 131072 within 0.3%.
// The class of 131073-163840 columns over a cluster of 5 CTAs of 32768 (64 columns per thread as
// packed pairs), inserted at index 9 of a ten-class table: the same class in the forward with
// dlogits (bf16 and fp16) and the backward (16-bit), so that a vocabulary of this class is dealt
// over the same CTA spans in all of them.
inline constexpr row_config cluster_of_five_class = {163840, 512, 1, 5, 64, true};
inline constexpr row_table fused_packed_table = with_class_inserted(
    with_class_inserted(
        with_class_inserted(with_classes(packed_row_table, 1, {{1024, 32, 1, 1, 32}}), 9, cluster_of_five_class),
        7, {57344, 512, 1, 2, 56, true}),
    9, {114688, 512, 1, 4, 56, true});
static_assert(fused_packed_table.well_formed() && fused_packed_table.count == 13 &&
                  fused_packed_table.configs[7].max_cols == 57344 && fused_packed_table.configs[7].cluster_ctas == 2 &&
                  fused_packed_table.configs[8].max_cols == 65536 && fused_packed_table.configs[8].cluster_ctas == 2 &&
                  fused_packed_table.configs[9].max_cols == 114688 && fused_packed_table.configs[9].cluster_ctas == 4 &&
                  fused_packed_table.configs[10].max_cols == 131072 && fused_packed_table.configs[10].cluster_ctas == 4 &&
                  fused_packed_table.configs[11].max_cols == 163840 && fused_packed_table.configs[11].cluster_ctas == 5 &&
                  fused_packed_table.configs[12].max_cols == 262144 && fused_packed_table.configs[12].cluster_ctas == 8,
              "fused_packed_table: clusters of 2 x 28672 / 32768, 4 x 28672 / 32768, 5 and 8 x 32768 columns");
// The forward with dlogits of fp16 logits: wide_row_table (32 floats per thread below 32K, where
// fp16 pairs spill; ce_forward_op::table) with the same cluster of 5 as class 9, for the same
// reason (not the 7-group classes: not measured for fp16). H100, 2026-12-08, same-run A/B, 2
// rounds: 151936 1660 -> 2528 GB/s (+52%, 0.55 -> 0.83x copy); 50304 / 102400 within 0.1%.
inline constexpr row_table fused_wide_table = with_class_inserted(wide_row_table, 9, cluster_of_five_class);
static_assert(fused_wide_table.well_formed() && fused_wide_table.count == 11 &&
                  fused_wide_table.configs[9].max_cols == 163840 && fused_wide_table.configs[9].cluster_ctas == 5 &&
                  fused_wide_table.configs[10].max_cols == 262144 && fused_wide_table.configs[10].cluster_ctas == 8,
              "fused_wide_table: the cluster of 5 CTAs of 32768 columns");

// The backward of 16-bit logits: default_row_table, but rows of 131073-163840 columns over a
// cluster of 5 CTAs of 32768 columns (64 per thread, held as packed pairs: as floats the shifted
// kernel spilled 334 bytes at the 128-register cap) instead of 16 CTAs of 16384 (class 9; the
// 16-CTA class is then class 10). Why: every element is independent once lse is known, so a row's
// CTAs share no work, but each CTA streams only its share of the row: 151936 columns (Qwen2)
// fill 58% of 16 x 16384, and each SM then keeps 58% of a stage's bytes in flight. Over 5 CTAs of
// 32768 they fill 93%, and the row's CTAs are those of the forward with dlogits' cluster of 5
// (fused_packed_table): the same spans. H100, 2026-12-08, same-run A/B, 2 rounds: 151936 2582 ->
// 2834 GB/s (+9.8%, 0.85 -> 0.93x copy); the other vocabularies and 131072 / 262144 within 0.4%.
inline constexpr row_table backward_wide_table = with_class_inserted(default_row_table, 9, cluster_of_five_class);
static_assert(backward_wide_table.well_formed() && backward_wide_table.count == 11 &&
                  backward_wide_table.configs[9].cluster_ctas == 5 && backward_wide_table.configs[10].cluster_ctas == 16,
              "backward_wide_table: rows of 131073-163840 columns over 5 CTAs, wider ones over 16");

}  // namespace tilekit::kernels::detail
