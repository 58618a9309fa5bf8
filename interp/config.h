// config.h - what this process computes with: the BLAS library and the
// kernel set ("core") it runs, thread counts, the vector instruction set the
// generated kernels are compiled for, the library and instruction set of
// convolutions, and the CPU. Shown by tensor.config() and the extra line of
// `lazylua -v`.
#pragma once

#include <string>

namespace lazylua {

struct RuntimeConfig {
  std::string blas;              // "OpenBLAS 0.3.21", or "none" when it cannot be loaded
  std::string blas_error;        // why not, when blas == "none"
  std::string blas_core;         // "SkylakeX", "Haswell", ...
  std::string blas_core_source;  // "lazylua", "OPENBLAS_CORETYPE" or "openblas"
  int threads = 1;               // lazylua's kernel threads
  int blas_threads = 1;          // OpenBLAS's own threads (lazylua keeps 1)
  std::string
      vector_isa;   // "avx512", "avx2", ... of generated kernels; "none" without a C compiler
  std::string cpu;  // the CPU's model name
  // "oneDNN 2.6.3, avx2", ", off (LAZYLUA_CONV=columns)" appended when
  // oneDNN is off (tensor/kernels/conv_onednn.h)
  std::string conv;
};

// Loads OpenBLAS if it is not yet. The vector ISA is asked of the C
// compiler once per process (a probe build with the kernels' flags, a few
// tens of ms). Never throws: what cannot be found reads "unknown".
RuntimeConfig runtime_config();

// One line for `lazylua -v`, e.g. "tensors: 2 threads, avx512 kernels,
// OpenBLAS 0.3.21 with SkylakeX kernels (chosen by lazylua); convolutions:
// oneDNN 2.6.3, avx512_core".
std::string runtime_config_line();

}  // namespace lazylua
