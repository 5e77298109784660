// Clusters and distributed shared memory (ops/sync/cluster.cuh, mbarrier::arrive_remote):
//   * special registers: rank / size / cluster id agree with the launch;
//   * a cluster-wide reduction: every CTA sums its slice, sends its partial to every peer
//     with st.async (4-, 8- and 16-byte forms) completing on the peer's mbarrier, and every
//     CTA ends up with the cluster total (exact: the inputs are small integers);
//   * plain remote loads / stores across a cluster barrier, and remote mbarrier arrivals.
// Cluster sizes 2, 4 and 8 (launched at run time with cudaLaunchKernelEx).
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

constexpr int max_cluster = 8;
constexpr int reduce_threads = 256;
constexpr int elements_per_cta = 4096;

// Per CTA: [0] cluster sum, [1] cluster sum of squares, [2] number of partials received
// (from the 4-byte stores), [3] sum of sender ranks, [4] cluster sum from the 8-byte (double)
// stores, [5] rank, [6] size, [7] cluster id, [8] value loaded from the next CTA,
// [9] value the previous CTA stored here, [10] remote arrivals observed (1 = barrier done).
constexpr int outputs_per_cta = 11;

struct cluster_storage {
  float4 statistics[max_cluster];  // {sum, sum of squares, 1, sender rank} from each CTA
  double sums[max_cluster];        // the same sum as a double
  int counts[max_cluster];         // 1 from each CTA
  float warp_sums[reduce_threads / warp_threads];
  float warp_squares[reduce_threads / warp_threads];
  mbarrier received;               // completes when every peer's partials have landed
  mbarrier all_arrived;            // completes when every CTA arrived remotely once
  int neighbour_value;             // read by the next CTA with load_remote
  int inbox;                       // written by the previous CTA with store_remote
};

__global__ void __launch_bounds__(reduce_threads) cluster_reduce_kernel(const float* in, float* out) {
  __shared__ cluster_storage s;
  const uint32_t rank = cluster::rank();
  const uint32_t ctas = cluster::size();
  if (threadIdx.x == 0) {
    s.received.init(1);
    s.all_arrived.init(ctas);
    s.neighbour_value = int(1000 * blockIdx.x + 7);
  }
  init_barriers_fence();
  cluster::sync();  // peers' barriers are initialised before anyone sends

  // 1. This CTA's partial sums.
  float sum = 0, squares = 0;
  for (int i = threadIdx.x; i < elements_per_cta; i += blockDim.x) {
    const float x = in[size_t(blockIdx.x) * elements_per_cta + i];
    sum += x;
    squares += x * x;
  }
  for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  }
  if (laneid() == 0) s.warp_sums[warpid()] = sum, s.warp_squares[warpid()] = squares;
  __syncthreads();

  // 2. Thread p < ctas sends this CTA's partials to CTA p (all-to-all).
  constexpr uint32_t bytes_per_sender = sizeof(float4) + sizeof(double) + sizeof(int);
  if (threadIdx.x == 0) s.received.arrive_expect_tx(ctas * bytes_per_sender);
  if (threadIdx.x < ctas) {
    float cta_sum = 0, cta_squares = 0;
    for (int w = 0; w < reduce_threads / warp_threads; ++w) cta_sum += s.warp_sums[w], cta_squares += s.warp_squares[w];
    const uint32_t peer = threadIdx.x;
    const uint32_t peer_barrier = cluster::map_shared(&s.received, peer);
    cluster::store_remote_async(cluster::map_shared(&s.statistics[rank], peer),
                                make_float4(cta_sum, cta_squares, 1.f, float(rank)), peer_barrier);
    cluster::store_remote_async(cluster::map_shared(&s.sums[rank], peer), double(cta_sum), peer_barrier);
    cluster::store_remote_async(cluster::map_shared(&s.counts[rank], peer), 1, peer_barrier);
    // 3. One remote arrival on every CTA's all_arrived barrier (count = ctas).
    s.all_arrived.arrive_remote(peer);
  }
  s.received.wait(phase{});
  s.all_arrived.wait(phase{});

  if (threadIdx.x == 0) {
    float4 total = make_float4(0, 0, 0, 0);
    double total_double = 0;
    int count = 0;
    for (uint32_t k = 0; k < ctas; ++k) {
      total.x += s.statistics[k].x, total.y += s.statistics[k].y, total.z += s.statistics[k].z,
          total.w += s.statistics[k].w;
      total_double += s.sums[k];
      count += s.counts[k];
    }
    float* o = out + size_t(blockIdx.x) * outputs_per_cta;
    o[0] = total.x, o[1] = total.y, o[2] = float(count), o[3] = total.w, o[4] = float(total_double);
    o[5] = float(rank), o[6] = float(ctas), o[7] = float(cluster::id_x());
    // 4. Plain DSMEM: read the next CTA's value, write into the previous CTA's inbox.
    const uint32_t next = (rank + 1) % ctas, previous = (rank + ctas - 1) % ctas;
    o[8] = float(cluster::load_remote<int>(cluster::map_shared(&s.neighbour_value, next)));
    cluster::store_remote(cluster::map_shared(&s.inbox, previous), int(1000 * blockIdx.x + 3));
  }
  cluster::arrive();  // release the inbox store ...
  cluster::wait();    // ... and acquire the one written here
  if (threadIdx.x == 0) {
    float* o = out + size_t(blockIdx.x) * outputs_per_cta;
    o[9] = float(s.inbox);
    o[10] = s.all_arrived.test_wait(0) ? 1.f : 0.f;
  }
  cluster::sync();  // nobody exits while a peer may still read its shared memory
}

