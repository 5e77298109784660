// Shifted row streams (tilekit/pipeline/row_stream.cuh, Shifted = true): the row kernels' stream
// for matrices whose rows are not 16-byte aligned, and shifted_row's loads
// (tilekit/ops/row_io.cuh), for 16- and 32-bit elements, every start offset of a row inside its
// 16-byte unit, dense matrices (one copy per item) and strided ones (one copy per row chunk),
// row lengths from 1 element to more than a stage row (chunks cut at col0), and items at the
// matrix's start, middle and end.
//
// The stage is poisoned (all bits 1) before the copy. After it, every element of every row of the
// item is read four ways and checked bit for bit against the source: element by element
// (shifted_row::operator[]), with load_row_aligned (floats; columns past the chunk must hold the
// fill), piece by piece through a voted_row in the warp-blocked layout that the row kernels'
// shifted schedules use (one warp vote for all the row's pieces: the fill rule must hold where the
// vote says the warp is not whole) and, for 16-bit rows, with load_row_pairs_aligned; the
// overread loads of both (overread(row): every unit read, the poison past the chunk overwritten
// with the fill) must give those registers bit for bit (a difference counts as a stray). And the
// order-free loads of reductions (load_row_unordered, load_row_pairs_unordered: held_columns), in
// the same warp-blocked layout, given the columns left in the row from the chunk's start (more
// than the chunk where the row goes on): every column of the chunk in exactly one register, the
// one held_columns names, bit for bit, every other register the fill, and no register of a
// thread that held_columns::all says is whole holding the fill's place. Each source
// is its own allocation, ending exactly at the matrix's last element, so that compute-sanitizer's
// memcheck reports any read past the matrix (the stream moves the last unit element by element
// there).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/memory/tma.cuh"
#include "tilekit/ops/row_io.cuh"
#include "tilekit/pipeline/row_stream.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

constexpr int stage_rows = 3, stage_cols = 2048, inputs = 2;
constexpr float fill = -7.0f;

template <class T>
using stream_of = row_stream<T, inputs, stage_rows, stage_cols, 1, true>;
template <class T, int Threads>
using layout_of = row_layout<Threads, stage_cols / (Threads * vector_elements<T>), vector_elements<T>>;

