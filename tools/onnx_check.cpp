// onnx_check - checks an .onnx file with Debian's libonnx: the model checker,
// then shape inference in strict mode (type checks, node-level inference
// errors raised, data propagation), which also fails when a shape or dtype
// the file states in value_info or the graph outputs disagrees with the
// inferred one. It is the independent consumer the exporter's tests use
// (onnx.export writes files that only lazylua wrote otherwise).
//
//   onnx_check model.onnx    exit 0 and "ok: ..." when valid, else exit 1
//                            and the checker's message on stderr
//
// It links libonnx alone, never liblazylua: lazylua compiles its own copy of
// onnx.proto (as lazylua::onnx), and one process must not hold both.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

namespace {

int fail(const std::string& path, const std::string& stage, const std::string& message) {
  std::fprintf(stderr, "onnx_check: %s: %s failed: %s\n", path.c_str(), stage.c_str(),
               message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_check MODEL.onnx\n");
    return 2;
  }
  const std::string path = argv[1];
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail(path, "reading", "cannot open the file");
  std::stringstream bytes;
  bytes << file.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) return fail(path, "parsing", "not an ONNX ModelProto");
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& error) {
    return fail(path, "check_model", error.what());
  }
  try {
    // check_type, error_mode 1 (strict: node inference errors throw), data propagation:
    // what onnx.checker.check_model(model, full_check=True) and
    // onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True) do.
    const onnx::ShapeInferenceOptions options(true, 1, true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& error) {
    return fail(path, "shape inference", error.what());
  }
  // A graph output whose shape inference could not tell would pass the
  // merge above silently; the exporter states every one, so require it.
  for (const auto& output : model.graph().output()) {
    if (!output.type().has_tensor_type() || !output.type().tensor_type().has_shape()) {
      return fail(path, "shape inference", "graph output '" + output.name() + "' has no shape");
    }
  }
  std::printf("ok: %s (%d nodes, %d initializers, opset %lld)\n", path.c_str(),
              model.graph().node_size(), model.graph().initializer_size(),
              model.opset_import_size() > 0
                  ? static_cast<long long>(model.opset_import(0).version())
                  : 0LL);
  return 0;
}
