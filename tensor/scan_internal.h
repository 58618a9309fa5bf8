// scan_internal.h - what scan.cpp (tracing, recording) shares with
// scan_grad.cpp (the gradient of a scan).
#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include "scan.h"

namespace lazylua::scan_detail {

// Tracing a body: while it lives, the context is inside a scan body (syncs
// are errors) and the lazy tensors made are listed; its placeholders stand
// for the carries and one slice of each xs. When it ends, every tensor
// computed from the placeholders gets an error: it exists only in the body.
class BodyTrace {
 public:
  BodyTrace(Context* context, const std::vector<Tensor>& carry_like,
            const std::vector<std::pair<DType, Shape>>& x_like);
  ~BodyTrace();
  BodyTrace(const BodyTrace&) = delete;
  BodyTrace& operator=(const BodyTrace&) = delete;

  bool owns(const Node* node) const {
    for (const Node* placeholder : placeholders_) {
      if (placeholder == node) return true;
    }
    return false;
  }
  bool depends_on_placeholder(const Node* node);

  const int carries, xs;
  std::vector<Tensor> carry_placeholders, x_placeholders;

 private:
  Context* context_;
  std::vector<const Node*> placeholders_;
  std::vector<Tensor> created_;
  std::vector<Tensor>* saved_created_ = nullptr;
  std::unordered_map<const Node*, bool> memo_;
  std::vector<NodeRef> memo_held_;  // the memo's nodes: no address is reused while it lives
};

// The body made of what the outputs (new carries first, then ys) compute
// from the trace's placeholders; the values they read from outside become
// extra inputs, listed in *captured_nodes.
// extra_xs: values from outside that are given per iteration instead (a
// slice of a sequence): they become xs after the trace's own.
Ref<ScanBody> build_body(const BodyTrace& trace, const std::vector<NodeRef>& outputs,
                         int carry_outputs, std::vector<NodeRef>* captured_nodes,
                         const std::vector<const Node*>& extra_xs = {});

// Records a scan node over `inputs` (carries, xs, captured values) and
// returns a tensor per output: the final carries, then the stacked ys.
std::vector<Tensor> record_scan(Context* context, Ref<ScanBody> body, int64_t length, bool reverse,
                                const std::vector<NodeRef>& inputs);

// Whether the body reads its input `index` (a carry, an x slice or a
// captured value): the body graph holds only what its outputs depend on.
bool body_reads(const ScanBody& body, int index);

// The body's outputs recomputed from `inputs` with autograd's ops, so that
// gradients can flow through one iteration.
std::vector<Tensor> replay(Context* context, const ScanBody& body,
                           const std::vector<Tensor>& inputs);

}  // namespace lazylua::scan_detail

namespace lazylua::scan_detail {

// For each captured value (a node from outside the body), the tensor it is
// the value of, when that tensor requires grad (null otherwise): found by
// walking the autograd graph of the traced outputs.
std::vector<Tensor> differentiable_captures(Context* context, const std::vector<Tensor>& traced,
                                            const std::vector<NodeRef>& captured);

// Gives the scan's results one GradNode whose backward is a reverse scan
// that recomputes the carries (options.recompute_carries). inputs: the scan
// node's inputs (carries, xs, captured values); body: the forward body;
// saving: the same with the carry entering each iteration as extra ys,
// which backward runs first.
void attach_gradient(Context* context, const Ref<ScanBody>& body, const Ref<ScanBody>& saving,
                     int64_t length, const ScanOptions& options, const std::vector<NodeRef>& inputs,
                     const std::vector<Tensor>& init, const std::vector<Tensor>& xs,
                     const std::vector<Tensor>& captured_tensors,
                     const std::vector<Tensor>& results);

// The forward scan with residuals and its gradient (the default when
// gradients are needed); returns the visible results.
std::vector<Tensor> record_with_residuals(Context* context, const Ref<ScanBody>& body0,
                                          const std::vector<NodeRef>& captured,
                                          const std::vector<Tensor>& captured_tensors,
                                          const std::vector<Tensor>& init,
                                          const std::vector<Tensor>& xs, int64_t length,
                                          const ScanOptions& options);

}  // namespace lazylua::scan_detail
