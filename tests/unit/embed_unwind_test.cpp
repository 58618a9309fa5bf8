// embed_unwind_test.cpp - bindings that build big results (ONNX bytes,
// tolist tables, checkpoint tables) under a tight memory_limit, over and
// over: each call ends in LAZYLUA_OK or LAZYLUA_ERROR_MEMORY, and nothing
// leaks: no Lua error may skip the destructors of the C++ objects a binding
// holds (interp/lua_safe.h). The sanitizer stage runs this under ASan's
// leak check too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "lazylua.h"

namespace {

// This process's resident memory, in MiB.
double resident_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

// An ONNX model (as native.onnx_encode_model takes it) whose graph lists
// the same 1 MiB tensor `copies` times: each is copied into the encoding.
constexpr const char* kSetup = R"(
native = require "stdlib.native"
one_mib = tensor.ones(262144)
function model_with(copies)
  local initializers = {}
  for i = 1, copies do initializers[i] = {name = "w" .. i, tensor = one_mib} end
  return {ir_version = 8, opset = {[""] = 13},
          graph = {name = "g", nodes = {}, initializers = initializers, inputs = {},
                   outputs = {}}}
end
)";

class EmbedUnwindTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (lua_) lazylua_close(lua_);
    if (!checkpoint_.empty()) std::remove(checkpoint_.c_str());
  }

  // Runs the chunk: OK, or a memory error (the limit is meant to be hit).
  void run_ok_or_memory(const std::string& chunk) {
    const lazylua_status status = lazylua_run_string(lua_, chunk.c_str(), "=chunk");
    EXPECT_TRUE(status == LAZYLUA_OK || status == LAZYLUA_ERROR_MEMORY)
        << chunk << ": status " << status << ": " << lazylua_error_message(lua_);
  }

  void run_memory_error(const std::string& chunk) {
    EXPECT_EQ(lazylua_run_string(lua_, chunk.c_str(), "=chunk"), LAZYLUA_ERROR_MEMORY)
        << chunk << ": " << lazylua_error_message(lua_);
  }

  // One round of every big-result binding, each failing at its own point.
  void round() {
    // ONNX: 4 MiB fits; 40 and 100 MiB are refused by the encoder's budget
    // charge; the sizes between fail at the serialized bytes or their push.
    for (int copies : {4, 12, 16, 20, 40, 100}) {
      run_ok_or_memory("bytes = native.onnx_encode_model(model_with(" + std::to_string(copies) +
                       ")); bytes = nil");
    }
    run_memory_error("native.onnx_encode_model(model_with(100))");
    // tolist: 4M numbers need 64 MiB of Lua table.
    run_memory_error("local list = tensor.ones(4000000):tolist()");
    run_memory_error("local list = tensor.ones(2, 2000000):tolist()");
    // A checkpoint of 64 MiB loads into tables and tensors past the limit.
    run_memory_error("local loaded = tensor.load('" + checkpoint_ + "')");
    // tostring, tensor.graph, tensor.ir: results that fit.
    run_ok_or_memory("local text = tostring(tensor.ones(1000, 1000))");
    run_ok_or_memory("local graph = tensor.graph(tensor.ones(1000) + 1)");
  }

  lazylua_interpreter* lua_ = nullptr;
  std::string checkpoint_;
};

TEST_F(EmbedUnwindTest, BigResultsUnderMemoryLimitLeakNothing) {
  checkpoint_ = ::testing::TempDir() + "lazylua_unwind_checkpoint.tnsr";
  {
    // The checkpoint, written without a limit.
    lazylua_interpreter* writer = nullptr;
    ASSERT_EQ(lazylua_open(nullptr, &writer), LAZYLUA_OK);
    const std::string chunk =
        "local t = {} for i = 1, 64 do t['w' .. i] = tensor.ones(262144) end "
        "tensor.save('" +
        checkpoint_ + "', t)";
    EXPECT_EQ(lazylua_run_string(writer, chunk.c_str(), "=save"), LAZYLUA_OK)
        << lazylua_error_message(writer);
    lazylua_close(writer);
  }
  lazylua_options options;
  lazylua_options_init(&options);
  options.memory_limit = size_t{48} << 20;
  ASSERT_EQ(lazylua_open(&options, &lua_), LAZYLUA_OK);
  ASSERT_EQ(lazylua_run_string(lua_, kSetup, "=setup"), LAZYLUA_OK) << lazylua_error_message(lua_);

  // Warm up (allocator caches, code paths), then measure.
  for (int i = 0; i < 2; i++) round();
  const double before = resident_mib();
  for (int i = 0; i < 6; i++) round();
  const double growth = resident_mib() - before;
  // Each leaking round would keep tens of MiB (the ModelProto and its
  // bytes, the tolist array, the decoded checkpoint).
#ifndef __SANITIZE_ADDRESS__
  // (Under AddressSanitizer freed memory waits in its quarantine: its leak
  // check at exit does this job there.)
  EXPECT_LT(growth, 40.0) << "resident memory grew by " << growth << " MiB over 6 rounds";
#else
  (void)growth;
#endif

  // The budget got every byte back: two 19 MiB buffers (the op and its
  // result) still fit under the 48 MiB limit.
  EXPECT_EQ(lazylua_run_string(lua_,
                               "collectgarbage() collectgarbage()\n"
                               "local t = tensor.zeros(5000000)\n"
                               "t:add_(1)\n"
                               "assert(t:sum():item() == 5000000)",
                               "=after"),
            LAZYLUA_OK)
      << lazylua_error_message(lua_);
  // And the interpreter still encodes what fits.
  EXPECT_EQ(lazylua_run_string(lua_,
                               "local bytes = native.onnx_encode_model(model_with(2))\n"
                               "assert(#bytes > 2 * 1048576)",
                               "=small"),
            LAZYLUA_OK)
      << lazylua_error_message(lua_);
}

}  // namespace
