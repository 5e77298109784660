#pragma once
// The tilekit benchmark harness: include this one header in a bench/*.cu file.
//
//   #include "harness/harness.cuh"
//   namespace tb = tilekit::bench;
//
//   void BM_my_kernel(benchmark::State& state) {
//     tb::cuda_stream stream;
//     ... allocate and tb::fill_uniform the inputs (or a tb::rotating_buffer) ...
//     tb::time_on_stream(state, stream, [&] { my_kernel<<<grid, block, smem, stream>>>(...); },
//                        {.flush_l2 = true});                // compute-bound: flush L2
//     tb::set_throughput(state, flops, bytes);               // TFLOP/s, GB/s from the median
//     tb::cublas_ceiling_ratio(state, m, n, k);              // or tb::copy_ceiling_ratio(state)
//   }
//   TILEKIT_BENCHMARK(BM_my_kernel)->Args({4096, 4096, 4096});
//   TILEKIT_BENCHMARK_MAIN()
//
// Pieces: cuda_resources.cuh (device_array, cuda_stream, cuda_event),
// random.cuh (fill_uniform), l2.cuh (l2_flusher, rotating_buffer: when to use
// which), timer.cuh (gpu_timer, time_on_stream: the timing protocol),
// ceilings.cuh (copy bandwidth, cuBLAS GEMM), counters.cuh (units), main.cuh; not included
// here: row_widths.cuh (the row kernels' widths, aligned and odd).
// The harness is CUDA code: include it from .cu files compiled by nvcc.

#include "harness/ceilings.cuh"
#include "harness/counters.cuh"
#include "harness/cuda_resources.cuh"
#include "harness/l2.cuh"
#include "harness/main.cuh"
#include "harness/random.cuh"
#include "harness/timer.cuh"
