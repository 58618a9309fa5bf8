// node_release_test.cpp - releasing graphs of IR nodes: a chain far deeper
// than the stack is freed without recursion, on any thread, and a thread
// that ends leaves nothing behind (the sanitizer build's leak checker fails
// the run otherwise), also when a thread-exit destructor releases nodes
// after the release worklist itself is gone.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tensor/ir.h"

namespace lazylua {
namespace {

NodeRef chain(int length) {
  NodeRef node = make_scalar(ops::Scalar::from_double(1.0), DType::f32, SourceLocation{});
  for (int i = 0; i < length; i++) {
    node = make_node(Op::unary, static_cast<uint8_t>(UnaryOp::neg), DType::f32, Shape{}, {node}, {},
                     SourceLocation{});
  }
  return node;
}

TEST(NodeRelease, AChainDeeperThanTheStackIsFreedIteratively) {
  NodeRef deep = chain(300000);  // recursion would need tens of MB of stack
  deep.reset();
  SUCCEED();
}

// Holds a chain until the thread's thread_local objects are destroyed.
struct Holder {
  NodeRef node;
};

TEST(NodeRelease, ThreadsThatEndLeaveNothingBehind) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([t] {
      // Made before any node dies on this thread: destroyed after the
      // worklist's owner when the thread ends, so it releases "late".
      static thread_local Holder holder;
      holder.node = chain(1000 + t);
      NodeRef temporary = chain(10000);
      temporary.reset();
    });
  }
  for (std::thread& thread : threads) thread.join();
  SUCCEED();
}

}  // namespace
}  // namespace lazylua
