// conv_onednn.h - which oneDNN runs f32 convolutions (conv_onednn.cpp) and
// with which instruction set, for tensor.config() and `lazylua -v`. oneDNN
// picks its kernels' ISA itself at run time, so a benchmark's numbers can
// only be read knowing it. A header of its own keeps <dnnl.hpp> out of
// the files that include conv_geometry.h or conv.h.
#pragma once

#include <string>

namespace lazylua {

// "oneDNN 2.6.3, avx2": the loaded library's version and the widest ISA
// its JIT kernels use on this CPU (oneDNN's choice: the CPU's features,
// capped by ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA), named as in
// dnnl::cpu_isa ("sse41", "avx2", "avx512_core", "avx512_core_amx", ...;
// "reference" when no JIT ISA applies). With LAZYLUA_CONV=columns it ends
// ", off (LAZYLUA_CONV=columns)": every convolution runs on columns and
// OpenBLAS. Never throws but std::bad_alloc.
std::string onednn_summary();

}  // namespace lazylua
