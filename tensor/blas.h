// blas.h - OpenBLAS, loaded at run time with the kernel set lazylua picks.
//
// Debian's OpenBLAS (DYNAMIC_ARCH) chooses its kernels ("core") from the CPU
// model once, in its load-time constructor, and on virtual machines it often
// guesses wrong (an AVX-512 Xeon VM got the SSE3 Prescott kernels: sgemm ran
// 5x slower). It reads OPENBLAS_CORETYPE in that constructor, so lazylua does
// not link it: load() (called when the tensor module opens) dlopens
// libopenblas.so.0 with OPENBLAS_CORETYPE set from the CPU's feature bits
// (preferred_core()), then puts the environment back as it was. A user's own OPENBLAS_CORETYPE
// wins. If the process had loaded OpenBLAS already (a host program linked to it), that copy is used
// as it is. LAZYLUA_BLAS names another library file to load instead of libopenblas.so.0 (it must
// export cblas_sgemm/dgemm).
//
// Example:
//   blas::sgemm(false, true, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);  // C = A B^T
//   blas::Info info = blas::info();  // info.core == "SkylakeX", ...
#pragma once

#include <cstdint>
#include <string>

namespace lazylua::profiler {
class Span;
}

namespace lazylua::blas {

// Loads OpenBLAS if it is not yet (thread-safe, once per process). Call it
// early, while no other thread of lazylua's runs: loading changes the
// environment for a moment, which threads reading it (posix_spawn of the C
// compiler) must not see being rewritten. Never throws: a failure is kept
// for require().
void load() noexcept;
// load(), then throws Error naming `what` and the reason when OpenBLAS
// cannot be loaded.
void require(const char* what);

// Row-major C = alpha op(A) op(B) + beta C, op = transpose or not: cblas_sgemm
// and cblas_dgemm. Load OpenBLAS with require() first (these throw too if it
// is missing, which must not happen on a pool thread).
// Names a product's profiler span (when profiling) as every product is
// named: "NAME MxNxK" and the Lua line of its op, with its bytes and flops.
void name_product_span(profiler::Span& span, const char* name, int64_t m, int64_t n, int64_t k,
                       int64_t element_size);

void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc);
void dgemm(bool transpose_a, bool transpose_b, int m, int n, int k, double alpha, const double* a,
           int lda, const double* b, int ldb, double beta, double* c, int ldc);

// OpenBLAS's own thread count. lazylua keeps it at 1 (set when loading):
// products are split on lazylua's pool (kernels/matmul.cpp).
void set_threads(int n);
int threads();

// What was loaded, for tensor.config() and `lazylua -v`. Loads OpenBLAS.
struct Info {
  bool loaded = false;
  std::string error;        // when !loaded: why
  std::string name;         // "OpenBLAS 0.3.21"
  std::string config;       // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  std::string core;         // openblas_get_corename(): "SkylakeX", "Haswell", ...
  std::string core_source;  // "lazylua", "OPENBLAS_CORETYPE" (the user's) or "openblas"
  int threads = 0;          // OpenBLAS's own threads
};
Info info();

// The OpenBLAS core lazylua asks for on this CPU, or nullptr to leave
// OpenBLAS's own choice (a CPU without AVX, or not x86-64).
const char* preferred_core();

// The CPU's model name ("AMD EPYC 9B45", from cpuid) and the widest vector
// instruction set it and the OS support: "avx512", "avx2", "avx", "sse4.2",
// "sse2" (or "unknown" off x86-64).
std::string cpu_model();
const char* cpu_vector_isa();

}  // namespace lazylua::blas
