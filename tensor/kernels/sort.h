// sort.h - the reference kernel of argsort, the one IR op behind sort,
// argsort, topk, kthvalue, median and msort (tensor/sorting.h).
#pragma once

#include "../array.h"

namespace lazylua {

// The positions that sort `in` (any strides, any dtype) along 0-based `dim`,
// as 1-based i64 into `out` (contiguous, in's shape). Stable: equal
// elements keep their order, in both directions. NaN counts as larger than
// every number (PyTorch's order), so it comes last ascending and first
// descending; -0 and 0 are equal.
void argsort_kernel(const Array& in, int dim, bool descending, const Array& out);

}  // namespace lazylua
