#pragma once
// Element types, their packed pairs, and conversions between them.
//
// Register tiles store elements two at a time ("packed pairs") because that is
// how the tensor-core fragments and the 32-bit registers hold 16-bit data:
//   bf16 -> bf16_2 (__nv_bfloat162), fp16 -> fp16_2 (__half2), float -> float2,
//   fp8 e4m3/e5m2 -> __nv_fp8x2_* (two bytes, only used in memory).
// `packed_t<T>` maps an element type to its pair type, `element_t<P>` back.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tilekit/core/util.cuh"

namespace tilekit {

using bf16 = __nv_bfloat16;
using fp16 = __half;
using fp32 = float;
using fp8e4m3 = __nv_fp8_e4m3;
using fp8e5m2 = __nv_fp8_e5m2;

using bf16_2 = __nv_bfloat162;
using fp16_2 = __half2;
using fp32_2 = float2;
using fp8e4m3_2 = __nv_fp8x2_e4m3;
using fp8e5m2_2 = __nv_fp8x2_e5m2;

// Run-time tag for host APIs (argument structs carry a dtype, not a template).
enum class dtype : uint8_t { bf16, fp16, fp32, fp8_e4m3, fp8_e5m2 };

TILEKIT_HOST_DEVICE constexpr int dtype_bytes(dtype t) {
  switch (t) {
    case dtype::fp32: return 4;
    case dtype::bf16:
    case dtype::fp16: return 2;
    default: return 1;
  }
}
constexpr const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
    case dtype::fp32: return "fp32";
    case dtype::fp8_e4m3: return "fp8_e4m3";
    case dtype::fp8_e5m2: return "fp8_e5m2";
  }
  return "unknown";
}

// Static description of an element type.
template <class T>
struct dtype_traits;

#define TILEKIT_DTYPE_TRAITS(T, P, TAG, NAME)                 \
  template <>                                                 \
  struct dtype_traits<T> {                                    \
    using element = T;                                        \
    using packed = P;                                         \
    static constexpr dtype tag = dtype::TAG;                  \
    static constexpr int bytes = sizeof(T);                   \
    static constexpr const char* name = NAME;                 \
  };
TILEKIT_DTYPE_TRAITS(bf16, bf16_2, bf16, "bf16")
TILEKIT_DTYPE_TRAITS(fp16, fp16_2, fp16, "fp16")
TILEKIT_DTYPE_TRAITS(float, float2, fp32, "fp32")
TILEKIT_DTYPE_TRAITS(fp8e4m3, fp8e4m3_2, fp8_e4m3, "fp8_e4m3")
TILEKIT_DTYPE_TRAITS(fp8e5m2, fp8e5m2_2, fp8_e5m2, "fp8_e5m2")
#undef TILEKIT_DTYPE_TRAITS

template <class T>
using packed_t = typename dtype_traits<T>::packed;

template <class P>
struct element_of;
template <> struct element_of<bf16_2> { using type = bf16; };
template <> struct element_of<fp16_2> { using type = fp16; };
template <> struct element_of<float2> { using type = float; };
template <> struct element_of<fp8e4m3_2> { using type = fp8e4m3; };
template <> struct element_of<fp8e5m2_2> { using type = fp8e5m2; };
template <class P>
using element_t = typename element_of<P>::type;

template <class T>
inline constexpr bool is_16bit_float = std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;
template <class T>
inline constexpr bool is_fp8 = std::is_same_v<T, fp8e4m3> || std::is_same_v<T, fp8e5m2>;
template <class T>
inline constexpr bool is_element = std::is_same_v<T, float> || is_16bit_float<T> || is_fp8<T>;

// ---------------------------------------------------------------------------
// Conversions. `convert<To>(x)` works for every pair of element types and for
// every pair of packed types, on host and device, rounding to nearest even.
// ---------------------------------------------------------------------------
namespace detail {
template <class T>
TILEKIT_HOST_DEVICE TILEKIT_INLINE float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, bf16>) {
    return __bfloat162float(x);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return __half2float(x);
  } else {
    return static_cast<float>(x);  // fp8 types convert through their operator float
  }
}
template <class T>
TILEKIT_HOST_DEVICE TILEKIT_INLINE T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, bf16>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return __float2half_rn(x);
  } else {
    return T(x);  // fp8 constructors round to nearest and saturate to finite
  }
}
}  // namespace detail

