#pragma once
// The row widths of the memory-bound row kernels' benchmarks (bench_norms, bench_softmax,
// bench_cross_entropy), M = floor(2^28 / N) rows each:
//
//   TILEKIT_BENCHMARK(BM_softmax_forward)->Apply(tb::row_widths<'N'>);   // the argument's name
//
// row_widths: the widths of the issue, 1K-256K, whose rows are 16-byte aligned (the aligned
// stream). odd_row_widths: one odd width in each size class of default_row_table from 1K to
// 256K (2^k - 1, and GPT-2's vocabulary, 50257, for the 64K class): rows of an odd number of
// 16-bit elements are not 16-byte aligned, so the kernels take their shifted stream
// (kernels/common/row_kernel.cuh, "Unaligned matrices"); each width sits in the size class of
// default_row_table whose bound is the power of two above it (2047: the 2K class).
// vocab_widths: vocabularies of released language models, 16-byte aligned but not powers of two:
// 32000 (Llama 2), 50304 (GPT-2's 50257 padded to 64), 102400 (DeepSeek LLM), 128256 (Llama 3),
// 151936 (Qwen2), 256000 (Gemma). In default_row_table's classes (16384 columns per CTA) three
// fill their clusters unevenly: 50304 fills 3.07 of its cluster's 4 CTAs, 102400 6.25 of 8 and
// 151936 9.27 of 16; the others 97-98% of theirs.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace tilekit::bench {

template <char Name>
void row_widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({std::string(1, Name)});
  for (int64_t n : {1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144}) b->Args({n});
}

template <char Name>
void odd_row_widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({std::string(1, Name)});
  for (int64_t n : {1023, 2047, 4095, 8191, 16383, 32767, 50257, 131071, 262143}) b->Args({n});
}

template <char Name>
void vocab_widths(benchmark::internal::Benchmark* b) {
  b->ArgNames({std::string(1, Name)});
  for (int64_t n : {32000, 50304, 102400, 128256, 151936, 256000}) b->Args({n});
}

}  // namespace tilekit::bench