// out: the item's rows element by element; loaded: load_row_aligned's floats by column; voted:
// the same, loaded piece by piece from voted rows; pairs: load_row_pairs_aligned's raw bits by
// column (16-bit rows); unordered / unordered_pairs: the order-free loads' registers by the
// column held_columns names, hits / pair_hits how many registers named each column, strays the
// registers that broke held_columns (a non-held register not the fill, or a thread said to be
// whole with a non-held register). Each [input][row][stage_cols].
template <class T, int Threads>
__global__ void shifted_kernel(row_source<T> a, row_source<T> b, int64_t first_row, int64_t total_rows, int col0,
                               int chunk, int cols, T* out, float* loaded, float* voted, uint32_t* pairs,
                               float* unordered, uint32_t* unordered_pairs, int* hits, int* pair_hits, int* strays) {
  extern __shared__ __align__(128) unsigned char shared[];
  using stream_t = stream_of<T>;
  using layout = layout_of<T, Threads>;
  stream_t stream(shared);
  constexpr int elements = int(stream_t::stage_bytes / sizeof(T));
  T* stage = stream.data(0, 0, 0);
  for (int i = threadIdx.x; i < elements; i += Threads) memset(stage + i, 0xFF, sizeof(T));
  if (threadIdx.x == 0) stream.init(Threads);
  tma::fence_shared_for_async();  // the poison before the bulk copies (another proxy) overwrite it
  init_barriers_fence();
  __syncthreads();
  const row_source<T> sources[inputs] = {a, b};
  if (threadIdx.x == 0) stream.issue(0, sources, first_row, total_rows, col0, chunk, cols);
  const stage_ring<1> ring;
  stream.wait(ring);
  const int present = int(min(int64_t(stage_rows), total_rows - first_row));
  for (int i = 0; i < inputs; ++i)
    for (int r = 0; r < present; ++r) {
      const shifted_row<T> row = stream.row(0, i, r, sources[i], first_row, col0, chunk, cols);
      const size_t at = size_t(i * stage_rows + r) * stage_cols;
      for (int c = threadIdx.x; c < chunk; c += Threads) out[at + c] = row[c];
      float v[layout::elements];
      load_row_aligned<layout>(v, row, chunk, threadIdx.x, fill);
#pragma unroll
      for (int j = 0; j < layout::elements; ++j) loaded[at + layout::column(threadIdx.x, j)] = v[j];
      {  // the overread load: the same registers, bit for bit
        float o[layout::elements];
        load_row_aligned<layout>(o, overread(row), chunk, threadIdx.x, fill);
#pragma unroll
        for (int j = 0; j < layout::elements; ++j)
          if (__float_as_uint(o[j]) != __float_as_uint(v[j])) atomicAdd(strays, 1);
      }
      {
        using blocked = warp_blocked_row_layout<Threads, layout::groups, vector_elements<T>>;
        using piece = row_piece<blocked>;
        constexpr int V = blocked::group_elements;
        const shifted_row<T> rows[1] = {row};
        voted_row<T> votes[1];
        vote_rows<blocked>(votes, rows, chunk, threadIdx.x);
#pragma unroll
        for (int k = 0; k < blocked::groups; ++k) {
          const int offset = k * blocked::group_stride;
          float w[V];
          load_row_aligned<piece>(w, votes[0] + offset, chunk - offset, threadIdx.x, fill);
#pragma unroll
          for (int j = 0; j < V; ++j) voted[at + blocked::column(threadIdx.x, k * V + j)] = w[j];
        }
      }
      {
        using blocked = warp_blocked_row_layout<Threads, layout::groups, vector_elements<T>>;
        const int t = threadIdx.x;
        float u[blocked::elements];
        const auto held = load_row_unordered<blocked>(u, row, cols - col0, t, fill);
#pragma unroll
        for (int j = 0; j < blocked::elements; ++j) {
          if (held.holds(t, j)) {
            unordered[at + held.column(t, j)] = u[j];
            atomicAdd(&hits[at + held.column(t, j)], 1);
          } else if (__float_as_uint(u[j]) != __float_as_uint(fill) || held.all(t)) {
            atomicAdd(strays, 1);
          }
        }
        if constexpr (is_16bit_float<T>) {
          packed_t<T> p[blocked::elements / 2];
          const auto held_pairs = load_row_pairs_unordered<blocked>(p, row, cols - col0, t, convert<T>(fill));
          const T fill_t = convert<T>(fill);
          unsigned short fill_bits;
          memcpy(&fill_bits, &fill_t, sizeof(fill_bits));
#pragma unroll
          for (int j = 0; j < blocked::elements; ++j) {
            unsigned short e[2];
            memcpy(e, &p[j / 2], sizeof(e));
            if (held_pairs.holds(t, j)) {
              unordered_pairs[at + held_pairs.column(t, j)] = e[j % 2];
              atomicAdd(&pair_hits[at + held_pairs.column(t, j)], 1);
            } else if (e[j % 2] != fill_bits || held_pairs.all(t)) {
              atomicAdd(strays, 1);
            }
          }
        }
      }
      if constexpr (is_16bit_float<T>) {
        packed_t<T> p[layout::elements / 2];
        load_row_pairs_aligned<layout>(p, row, chunk, threadIdx.x, convert<T>(fill));
        packed_t<T> o[layout::elements / 2];  // the overread load: the same pairs, bit for bit
        load_row_pairs_aligned<layout>(o, overread(row), chunk, threadIdx.x, convert<T>(fill));
#pragma unroll
        for (int j = 0; j < layout::elements / 2; ++j) {
          uint32_t x, y;
          memcpy(&x, &o[j], sizeof(x));
          memcpy(&y, &p[j], sizeof(y));
          if (x != y) atomicAdd(strays, 1);
        }
#pragma unroll
        for (int j = 0; j < layout::elements / 2; ++j) {
          unsigned short e[2];
          memcpy(e, &p[j], sizeof(e));
          const int c = layout::column(threadIdx.x, 2 * j);
          pairs[at + c] = e[0];
          pairs[at + c + 1] = e[1];
        }
      }
    }
}

