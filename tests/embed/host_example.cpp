// host_example.cpp - the same host program with the C++ wrapper
// (lazylua.hpp), plus a host function Lua calls back.
#include <lazylua.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    lazylua::api::Interpreter lua;
    lua.register_function("host_scale", [](lazylua::api::Interpreter&,
                                           const std::vector<lazylua::api::Value>& arguments) {
      return std::vector<lazylua::api::Value>{arguments.at(0).number() * 10};
    });
    lua.run("function predict(x) return (x * host_scale(0.5) + 1):sum(1) end", "=model");
    std::vector<double> input = {1, 2, 3, 4};  // 2x2
    lazylua::api::Tensor x = lua.tensor_from(input.data(), {2, 2});
    std::vector<double> output = lua.call("predict", {x})[0].tensor().read<double>();
    // A host buffer lent without a copy: T (float) is deduced from the
    // pointer, the release callback is a plain lambda.
    static float weights[] = {1.5f, 2.5f};
    lua.run("function total(w) return w:sum():item() end", "=total");
    lazylua::api::Tensor w = lua.wrap(weights, {2}, [](float*) {});
    const double weight_total = lua.call("total", {w})[0].number();
    // Column sums of x*5+1: {1*5+1 + 3*5+1, 2*5+1 + 4*5+1}; 1.5 + 2.5.
    std::printf("%g %g %g\n", output[0], output[1], weight_total);
  } catch (const lazylua::api::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
