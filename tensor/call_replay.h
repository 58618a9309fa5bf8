// call_replay.h - recording a pure function's call once and its graph again
// for new inputs of the same shapes, without running the function.
//
// An imported model records the same graph on every call with inputs of the
// same shapes: its host work (shape arithmetic, constants) depends on the
// shapes only, and each node records the same ops. Running the importer's
// Lua for every node costs far more than the kernels of a small model, so
// the importer records a call once (start_call_recording ..
// finish_call_recording) and then replays it: replay_call makes the nodes
// the call made again, reading the new inputs where the call read the old.
//
// A call can be replayed only when that gives what running it again would:
// lazy mode, outside a scan body, no gradient recorded (no input or watched
// tensor needs one), and during the call no sync (so no value seen on the
// host: the call reads its inputs through stand-ins holding pending values),
// no random draw, no collective, and no input written in place. A replay checks the tensors
// the function reads besides its inputs (`watched`: a model's weights): one
// whose value changed since the recording, or that now needs a gradient,
// sends the caller back to running the function.
// See docs/architecture.md, "Imported models".
#pragma once

#include <memory>
#include <vector>

#include "context.h"
#include "kernels/random.h"
#include "tensor.h"

namespace lazylua {

// A recorded call: the nodes it made, in order, each with where a replay
// finds its inputs. It holds no node the call made (those hold the values a
// sync computed for them), only copies of what each does.
struct RecordedCall {
  struct Source {
    int made = -1;   // the node at this position of `made`, or
    int input = -1;  // the call's input at this position, or else
    NodeRef node;    // a node older than the call (a weight) or a leaf it made (a scalar)
  };
  struct Step {
    NodeRef op;  // what the node does, with no inputs (copy_node)
    std::vector<Source> inputs;
  };
  std::vector<DType> input_dtypes;
  std::vector<Shape> input_shapes;
  std::vector<Step> made;        // inputs before users
  std::vector<int> outputs;      // positions in `made`
  std::vector<NodeRef> watched;  // the watched tensors' values at the recording
};

// Starts recording a call with these inputs and returns what the call must
// read in their place: tensors holding just their values (a view read
// through its base would read the base's node, not the input's). Empty (and
// nothing started) where no call can be replayed: eager mode, inside a scan
// body, an input or watched tensor that needs a gradient, or while another
// call is being recorded.
std::vector<Tensor> start_call_recording(Context* context, const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& watched);

// Ends the recording of the call given `inputs` (start_call_recording's):
// the recorded call, or null when this call cannot be replayed (see above).
// When recorded, `outputs` become tensors of their values, as a replay
// returns them: an output that is a view (a reshape of the last node) is
// then a node of the graph as in every replay, so the first call's graph is
// the replays' (it was one graph more to compile, whose third run came a
// call later).
std::unique_ptr<RecordedCall> finish_call_recording(Context* context,
                                                    const std::vector<Tensor>& inputs,
                                                    std::vector<Tensor>& outputs,
                                                    const std::vector<Tensor>& watched);

// Ends the recording of a call that failed.
void cancel_call_recording(Context* context);

// The call's outputs for new inputs, or an empty vector when the recording
// does not apply (another mode, inputs of other shapes or dtypes, a watched
// tensor changed): then the caller runs the function.
std::vector<Tensor> replay_call(Context* context, const RecordedCall& call,
                                const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& watched);

}  // namespace lazylua
