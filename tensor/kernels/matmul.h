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

}  // namespace lazylua
