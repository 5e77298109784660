// row_stream::copy (tilekit/pipeline/row_stream.cuh): the copy of an item whose rows bulk copies
// cannot move (the row kernels' direct path), for 16- and 32-bit elements, every start offset
// of a row inside its 16-byte unit, chunks shorter than one unit, one unit, one warp step and
// more, one and several rows of two inputs, and 128 or 512 threads.
//
// The stage is poisoned (all bits 1) before the copy and dumped after it. Every element is
// checked bit for bit: the chunk's elements equal the source, the rest of the chunk's last
// 16-byte unit is 0, everything after it (and every row past the matrix end) still holds the
// poison. Each source is its own allocation, ending exactly at the last element the copy may
// read, so that compute-sanitizer's memcheck reports any read past the chunk.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/pipeline/row_stream.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

constexpr int stage_rows = 3, stage_cols = 2048, inputs = 2;

template <class T>
using stream_of = row_stream<T, inputs, stage_rows, stage_cols, 1>;

template <class T, int Threads>
__global__ void copy_kernel(row_source<T> a, row_source<T> b, int64_t first_row, int64_t total_rows, int col0, int chunk,
                            T* out) {
  extern __shared__ __align__(128) unsigned char shared[];
  using stream_t = stream_of<T>;
  stream_t stream(shared);
  constexpr int elements = int(stream_t::stage_bytes / sizeof(T));
  T* stage = stream.data(0, 0, 0);
  for (int i = threadIdx.x; i < elements; i += Threads) memset(stage + i, 0xFF, sizeof(T));
  __syncthreads();
  const row_source<T> sources[inputs] = {a, b};
  stream.template copy<Threads>(0, sources, first_row, total_rows, col0, chunk);
  __syncthreads();
  for (int i = threadIdx.x; i < elements; i += Threads) out[i] = stage[i];
}

struct copy_case {
  int offset[inputs];  // elements between each source's aligned allocation and its row 0
  int64_t stride;      // elements between rows
  int64_t first_row, total_rows;
  int col0, chunk;
};

// Runs one case and checks every element of the stage; returns the number of mismatches
// (the first few are reported).
template <class T, int Threads>
int run_case(const copy_case& c) {
  const uint32_t poison = poison_bits<T>();
  constexpr int E = 16 / int(sizeof(T));
  const int present = int(std::min<int64_t>(stage_rows, c.total_rows - c.first_row));
  // Source i: rows [0, total_rows) of `stride` elements, starting `offset[i]` elements into the
  // allocation, which ends at the last row's chunk end (the copy's last readable element).
  std::vector<device_buffer<T>> sources;
  std::vector<std::vector<T>> hosts;
  row_source<T> rs[inputs];
  for (int i = 0; i < inputs; ++i) {
    const size_t count = size_t(c.offset[i] + (c.total_rows - 1) * c.stride + c.col0 + c.chunk);
    std::vector<T> h(count);
    for (size_t e = 0; e < count; ++e) h[e] = from_raw_bits<T>(uint32_t((e * 2654435761u + 12345u * (i + 1)) & poison) & ~1u);
    sources.emplace_back(h);
    hosts.push_back(std::move(h));
    rs[i] = {sources.back().get() + c.offset[i], c.stride};
  }
  using stream_t = stream_of<T>;
  constexpr int elements = int(stream_t::stage_bytes / sizeof(T));
  device_buffer<T> out(elements);
  auto kernel = copy_kernel<T, Threads>;
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stream_t::shared_bytes)));
  kernel<<<1, Threads, stream_t::shared_bytes>>>(rs[0], rs[1], c.first_row, c.total_rows, c.col0, c.chunk, out.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<T> got = out.download();
  const int chunk_units = c.chunk > 0 ? (c.chunk + E - 1) / E * E : 0;
  int bad = 0;
  for (int i = 0; i < inputs; ++i)
    for (int r = 0; r < stage_rows; ++r)
      for (int col = 0; col < stage_cols; ++col) {
        uint32_t want = poison;
        if (r < present && col < c.chunk)
          want = raw_bits(hosts[i][size_t(c.offset[i] + (c.first_row + r) * c.stride + c.col0 + col)]);
        else if (r < present && col < chunk_units)
          want = 0;
        const uint32_t have = raw_bits(got[size_t((i * stage_rows + r) * stage_cols + col)]);
        if (have != want && ++bad <= 5)
          ADD_FAILURE() << "input " << i << " row " << r << " col " << col << ": 0x" << std::hex << have << " want 0x"
                        << want << std::dec << " (offsets " << c.offset[0] << "," << c.offset[1] << ", stride "
                        << c.stride << ", col0 " << c.col0 << ", chunk " << c.chunk << ", present " << present << ")";
      }
  return bad;
}

template <class T, int Threads>
void every_case() {
  constexpr int E = 16 / int(sizeof(T));
  constexpr int step = 32 * stream_of<T>::copy_units;  // units one warp moves per job
  const int chunks[] = {1, E - 1, E, E + 1, 100, step * E - 1, step * E + 3, 1500, stage_cols};
  int bad = 0;
  for (int offset = 0; offset < E; ++offset)
    for (int chunk : chunks)
      for (int64_t stride : {int64_t(stage_cols), int64_t(stage_cols + 1), int64_t(stage_cols + E + 3)}) {
        // Three rows from row 0; then the matrix's last row alone (rows past the end stay poisoned).
        bad += run_case<T, Threads>({{offset, (offset + 3) % E}, stride, 0, 3, 0, chunk});
        bad += run_case<T, Threads>({{offset, (offset + 1) % E}, stride, 4, 5, 0, chunk});
        if (chunk + 7 <= stage_cols) bad += run_case<T, Threads>({{offset, offset}, stride, 1, 4, 7, chunk});
        if (bad > 20) return;
      }
  // An empty chunk copies nothing: the stage stays poisoned.
  bad += run_case<T, Threads>({{1, 2}, int64_t(stage_cols + 1), 0, 3, 0, 0});
  EXPECT_EQ(bad, 0);
}

class RowStream : public GpuTest {};

TEST_F(RowStream, CopyRealigns16BitRows) { every_case<bf16, 512>(); }
TEST_F(RowStream, CopyRealigns32BitRows) { every_case<float, 512>(); }
TEST_F(RowStream, CopyRealignsWithFewWarps) {
  every_case<bf16, 128>();
  every_case<float, 128>();
}

}  // namespace
