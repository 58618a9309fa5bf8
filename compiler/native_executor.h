// native_executor.h - the Executor that runs graphs as compiled native code.
#pragma once

#include <memory>
#include <string>

#include "tensor/context.h"

namespace lazylua::compiler {

// How a graph seen for the first time waits for its native code:
// `background` (the default) runs it on the reference interpreter at once
// while the code is built on a compile thread, and later runs use native
// code when it is ready; `sync` (LAZYLUA_COMPILE=sync) builds first, for
// benchmarks and tests; `off` never compiles.
enum class CompileMode { background, sync, off };
CompileMode compile_mode_from_environment();

class DiskCache;

// The compiler's executor. If no C compiler works, it says so once on
// stderr and runs every graph on the reference interpreter. Compiled graphs
// go to `cache` (one that lives as long as the process, such as
// DiskCache::for_directory's), or DiskCache::instance() when null.
std::unique_ptr<Executor> make_native_executor(CompileMode mode, int debug_level,
                                               DiskCache* cache = nullptr);

// The generated C source for a graph (what tensor.code shows).
std::string generated_source(const Graph& graph);

}  // namespace lazylua::compiler