template <class To, class From>
TILEKIT_HOST_DEVICE TILEKIT_INLINE To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_element<To> && is_element<From>) {
    return detail::from_float<To>(detail::to_float(x));
  } else {
    // Packed pair -> packed pair, element by element (low element first).
    using ToE = element_t<To>;
    if constexpr (std::is_same_v<To, bf16_2> && std::is_same_v<From, float2>) {
      return __float22bfloat162_rn(x);
    } else if constexpr (std::is_same_v<To, fp16_2> && std::is_same_v<From, float2>) {
      return __float22half2_rn(x);
    } else if constexpr (std::is_same_v<To, float2> && std::is_same_v<From, bf16_2>) {
      return __bfloat1622float2(x);
    } else if constexpr (std::is_same_v<To, float2> && std::is_same_v<From, fp16_2>) {
      return __half22float2(x);
    } else if constexpr (std::is_same_v<To, float2>) {
      return static_cast<float2>(x);  // fp8 pairs: operator float2
    } else if constexpr (is_fp8<ToE>) {
      float2 f = convert<float2>(x);
      return To(f);
    } else {
      float2 f = convert<float2>(x);
      return convert<To>(f);
    }
  }
}

// Build a packed pair from two elements (low = first).
template <class T>
TILEKIT_HOST_DEVICE TILEKIT_INLINE packed_t<T> make_pair(T lo, T hi) {
  if constexpr (std::is_same_v<T, float>) {
    return make_float2(lo, hi);
  } else if constexpr (std::is_same_v<T, bf16>) {
    return bf16_2(lo, hi);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return fp16_2(lo, hi);
  } else {
    return packed_t<T>(make_float2(float(lo), float(hi)));
  }
}
template <class P>
TILEKIT_HOST_DEVICE TILEKIT_INLINE element_t<P> low(P p) {
  if constexpr (std::is_same_v<P, float2>) return p.x;
  else if constexpr (is_16bit_float<element_t<P>>) return p.x;
  else return convert<element_t<P>>(static_cast<float2>(p).x);
}
template <class P>
TILEKIT_HOST_DEVICE TILEKIT_INLINE element_t<P> high(P p) {
  if constexpr (std::is_same_v<P, float2>) return p.y;
  else if constexpr (is_16bit_float<element_t<P>>) return p.y;
  else return convert<element_t<P>>(static_cast<float2>(p).y);
}

// Raw bit views used by the fragment code (a packed 16-bit pair is one 32-bit register).
template <class P>
TILEKIT_HOST_DEVICE TILEKIT_INLINE uint32_t as_u32(P p) {
  static_assert(sizeof(P) == 4, "as_u32 needs a 32-bit packed pair");
  uint32_t u;
  memcpy(&u, &p, 4);
  return u;
}
template <class P>
TILEKIT_HOST_DEVICE TILEKIT_INLINE P from_u32(uint32_t u) {
  static_assert(sizeof(P) == 4, "from_u32 needs a 32-bit packed pair");
  P p;
  memcpy(&p, &u, 4);
  return p;
}

#if defined(__CUDACC__)
// A packed 16-bit pair as two floats (low element first), the cheap way: a bf16 pair with one
// shift and one AND (each half is the top 16 bits of its float), an fp16 pair with cvt.
template <class P>
TILEKIT_DEVICE TILEKIT_INLINE float2 unpack_pair(P p) {
  static_assert(is_16bit_float<element_t<P>>, "unpack_pair: bf16 or fp16 pairs");
  if constexpr (std::is_same_v<P, bf16_2>) {
    const uint32_t u = as_u32(p);
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  } else {
    return convert<float2>(p);
  }
}
#endif

}  // namespace tilekit
