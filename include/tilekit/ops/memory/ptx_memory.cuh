#pragma once
// Thin wrappers over the PTX memory instructions the tile moves are built
// from: 16-byte shared loads/stores on 32-bit shared-window addresses, and
// ldmatrix / stmatrix (HOPPER_NOTES 8.1, 8.2). No layout logic lives here;
// the callers compute addresses through st::offset() so that every access
// honours the tile's swizzle.
//
// Every wrapper is `asm volatile`: the compiler must neither merge two reads
// of the same shared address across a barrier nor move them across one
// (the data may have been rewritten by another thread in between). Stores
// also clobber "memory" so that ordinary C++ reads are not cached across them.

#include <cstdint>

#include "tilekit/core/util.cuh"

#if defined(__CUDACC__)
namespace tilekit::ptx {

// Bytes moved by one vector shared / global access (the widest per thread).
inline constexpr int vector_access_bytes = 16;

// 16 bytes from the shared window.
TILEKIT_DEVICE TILEKIT_INLINE uint4 ld_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}
TILEKIT_DEVICE TILEKIT_INLINE void st_shared_16(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
// 8 bytes (two fp32, or any 8-byte pair).
TILEKIT_DEVICE TILEKIT_INLINE uint2 ld_shared_8(uint32_t address) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(address));
  return v;
}
TILEKIT_DEVICE TILEKIT_INLINE void st_shared_8(uint32_t address, uint2 v) {
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(address), "r"(v.x), "r"(v.y) : "memory");
}
// 4 bytes.
TILEKIT_DEVICE TILEKIT_INLINE uint32_t ld_shared_4(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(address));
  return v;
}
TILEKIT_DEVICE TILEKIT_INLINE void st_shared_4(uint32_t address, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(address), "r"(v) : "memory");
}

// ldmatrix x4: four 8x8 b16 matrices; lanes 8m..8m+7 give the 8 row addresses
// (16 B each, 16-B aligned) of matrix m, and register m of lane l receives
// row l/4, columns 2(l%4), 2(l%4)+1 of matrix m (.trans: the transposed
// element pair, i.e. column l/4, rows 2(l%4), 2(l%4)+1).
TILEKIT_DEVICE TILEKIT_INLINE void ldmatrix_x4(uint32_t (&regs)[4], uint32_t row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(row_address));
}
TILEKIT_DEVICE TILEKIT_INLINE void ldmatrix_x4_trans(uint32_t (&regs)[4], uint32_t row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(row_address));
}
// stmatrix x4: the exact inverse of ldmatrix x4 (same lane -> address map).
TILEKIT_DEVICE TILEKIT_INLINE void stmatrix_x4(uint32_t row_address, const uint32_t (&regs)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_address),
               "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3])
               : "memory");
}
TILEKIT_DEVICE TILEKIT_INLINE void stmatrix_x4_trans(uint32_t row_address, const uint32_t (&regs)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_address),
               "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3])
               : "memory");
}

}  // namespace tilekit::ptx
#endif  // __CUDACC__