struct shifted_case {
  int offset[inputs];  // elements between each source's aligned allocation and its row 0
  int64_t stride;      // elements between rows
  int cols;            // the matrix's row length
  int64_t first_row, total_rows;
  int col0;            // the chunk's first column (its length: min(stage_cols, cols - col0))
};

// Runs one case and checks every element of the item; returns the number of mismatches (the
// first few are reported).
template <class T, int Threads>
int run_case(const shifted_case& c) {
  const uint32_t poison = poison_bits<T>();
  const int present = int(std::min<int64_t>(stage_rows, c.total_rows - c.first_row));
  const int chunk = std::min(stage_cols, c.cols - c.col0);
  std::vector<device_buffer<T>> sources;
  std::vector<std::vector<T>> hosts;
  row_source<T> rs[inputs];
  for (int i = 0; i < inputs; ++i) {
    const size_t count = size_t(c.offset[i] + (c.total_rows - 1) * c.stride + c.cols);
    std::vector<T> h(count);
    // Never all bits 1 (the poison): bit 0 is clear.
    for (size_t e = 0; e < count; ++e) h[e] = from_raw_bits<T>(uint32_t((e * 2654435761u + 12345u * (i + 1)) & poison) & ~1u);
    sources.emplace_back(h);
    hosts.push_back(std::move(h));
    rs[i] = {sources.back().get() + c.offset[i], c.stride};
  }
  using stream_t = stream_of<T>;
  const size_t outputs = size_t(inputs) * stage_rows * stage_cols;
  device_buffer<T> out(outputs);
  device_buffer<float> loaded(outputs);
  device_buffer<float> voted(outputs);
  device_buffer<uint32_t> pairs(outputs);
  device_buffer<float> unordered(outputs);
  device_buffer<uint32_t> unordered_pairs(outputs);
  device_buffer<int> hits(std::vector<int>(outputs, 0));
  device_buffer<int> pair_hits(std::vector<int>(outputs, 0));
  device_buffer<int> strays(std::vector<int>(1, 0));
  auto kernel = shifted_kernel<T, Threads>;
  TILEKIT_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stream_t::shared_bytes)));
  kernel<<<1, Threads, stream_t::shared_bytes>>>(rs[0], rs[1], c.first_row, c.total_rows, c.col0, chunk, c.cols,
                                                 out.get(), loaded.get(), voted.get(), pairs.get(), unordered.get(),
                                                 unordered_pairs.get(), hits.get(), pair_hits.get(), strays.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<T> got = out.download();
  const std::vector<float> got_loaded = loaded.download();
  const std::vector<float> got_voted = voted.download();
  const std::vector<uint32_t> got_pairs = pairs.download();
  const std::vector<float> got_unordered = unordered.download();
  const std::vector<uint32_t> got_unordered_pairs = unordered_pairs.download();
  const std::vector<int> got_hits = hits.download();
  const std::vector<int> got_pair_hits = pair_hits.download();
  int bad = 0;
  auto report = [&](const char* what, int i, int r, int col, uint32_t have, uint32_t want) {
    if (have != want && ++bad <= 5)
      ADD_FAILURE() << what << ": input " << i << " row " << r << " col " << col << ": 0x" << std::hex << have
                    << " want 0x" << want << std::dec << " (offsets " << c.offset[0] << "," << c.offset[1]
                    << ", stride " << c.stride << ", cols " << c.cols << ", rows " << c.first_row << ".."
                    << c.first_row + present << " of " << c.total_rows << ", col0 " << c.col0 << ")";
  };
  for (int i = 0; i < inputs; ++i)
    for (int r = 0; r < present; ++r)
      for (int col = 0; col < stage_cols; ++col) {
        const size_t at = size_t(i * stage_rows + r) * stage_cols + col;
        const bool inside = col < chunk;
        const T source = inside ? hosts[i][size_t(c.offset[i] + (c.first_row + r) * c.stride + c.col0 + col)] : T{};
        if (inside) report("element", i, r, col, raw_bits(got[at]), raw_bits(source));
        report("load_row_aligned", i, r, col, raw_bits(got_loaded[at]),
               raw_bits(inside ? float(source) : fill));
        report("voted_row pieces", i, r, col, raw_bits(got_voted[at]), raw_bits(inside ? float(source) : fill));
        if constexpr (is_16bit_float<T>)
          report("load_row_pairs_aligned", i, r, col, got_pairs[at], raw_bits(inside ? source : T(fill)));
        // Order-free loads: each column of the chunk in one register, no other column named.
        report("load_row_unordered registers", i, r, col, uint32_t(got_hits[at]), inside ? 1u : 0u);
        if (inside) report("load_row_unordered", i, r, col, raw_bits(got_unordered[at]), raw_bits(float(source)));
        if constexpr (is_16bit_float<T>) {
          report("load_row_pairs_unordered registers", i, r, col, uint32_t(got_pair_hits[at]), inside ? 1u : 0u);
          if (inside) report("load_row_pairs_unordered", i, r, col, got_unordered_pairs[at], raw_bits(source));
        }
      }
  report("order-free registers against held_columns, overread against plain loads", 0, 0, 0,
         uint32_t(strays.download()[0]), 0u);
  return bad;
}

