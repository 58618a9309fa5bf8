/* host_run.c - a host program linked to liblazylua that runs the Lua chunk
 * given as its argument (tests/embed/test_blas_core.sh). Prints the error
 * message and exits 1 when the chunk fails. */
#include <lazylua.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LUA_CHUNK\n", argv[0]);
    return 2;
  }
  lazylua_interpreter* lua;
  if (lazylua_open(NULL, &lua) != LAZYLUA_OK) return 1;
  const int status = lazylua_run_string(lua, argv[1], "=host");
  if (status != LAZYLUA_OK) fprintf(stderr, "%s\n", lazylua_error_message(lua));
  lazylua_close(lua);
  return status == LAZYLUA_OK ? 0 : 1;
}
