// index.h - reference kernels that gather, scatter and join along a dim.
// Index arrays hold 1-based positions (they are user data, as the Lua user
// sees it); a position outside [1, size] raises Error naming the op, the
// position and the size.
#pragma once

#include <vector>

#include "../array.h"

namespace lazylua {

// out[i][j] = in[index[i][j]][j] (for dim 0; likewise for others). index is
// i64 (or i32) with in's rank; out has index's shape and in's dtype.
void gather_kernel(const Array& in, int dim, const Array& index, const Array& out);

// out = in with the slices along `dim` picked by the 1-D index.
void index_select_kernel(const Array& in, int dim, const Array& index, const Array& out);

// out[index[i][j]][j] = src[i][j] (for dim 0), or += when `accumulate`.
// out is updated in place (it is the base to scatter into).
void scatter_kernel(const Array& out, int dim, const Array& index, const Array& src,
                    bool accumulate);

// Concatenation of `inputs` (all out's dtype, equal shapes but for `dim`)
// along `dim` into a contiguous out.
void cat_kernel(const std::vector<Array>& inputs, int dim, const Array& out);

}  // namespace lazylua
