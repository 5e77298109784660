#pragma once
// Warpgroup matrix multiply-accumulate (wgmma) on register and shared tiles.
//
// Every function here is executed by all 128 threads of one warpgroup (4
// consecutive warps, the first with warp index % 4 == 0), under
// warpgroup-uniform control flow, with identical shared operands in all 4 warps.
//
// Shapes. One call multiplies a 64 x K A by a K x N B into a 64 x N fp32
// accumulator, looping over K in wgmma steps (16 for bf16/fp16, 32 for fp8)
// and issuing every step asynchronously. Each warp w holds rows 16w..16w+15 of
// the accumulator as a row-layout rt<float, 16, N> (rt.cuh: register for
// register the wgmma D fragment). N is the accumulator's width, 16..256 in
// steps of 16 (rt tiles are built from 16x16 fragments).
//
//   call                 A operand                       B operand          computes
//   mma_AB  / mm_AB      st<T, 64, K> or rt<T, 16, K>    st<T, K, N>        acc (+)= A * B
//   mma_ABt / mm_ABt     st<T, 64, K> or rt<T, 16, K>    st<T, N, K>        acc (+)= A * B^T
//   mma_AtB / mm_AtB     st<T, K, 64>                    st<T, K, N>        acc (+)= A^T * B
//   mma_AtBt / mm_AtBt   st<T, K, 64>                    st<T, N, K>        acc (+)= A^T * B^T
//
// mma_* accumulate into acc; mm_* overwrite it (scale-d = 0 on the first
// K-step, so acc's previous contents, even NaN, are ignored). T is bf16 or
// fp16 (A and B alike); fp8 (e4m3/e5m2, A and B may differ) is supported by
// the K-major/K-major form only, mma_ABt/mm_ABt with A in shared memory,
// because wgmma has no transpose for 8-bit types. A register A operand is each
// warp's 16 rows of the 64 x K matrix as a row-layout rt<bf16|fp16, 16, K>;
// an fp32 accumulator becomes one with warp::copy (HOPPER_NOTES 1.9).
// descriptor.cuh explains how st tiles become wgmma descriptors.
//
// Protocol (PTX 9.7.15; HOPPER_NOTES 1.10). wgmma runs asynchronously and
// reads its register operands while later instructions execute, so:
//   1. Shared operands written with ordinary stores need
//      fence.proxy.async.shared::cta by the writers and a barrier first (TMA
//      writes need only the mbarrier wait).
//   2. mma_fence(acc) before the first mma_* of a batch, and again whenever
//      the threads touched acc (or the register A tile) since the last wgmma.
//   3. mma_*/mm_* calls (any number; they only issue), then mma_commit_group()
//      to close them into one group.
//   4. mma_wait<N>(acc) before reading or writing acc (N = groups allowed to
//      stay in flight; 0 = all done), and before releasing a shared-memory
//      stage that a pending group still reads.
//
//   warpgroup::mma_fence(acc);
//   warpgroup::mm_ABt(acc, a_tile, b_tile);     // acc = A * B^T
//   warpgroup::mma_commit_group();
//   warpgroup::mma_async_wait(acc);             // acc is ready
//
// Compiler side: the accumulator registers are pinned (empty asm that "reads
// and writes" them) around every batch, at mma_fence and at mma_wait(acc), so
// the compiler neither moves acc accesses across the asynchronous window nor
// shuffles acc between registers; ptxas would otherwise insert waits and
// serialize the wgmma pipeline (ptxas info C7511/C7517/C7519).

#include <cstdint>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/ops/warpgroup/descriptor.cuh"
#include "tilekit/ops/warpgroup/wgmma_instructions.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/st.cuh"

#if defined(__CUDACC__)

