/* host_example.c - a host program embedding lazylua: it loads a model
 * script, feeds it a host buffer and reads the result back. This is the
 * example of README.md ("Embedding"); tests/embed/test_install.sh builds it
 * against the installed package. */
#include <lazylua.h>
#include <stdio.h>

static const char* model_script =
    "weights = tensor.new({{1, 0}, {0, 1}, {1, 1}}, {dtype = 'f32'})\n"
    "function predict(x, bias)\n"
    "  return (x:matmul(weights) + bias):relu()\n"
    "end\n";

int main(void) {
  lazylua_options options;
  lazylua_options_init(&options);
  options.sandbox = 1;               /* no io, os.execute, C modules ... */
  options.memory_limit = 256u << 20; /* Lua heap + tensors */
  lazylua_interpreter* lua;
  if (lazylua_open(&options, &lua) != LAZYLUA_OK) return 1;

  /* A model script: from a string here, lazylua_run_file for a file. */
  if (lazylua_run_string(lua, model_script, "=model") != LAZYLUA_OK) {
    fprintf(stderr, "%s\n", lazylua_error_message(lua));
    return 1;
  }

  float input[2][3] = {{1, 2, 3}, {4, -5, 6}};
  int64_t shape[2] = {2, 3};
  lazylua_tensor* x;
  lazylua_tensor_from_buffer(lua, LAZYLUA_F32, input, shape, 2, &x);

  lazylua_value arguments[2] = {lazylua_tensor_value(x), lazylua_number(-2)};
  lazylua_value result;
  lazylua_status status = lazylua_call(lua, "predict", arguments, 2, &result, 1);
  if (status != LAZYLUA_OK) {
    fprintf(stderr, "%s: %s\n", lazylua_status_name(status), lazylua_error_message(lua));
    return 1;
  }
  float output[2][2];
  /* Reading syncs: the recorded graph is compiled and run here. */
  if (result.type != LAZYLUA_TYPE_TENSOR ||
      lazylua_tensor_read(lua, result.as.tensor, LAZYLUA_F32, output, sizeof output) !=
          LAZYLUA_OK) {
    fprintf(stderr, "%s\n", lazylua_error_message(lua));
    return 1;
  }
  printf("%g %g %g %g\n", output[0][0], output[0][1], output[1][0], output[1][1]);
  lazylua_close(lua); /* frees x and the result too */
  return 0;
}