template <class T, int Threads>
void every_case() {
  constexpr int E = 16 / int(sizeof(T));
  int bad = 0;
  for (int offset = 0; offset < E; ++offset)
    for (int cols : {1, E - 1, E + 1, 100, 1023, 1500, stage_cols - 3, stage_cols + 5})
      for (int64_t stride : {int64_t(cols), int64_t(cols + 1), int64_t(cols + E + 3), int64_t((cols + E) / E * E)}) {
        const int o[inputs] = {offset, (offset + 3) % E};
        // From row 0 (the matrix's first unit), from the middle, and the matrix's last row
        // alone (its last unit), with the second chunk of rows wider than a stage row.
        bad += run_case<T, Threads>({{o[0], o[1]}, stride, cols, 0, 5, 0});
        bad += run_case<T, Threads>({{o[0], o[1]}, stride, cols, 1, 7, 0});
        bad += run_case<T, Threads>({{o[0], o[1]}, stride, cols, 4, 5, 0});
        if (cols > stage_cols) {
          bad += run_case<T, Threads>({{o[0], o[1]}, stride, cols, 0, 3, stage_cols});
          bad += run_case<T, Threads>({{o[0], o[1]}, stride, cols, 2, 3, stage_cols});
        }
        if (bad > 20) return;
      }
  // An aligned matrix in a shifted stream: the same (shift 0 everywhere).
  bad += run_case<T, Threads>({{0, 0}, int64_t(stage_cols), stage_cols, 0, 3, 0});
  EXPECT_EQ(bad, 0);
}

class RowStream : public GpuTest {};

TEST_F(RowStream, ShiftedRows16Bit) { every_case<bf16, 256>(); }
TEST_F(RowStream, ShiftedRows32Bit) { every_case<float, 256>(); }
TEST_F(RowStream, ShiftedRowsWithFewThreads) {
  every_case<bf16, 64>();
  every_case<float, 128>();
}

}  // namespace
