// config.cpp - RuntimeConfig: gathered from tensor/blas.h, the thread pool,
// oneDNN (tensor/kernels/conv_onednn.h) and a probe built by the kernels'
// own toolchain.
#include "interp/config.h"

#include <exception>
#include <memory>

#include "compiler/toolchain.h"
#include "tensor/blas.h"
#include "tensor/kernels/conv_onednn.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

// The preprocessor knows what the flags (-march=native, LAZYLUA_CFLAGS)
// resolve to on this machine with this compiler: ask it rather than guess.
constexpr char kIsaProbe[] = R"probe(
const char* lazylua_vector_isa(void) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  return "avx512";
#elif defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE4_2__)
  return "sse4.2";
#elif defined(__SSE2__)
  return "sse2";
#elif defined(__ARM_FEATURE_SVE)
  return "sve";
#elif defined(__ARM_NEON)
  return "neon";
#else
  return "scalar";
#endif
}
)probe";

std::string probe_vector_isa() {
  const compiler::Toolchain& tool = compiler::toolchain();
  if (!tool.works) return "none";
  std::string error;
  std::shared_ptr<compiler::Library> library =
      compiler::build_in_private_directory(tool, kIsaProbe, &error);
  if (!library) return "unknown";
  auto probe = reinterpret_cast<const char* (*)()>(library->symbol("lazylua_vector_isa"));
  return probe ? std::string(probe()) : "unknown";  // copied before the library unloads
}

const std::string& vector_isa() {
  static const std::string* isa = new std::string(probe_vector_isa());
  return *isa;
}

}  // namespace

RuntimeConfig runtime_config() {
  RuntimeConfig config;
  try {
    const blas::Info info = blas::info();
    if (info.loaded) {
      config.blas = info.name;
      config.blas_core = info.core;
      config.blas_core_source = info.core_source;
      config.blas_threads = info.threads;
    } else {
      config.blas = "none";
      config.blas_error = info.error;
    }
    config.threads = thread_count();
    config.vector_isa = vector_isa();
    config.cpu = blas::cpu_model();
    config.conv = onednn_summary();
  } catch (const std::exception&) {  // only std::bad_alloc can get here
  }
  for (std::string* field : {&config.blas, &config.blas_core, &config.blas_core_source,
                             &config.vector_isa, &config.cpu, &config.conv}) {
    if (field->empty()) *field = "unknown";
  }
  return config;
}

std::string runtime_config_line() {
  const RuntimeConfig config = runtime_config();
  std::string line = "tensors: " + std::to_string(config.threads) +
                     (config.threads == 1 ? " thread, " : " threads, ") + config.vector_isa +
                     " kernels, ";
  // Convolutions last, after a semicolon: tools match the line's start, and
  // the BLAS error before it has commas of its own.
  const std::string conv = "; convolutions: " + config.conv;
  if (config.blas == "none") return line + "no BLAS: " + config.blas_error + conv;
  return line + config.blas + " with " + config.blas_core + " kernels (chosen by " +
         config.blas_core_source + ")" + conv;
}

}  // namespace lazylua