namespace tilekit::warpgroup {

// Groups that wgmma.wait_group can leave pending (CuTe's limit; HOPPER_NOTES 1.10).
inline constexpr int max_pending_groups = 7;

namespace detail {

// The N/2 fp32 accumulator registers of a row-layout rt<float, 16, N>, in
// wgmma D order (data[0][j][k].x/.y = d[8j + 2k], d[8j + 2k + 1]).
template <int N>
TILEKIT_DEVICE TILEKIT_INLINE float (&accumulator_registers(rt<float, wgmma_m / warpgroup_warps, N>& acc))[N / 2] {
  static_assert(sizeof(acc.data) == sizeof(float) * (N / 2), "accumulator must be exactly N/2 floats per lane");
  return reinterpret_cast<float(&)[N / 2]>(acc.data);
}

// Compiler-only register pinning (no instruction is emitted).
template <class Tile>
TILEKIT_DEVICE TILEKIT_INLINE void pin_registers(Tile& tile) {
  static_assert(is_rt<Tile>, "only register tiles can be pinned");
  if constexpr (std::is_same_v<typename Tile::element, float>) {
    float* regs = reinterpret_cast<float*>(&tile.data);
#pragma unroll
    for (int i = 0; i < int(sizeof(tile.data) / sizeof(float)); ++i) asm volatile("" : "+f"(regs[i])::"memory");
  } else {
    uint32_t* regs = reinterpret_cast<uint32_t*>(&tile.data);
#pragma unroll
    for (int i = 0; i < int(sizeof(tile.data) / sizeof(uint32_t)); ++i) asm volatile("" : "+r"(regs[i])::"memory");
  }
}

// Compiler-only: keeps a (const) register tile live in registers up to this
// point, e.g. a register A operand that the issued wgmma still reads.
template <class Tile>
TILEKIT_DEVICE TILEKIT_INLINE void keep_registers(const Tile& tile) {
  static_assert(is_rt<Tile> && sizeof(typename Tile::packed) == sizeof(uint32_t),
                "keep_registers takes 16-bit register tiles (one packed pair per register)");
  const uint32_t* regs = reinterpret_cast<const uint32_t*>(&tile.data);
#pragma unroll
  for (int i = 0; i < int(sizeof(tile.data) / sizeof(uint32_t)); ++i) asm volatile("" ::"r"(regs[i]) : "memory");
}

template <class Tile>
inline constexpr bool is_accumulator = false;
template <int N>
inline constexpr bool is_accumulator<rt<float, wgmma_m / warpgroup_warps, N, layout::row>> = true;

// Issue A*B over the whole K extent. AMajor/BMajor say which dimension of the
// shared tiles is contiguous (descriptor.cuh); a register A is always K-major.
template <operand_major AMajor, operand_major BMajor, bool Accumulate, class Acc, class ATile, class BTile>
TILEKIT_DEVICE TILEKIT_INLINE void issue_mma(Acc& acc, const ATile& a, const BTile& b) {
  static_assert(is_accumulator<Acc>,
                "the wgmma accumulator is each warp's rows of the 64 x N result: rt<float, 16, N> (row layout)");
  constexpr int n = Acc::cols;
  static_assert(n >= wgmma_n_min && n <= wgmma_n_max && n % wgmma_n_step == 0,
                "wgmma N (accumulator columns) must be 8..256 in steps of 8: split wider outputs into several "
                "accumulators and B tiles");
  static_assert(is_st<BTile>, "the B operand of wgmma must be a shared tile st<T, Rows, Cols>");
  using b_operand = smem_operand<BTile, BMajor>;
  using TB = typename BTile::element;
  static_assert(b_operand::mn_extent == n,
                "B's N extent must equal the accumulator's columns: B is st<T, K, N> for *B forms and "
                "st<T, N, K> for *Bt forms");
  constexpr int imm_scale = 1;  // no input negation
  constexpr int imm_trans_b = BMajor == operand_major::mn ? 1 : 0;
  using instructions = wgmma_instructions<n>;
  float(&d)[n / 2] = accumulator_registers(acc);
  const uint64_t b_first = descriptor_of<BMajor>(b);
  // scale-d of K-step `step`: 0 only for the first step of an overwriting call.
  auto scale_d = [](int step) -> uint32_t { return (Accumulate || step > 0) ? 1u : 0u; };

  pin_registers(acc);
  if constexpr (is_rt<ATile>) {
    using TA = typename ATile::element;
    static_assert(AMajor == operand_major::k, "a register A operand is always K-major: use mma_AB or mma_ABt");
    static_assert(is_16bit_float<TA> && std::is_same_v<TA, TB>,
                  "register-A wgmma needs bf16 or fp16 A and B of the same type (fp8 A must come from shared memory)");
    static_assert(ATile::rows == wgmma_m / warpgroup_warps && ATile::tile_layout == layout::row,
                  "a register A operand is each warp's 16 rows of A: rt<T, 16, K> in row layout");
    static_assert(ATile::cols == b_operand::k_extent, "A's K (rt columns) must equal B's K extent");
    // One instruction per 16-wide fragment column: its 4 packed pairs are the
    // 4 A registers of m64k16 (HOPPER_NOTES 1.9 = rt row layout).
    static_assert(ATile::cols / fragment_dim == b_operand::k_steps, "one 16x16 fragment column per K-step");
#pragma unroll
    for (int step = 0; step < b_operand::k_steps; ++step) {
      const uint32_t a_regs[fragment_pairs] = {as_u32(a.data[0][step][0]), as_u32(a.data[0][step][1]),
                                               as_u32(a.data[0][step][2]), as_u32(a.data[0][step][3])};
      instructions::template register_a<TA, TB, imm_scale, imm_scale, imm_trans_b>(
          d, a_regs, b_operand::advance(b_first, step), scale_d(step));
    }
  } else {
    static_assert(is_st<ATile>, "the A operand of wgmma is a shared tile st<T, R, C> or a register tile rt<T, 16, K>");
    using a_operand = smem_operand<ATile, AMajor>;
    using TA = typename ATile::element;
    static_assert(a_operand::mn_extent == wgmma_m,
                  "a shared A operand has wgmma's M = 64 rows: st<T, 64, K> for A*, st<T, K, 64> for At*");
    static_assert(a_operand::k_extent == b_operand::k_extent, "A and B must have the same K extent");
    const uint64_t a_first = descriptor_of<AMajor>(a);
    if constexpr (is_fp8<TA> || is_fp8<TB>) {
      static_assert(is_fp8<TA> && is_fp8<TB>, "fp8 wgmma needs fp8 (e4m3 or e5m2) A and B");
      static_assert(AMajor == operand_major::k && BMajor == operand_major::k,
                    "fp8 wgmma has no transpose: use mma_ABt/mm_ABt with A = st<T, 64, K>, B = st<T, N, K>");
#pragma unroll
      for (int step = 0; step < b_operand::k_steps; ++step)
        instructions::template shared_a_fp8<TA, TB, imm_scale, imm_scale>(
            d, a_operand::advance(a_first, step), b_operand::advance(b_first, step), scale_d(step));
    } else {
      static_assert(std::is_same_v<TA, TB>, "wgmma A and B must have the same 16-bit type (both bf16 or both fp16)");
      constexpr int imm_trans_a = AMajor == operand_major::mn ? 1 : 0;
#pragma unroll
      for (int step = 0; step < b_operand::k_steps; ++step)
        instructions::template shared_a<TA, TB, imm_scale, imm_scale, imm_trans_a, imm_trans_b>(
            d, a_operand::advance(a_first, step), b_operand::advance(b_first, step), scale_d(step));
    }
  }
  pin_registers(acc);
  if constexpr (is_rt<ATile>) keep_registers(a);
}

}  // namespace detail

// ---- fence / commit / wait ----------------------------------------------------

// Orders this warpgroup's earlier register accesses (to acc, or to a register
// A tile) before the next wgmma, and pins acc for the compiler.
template <class... Tiles>
TILEKIT_DEVICE TILEKIT_INLINE void mma_fence(Tiles&... tiles) {
  (detail::pin_registers(tiles), ...);
#if TILEKIT_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

// Closes every wgmma issued since the last commit into one group.
TILEKIT_DEVICE TILEKIT_INLINE void mma_commit_group() {
#if TILEKIT_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

// Waits until at most PendingGroups committed groups are still in flight.
// Pass the accumulators the caller reads next, so the compiler keeps their
// accesses after the wait.
template <int PendingGroups, class... Tiles>
TILEKIT_DEVICE TILEKIT_INLINE void mma_wait(Tiles&... tiles) {
  static_assert(PendingGroups >= 0 && PendingGroups <= max_pending_groups,
                "mma_wait<N>: N (groups left in flight) must be 0..7");
#if TILEKIT_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PendingGroups) : "memory");
#else
  __trap();
#endif
  (detail::pin_registers(tiles), ...);
}

// Waits for every committed group.
template <class... Tiles>
TILEKIT_DEVICE TILEKIT_INLINE void mma_async_wait(Tiles&... tiles) {
  mma_wait<0>(tiles...);
}

// ---- the products (see the table at the top) ----------------------------------

template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AB(Acc& acc, const A& a, const B& b) {
  detail::issue_mma<operand_major::k, operand_major::mn, true>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AB(Acc& acc, const A& a, const B& b) {
  detail::issue_mma<operand_major::k, operand_major::mn, false>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mma_ABt(Acc& acc, const A& a, const B& b) {
  detail::issue_mma<operand_major::k, operand_major::k, true>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mm_ABt(Acc& acc, const A& a, const B& b) {
  detail::issue_mma<operand_major::k, operand_major::k, false>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AtB(Acc& acc, const A& a, const B& b) {
  static_assert(is_st<A>, "At forms read A from shared memory (st<T, K, 64>); register A is always K-major");
  detail::issue_mma<operand_major::mn, operand_major::mn, true>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AtB(Acc& acc, const A& a, const B& b) {
  static_assert(is_st<A>, "At forms read A from shared memory (st<T, K, 64>); register A is always K-major");
  detail::issue_mma<operand_major::mn, operand_major::mn, false>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mma_AtBt(Acc& acc, const A& a, const B& b) {
  static_assert(is_st<A>, "At forms read A from shared memory (st<T, K, 64>); register A is always K-major");
  detail::issue_mma<operand_major::mn, operand_major::k, true>(acc, a, b);
}
template <class Acc, class A, class B>
TILEKIT_DEVICE TILEKIT_INLINE void mm_AtBt(Acc& acc, const A& a, const B& b) {
  static_assert(is_st<A>, "At forms read A from shared memory (st<T, K, 64>); register A is always K-major");
  detail::issue_mma<operand_major::mn, operand_major::k, false>(acc, a, b);
}

}  // namespace tilekit::warpgroup

#endif  // defined(__CUDACC__)