class Cluster : public GpuTest {};

void run_cluster_reduce(int cluster_size) {
  SCOPED_TRACE(::testing::Message() << "cluster size " << cluster_size);
  constexpr int clusters = 6;
  const int ctas = clusters * cluster_size;
  std::mt19937_64 rng(test_seed());
  // Small integers: every partial and total is exact in fp32, so the check is exact.
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> host(size_t(ctas) * elements_per_cta);
  for (auto& x : host) x = float(dist(rng));
  device_buffer<float> in(host);
  device_buffer<float> out{size_t(ctas) * outputs_per_cta};

  launch_clusters(cluster_reduce_kernel, ctas, reduce_threads, cluster_size, static_cast<const float*>(in.get()),
                  out.get());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();

  for (int cta = 0; cta < ctas; ++cta) {
    const int cluster_id = cta / cluster_size, rank = cta % cluster_size;
    double sum = 0, squares = 0;
    for (int k = 0; k < cluster_size; ++k)
      for (int i = 0; i < elements_per_cta; ++i) {
        const double x = host[size_t(cluster_id * cluster_size + k) * elements_per_cta + i];
        sum += x, squares += x * x;
      }
    const float* o = &got[size_t(cta) * outputs_per_cta];
    SCOPED_TRACE(::testing::Message() << "cta " << cta);
    EXPECT_EQ(o[0], sum);
    EXPECT_EQ(o[1], squares);
    EXPECT_EQ(o[2], cluster_size);
    EXPECT_EQ(o[3], cluster_size * (cluster_size - 1) / 2);
    EXPECT_EQ(o[4], sum);
    EXPECT_EQ(o[5], rank);
    EXPECT_EQ(o[6], cluster_size);
    EXPECT_EQ(o[7], cluster_id);
    const int next_cta = cluster_id * cluster_size + (rank + 1) % cluster_size;
    const int previous_sender = cluster_id * cluster_size + (rank + 1) % cluster_size;  // its previous is us
    EXPECT_EQ(o[8], 1000 * next_cta + 7);
    EXPECT_EQ(o[9], 1000 * previous_sender + 3);
    EXPECT_EQ(o[10], 1.f);
  }
}

TEST_F(Cluster, DistributedSumClusterOf2) { run_cluster_reduce(2); }
TEST_F(Cluster, DistributedSumClusterOf4) { run_cluster_reduce(4); }
TEST_F(Cluster, DistributedSumClusterOf8) { run_cluster_reduce(8); }

// ---------------------------------------------------------------------------------------------
// Cluster barrier: split arrive / wait orders plain shared writes across CTAs, many rounds.
// Round k: every CTA writes k into its slot of every peer, then arrive/wait, then checks that
// every slot holds k; then a second barrier so nobody overwrites a slot still being read.
constexpr int barrier_rounds = 64;

__global__ void __cluster_dims__(4, 1, 1) cluster_barrier_kernel(int* errors) {
  __shared__ int slots[4];
  const uint32_t rank = cluster::rank();
  cluster::arrive_relaxed();  // only control: every CTA of the cluster is running
  cluster::wait();
  for (int round = 1; round <= barrier_rounds; ++round) {
    if (threadIdx.x < 4) cluster::store_remote(cluster::map_shared(&slots[rank], threadIdx.x), round);
    cluster::arrive();
    cluster::wait();
    if (threadIdx.x < 4 && slots[threadIdx.x] != round) atomicAdd(errors, 1);
    cluster::sync();  // the reads above are done before the next round's remote writes

  }
}

TEST_F(Cluster, BarrierOrdersRemoteStores) {
  device_buffer<int> errors{1};
  TILEKIT_CHECK_CUDA(cudaMemset(errors.get(), 0, sizeof(int)));
  cluster_barrier_kernel<<<8 * 4, 64>>>(errors.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(errors.download()[0], 0);
}

}  // namespace
