// tensor_format.h - how tensors print (Torch7 style).
#pragma once

#include <string>

#include "tensor/array.h"

namespace lazylua {

// The text tostring(t) and print(t) show: aligned columns, a common scale
// factor when it helps, large tensors elided in the middle, and a footer
// such as "[f32 tensor of size 2x3]". `a` may have any strides.
std::string format_tensor(const Array& a);

}  // namespace lazylua
