// matmul.h - matrix products through OpenBLAS.
#pragma once

#include "../array.h"

namespace lazylua {

// out[b] = a[b] @ b[b] for rank-3 arrays a [B, M, K], b [B, K, N] and a
// contiguous out [B, M, N]; B may be 1. a and b have out's dtype. Batch
// strides may be 0 (broadcast batches). f32/f64 go to sgemm/dgemm (../blas.h); an
// operand whose last two dims are transposed (or contiguous) is passed with
// the matching transpose flag rather than copied; other layouts are copied
// first. Integer and bool dtypes use a blocked loop (bool: logical or-of-and).
void matmul_kernel(const Array& a, const Array& b, const Array& out);

// Row-major C [m, n] = op(A) op(B) for f32 (or f64 when is_double), split
// into bands on the thread pool when large (inline inside a parallel
// region). Each element of C is computed the same way whatever the split.
void float_gemm(bool is_double, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc);

// The same product as one BLAS call (or, when very long, a run of calls
// cut by its size alone, as above), never split by the thread count: the
// calls made depend only on the shapes. OpenBLAS's result for an element
// can change in the last bits with the extent of the call that computes it
// (its edge kernels sum in another order), so kernels whose bits must not
// depend on the thread count call this and split the work themselves.
void float_gemm_unsplit(bool is_double, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                        int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, void* c,
                        int64_t ldc);

}  // namespace lazylua
