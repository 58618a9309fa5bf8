// simd.h - fixed-width vectors (GCC/Clang vector extensions) for kernels.
//
// The kernels are built with -O3 but without -ffast-math, so GCC will not
// reassociate float reductions, will not vectorize NaN-propagating max/min
// and will not if-convert clamps that might trap. Writing those loops with
// explicit 32-byte vectors makes them vectorize on any x86-64 (AVX2 or
// AVX-512 with -march=native, two SSE registers otherwise) and on AArch64.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace lazylua::simd {

constexpr int kVectorBytes = 32;

template <typename T>
struct VectorOf {
  typedef T type __attribute__((vector_size(kVectorBytes)));
};
// Vec<float> holds 8 floats, Vec<double> 4 doubles.
template <typename T>
using Vec = typename VectorOf<T>::type;

template <typename T>
constexpr int kLanes = kVectorBytes / sizeof(T);

// Loads and stores need not be aligned (memcpy compiles to vmovups).
template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}
// x - 0 is x for every x (0 + x would turn -0 into +0, which the compiler
// must then compute: an add before every broadcast).
template <typename T>
inline Vec<T> broadcast(T x) {
  return x - Vec<T>{};
}

// a * b + c rounded once where the CPU has FMA (an explicit request: the
// build does not contract a * b + c, CMakeLists.txt), else rounded twice.
inline Vec<float> fma(Vec<float> a, Vec<float> b, Vec<float> c) {
#if defined(__FMA__)
  return __builtin_ia32_vfmaddps256(a, b, c);
#else
  return a * b + c;
#endif
}
inline Vec<double> fma(Vec<double> a, Vec<double> b, Vec<double> c) {
#if defined(__FMA__)
  return __builtin_ia32_vfmaddpd256(a, b, c);
#else
  return a * b + c;
#endif
}
inline double fma(double a, double b, double c) {
#if defined(__FMA__)
  return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}
inline float fma(float a, float b, float c) {
#if defined(__FMA__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// max/min where NaN wins: once a lane holds NaN it stays NaN. Works on
// scalars and vectors alike (the comparisons give lane masks for vectors).
template <typename V>
inline V max_nan(V a, V b) {
  return (b > a) | (b != b) ? b : a;
}
template <typename V>
inline V min_nan(V a, V b) {
  return (b < a) | (b != b) ? b : a;
}
inline float max_nan(float a, float b) {
  return (b > a || b != b) ? b : a;
}
inline double max_nan(double a, double b) {
  return (b > a || b != b) ? b : a;
}
inline float min_nan(float a, float b) {
  return (b < a || b != b) ? b : a;
}
inline double min_nan(double a, double b) {
  return (b < a || b != b) ? b : a;
}

// Folds the lanes of a vector with a binary function, in a fixed order.
template <typename T, typename F>
inline T fold_lanes(Vec<T> v, F&& combine) {
  T result = v[0];
  for (int lane = 1; lane < kLanes<T>; ++lane) result = combine(result, v[lane]);
  return result;
}

}  // namespace lazylua::simd
