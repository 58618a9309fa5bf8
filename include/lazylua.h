/* lazylua.h - the C API for programs that embed lazylua.
 *
 * A host creates interpreters, runs Lua in them, hands them its buffers as
 * tensors and reads tensors back. Every function returns a status (or a
 * value that cannot fail); no C++ exception and no Lua error ever leaves
 * the library, and the library prints nothing: after an error,
 * lazylua_error_message() gives the message with its Lua traceback.
 *
 * Example (link with -llazylua; see README.md, "Embedding"):
 *
 *   lazylua_interpreter* lua;
 *   if (lazylua_open(NULL, &lua) != LAZYLUA_OK) return 1;
 *   lazylua_run_string(lua, "function scale(x, k) return (x * k):sum() end", "model");
 *   float data[4] = {1, 2, 3, 4};
 *   int64_t shape[1] = {4};
 *   lazylua_tensor* x;
 *   lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, shape, 1, &x);
 *   lazylua_value args[2] = {lazylua_tensor_value(x), lazylua_number(10)}, result;
 *   if (lazylua_call(lua, "scale", args, 2, &result, 1) != LAZYLUA_OK)
 *     fprintf(stderr, "%s\n", lazylua_error_message(lua));
 *   float sum;
 *   lazylua_tensor_read(lua, result.as.tensor, LAZYLUA_F32, &sum, sizeof sum);  // 100
 *   lazylua_close(lua);  // also frees x and the result's tensor
 *
 * Threads. An interpreter is used by one thread at a time (the host
 * serializes calls on it); different interpreters may run on different
 * threads at once: each has its own Lua state, tensor context, metrics and
 * pending graphs. lazylua_interrupt() is the one call that may be made on an
 * interpreter from any thread while another thread runs it. Process-wide
 * and shared by all interpreters: the kernel thread pool (options.threads),
 * the caching tensor allocator, the compile thread, the random generator
 * (tensor.manual_seed) and the in-memory cache of compiled graphs.
 */
#ifndef LAZYLUA_H
#define LAZYLUA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAZYLUA_VERSION_STRING "0.1.0"

typedef struct lazylua_interpreter lazylua_interpreter;
/* A host's reference to a tensor of one interpreter. It keeps the tensor
 * alive (Lua's collector may drop its own references) until
 * lazylua_tensor_free() or lazylua_close() of its interpreter. */
typedef struct lazylua_tensor lazylua_tensor;
struct lua_State;

typedef enum lazylua_status {
  LAZYLUA_OK = 0,
  LAZYLUA_ERROR_RUNTIME = 1,     /* a Lua error, or a tensor error raised in Lua */
  LAZYLUA_ERROR_SYNTAX = 2,      /* the chunk does not compile */
  LAZYLUA_ERROR_MEMORY = 3,      /* out of memory, or over the memory limit */
  LAZYLUA_ERROR_INTERRUPTED = 4, /* stopped by lazylua_interrupt() */
  LAZYLUA_ERROR_FILE = 5,        /* a script file that cannot be read */
  LAZYLUA_ERROR_ARGUMENT = 6     /* a bad argument to this API: null pointer, unknown
                                    name, wrong type, tensor of another interpreter */
} lazylua_status;

/* "ok", "runtime error", ...: a static string. */
const char* lazylua_status_name(lazylua_status status);
/* The library's version, e.g. "0.1.0". */
const char* lazylua_version(void);

/* ---- Creating interpreters ------------------------------------------- */

typedef struct lazylua_options {
  /* Nonzero: nothing the scripts can reach touches the file system. No
   * io, debug, package.loadlib or package.searchpath; os keeps only clock,
   * date, difftime and time; require finds only preloaded and built-in
   * modules (no Lua or C files); load, loadstring and the API accept text
   * chunks only (no bytecode); loadfile, dofile, tensor.save, tensor.load,
   * the NumPy file functions, data.read_idx, data.read_csv, plot.line_chart,
   * onnx.load, onnx.read_tensor and onnx.export are gone (nil);
   * tensor.profile takes no file and LAZYLUA_PROFILE is ignored. The
   * host hands data over as tensors (lazylua_tensor_from_buffer) and takes
   * results back the same way. So that lazylua_interrupt always reaches
   * the script: setmetatable refuses a metatable with a __gc field (Lua
   * runs finalizers with hooks off), and string.find, match, gmatch and
   * gsub refuse a pattern whose worst-case work on the subject could pass
   * about 10^8 matching steps (about a second; Lua's matcher cannot be
   * stopped inside one call), with an error naming the function. */
  int sandbox;
  /* Bytes the interpreter may hold, 0 for no limit. Counts the Lua heap,
   * every tensor buffer the interpreter allocates (copies of host buffers
   * and the buffers a sync computes in included; zero-copy host buffers are
   * the host's memory and are not counted) and an estimate of each pending
   * lazy operation (about 700 bytes), so that a script cannot pile up
   * unsynced graphs past it. Going over it is a LAZYLUA_ERROR_MEMORY
   * status. */
  size_t memory_limit;
  /* Threads for tensor kernels and BLAS, 0 to keep the current setting
   * (LAZYLUA_THREADS or the number of cores). Process-wide: it changes the
   * pool every interpreter shares. */
  int threads;
  /* Directory of the compile cache, NULL for the default
   * (LAZYLUA_CACHE_DIR, else $XDG_CACHE_HOME/lazylua, else ~/.cache/lazylua).
   * Created if missing; one that cannot be written disables the disk cache
   * for this interpreter. The string is copied. */
  const char* cache_directory;
} lazylua_options;

/* Fills *options with the defaults (no sandbox, no limit, ...). */
void lazylua_options_init(lazylua_options* options);

/* Creates an interpreter with Lua's standard libraries, the global
 * `tensor`, and `require` for lazylua's built-in modules. options may be
 * NULL for the defaults. On failure *interpreter is NULL. */
lazylua_status lazylua_open(const lazylua_options* options, lazylua_interpreter** interpreter);
/* Closes the interpreter and frees every tensor handle it still has; each
 * zero-copy buffer's release callback has run when this returns (unless
 * the host keeps a handle to a tensor of another interpreter that shares
 * it, which cannot happen through this API). NULL is ignored. */
void lazylua_close(lazylua_interpreter* interpreter);

/* The message of the last failed call on this interpreter, with the Lua
 * traceback when there is one; "" if none. Valid until the next call on the
 * interpreter. NULL gives "". */
const char* lazylua_error_message(const lazylua_interpreter* interpreter);

/* ---- Running Lua ------------------------------------------------------ */

/* Runs a chunk of Lua source. chunk_name names it in messages ("=model"
 * shows as "model"); NULL gives "=(string)". */
lazylua_status lazylua_run_string(lazylua_interpreter* interpreter, const char* source,
                                  const char* chunk_name);
/* Runs a Lua source file. */
lazylua_status lazylua_run_file(lazylua_interpreter* interpreter, const char* path);

/* Stops the Lua code running in `interpreter` (at its next instruction): the
 * running call returns LAZYLUA_ERROR_INTERRUPTED and the interpreter stays
 * usable. Does nothing if no call is running. Callable from any thread
 * (but not after or during lazylua_close of the interpreter). A
 * chunk busy inside one long C function (a big matrix product, a pattern
 * match) stops when that returns; a sync or a kernel stops within
 * milliseconds; code running inside a coroutine or an xpcall message
 * handler stops at its next instruction too (once an interrupt is pending,
 * xpcall no longer calls the script's handler). It uses Lua's hook: a hook
 * the script set itself (debug.sethook) is replaced, on the main thread
 * and on the coroutines that run until the call ends. Lua runs __gc
 * finalizers with hooks off, so outside the sandbox (which refuses __gc) a
 * finalizer that loops cannot be stopped; nor can a script that turns the
 * hook off itself with debug.sethook (no debug library in the sandbox). */
void lazylua_interrupt(lazylua_interpreter* interpreter);

/* ---- Data-parallel training ------------------------------------------ */

/* This process's place in the MPI job that started it (`mpirun -np N
 * host`): *rank is 0-based and *size the number of ranks; 0 and 1 for a
 * process no launcher started. The first call in a launched process joins
 * the job (MPI_Init; a host that called MPI_Init itself keeps its own).
 * Scripts see the same job through require "lazylua.dist"
 * (docs/distributed.md). LAZYLUA_ERROR_RUNTIME when launched but lazylua
 * was built without MPI; null pointers are LAZYLUA_ERROR_ARGUMENT. */
lazylua_status lazylua_dist_info(int* rank, int* size);
/* Ends every rank of the job at once with this exit status (MPI_Abort), for
 * a host that failed while the other ranks would wait for it in their next
 * collective. Returns only when this process is not a rank of a job of two
 * or more. */
void lazylua_dist_abort(int exit_status);

/* ---- Values ---------------------------------------------------------- */

typedef enum lazylua_type {
  LAZYLUA_TYPE_NIL = 0,
  LAZYLUA_TYPE_BOOLEAN,
  LAZYLUA_TYPE_INTEGER,
  LAZYLUA_TYPE_NUMBER,
  LAZYLUA_TYPE_STRING,
  LAZYLUA_TYPE_TENSOR,
  LAZYLUA_TYPE_OTHER /* a table, function, ... (results only; no data) */
} lazylua_type;

typedef struct lazylua_value {
  lazylua_type type;
  union {
    int boolean;
    long long integer;
    double number;
    struct {
      const char* data; /* not necessarily zero-terminated when it holds zeros */
      size_t length;
    } string;
    lazylua_tensor* tensor;
  } as;
} lazylua_value;

/* Values the host passes in. A string is copied into Lua when used. */
static inline lazylua_value lazylua_nil(void) {
  lazylua_value value;
  value.type = LAZYLUA_TYPE_NIL;
  value.as.integer = 0;
  return value;
}
static inline lazylua_value lazylua_boolean(int boolean) {
  lazylua_value value;
  value.type = LAZYLUA_TYPE_BOOLEAN;
  value.as.boolean = boolean != 0;
  return value;
}
static inline lazylua_value lazylua_integer(long long integer) {
  lazylua_value value;
  value.type = LAZYLUA_TYPE_INTEGER;
  value.as.integer = integer;
  return value;
}
static inline lazylua_value lazylua_number(double number) {
  lazylua_value value;
  value.type = LAZYLUA_TYPE_NUMBER;
  value.as.number = number;
  return value;
}
/* `text` is zero-terminated. */
static inline lazylua_value lazylua_string(const char* text) {
  lazylua_value value;
  size_t length = 0;
  value.type = LAZYLUA_TYPE_STRING;
  while (text && text[length]) length++;
  value.as.string.data = text;
  value.as.string.length = length;
  return value;
}
static inline lazylua_value lazylua_tensor_value(lazylua_tensor* tensor) {
  lazylua_value value;
  value.type = LAZYLUA_TYPE_TENSOR;
  value.as.tensor = tensor;
  return value;
}

/* Values the library hands back (results of calls, globals): a string
 * points into memory the interpreter owns, valid until the next call on
 * it that returns values; a tensor is a new handle the host owns (free it
 * with lazylua_tensor_free, or leave it to lazylua_close). */

/* Calls the function named `function` (a global, or a path of fields such
 * as "model.forward") with `argument_count` arguments and stores exactly
 * `result_count` results (missing ones are nil, extra ones dropped).
 * Unknown names and non-functions are LAZYLUA_ERROR_ARGUMENT. */
lazylua_status lazylua_call(lazylua_interpreter* interpreter, const char* function,
                            const lazylua_value* arguments, int argument_count,
                            lazylua_value* results, int result_count);

/* Reads or sets a global variable. */
lazylua_status lazylua_get_global(lazylua_interpreter* interpreter, const char* name,
                                  lazylua_value* value);
lazylua_status lazylua_set_global(lazylua_interpreter* interpreter, const char* name,
                                  const lazylua_value* value);

/* ---- Host functions -------------------------------------------------- */

#define LAZYLUA_MAX_HOST_RESULTS 16

/* A host function Lua can call. `arguments` (and their strings and tensor
 * handles) are valid during the call only; lazylua_tensor_retain keeps a
 * tensor. It writes up to `result_capacity` values into `results` and
 * returns how many; result strings are copied and result tensors stay the
 * host's. To raise a Lua error it returns lazylua_raise(interpreter, ...).
 * It may call the API on `interpreter` (run code, make tensors). */
typedef int (*lazylua_function)(lazylua_interpreter* interpreter, void* user_data,
                                const lazylua_value* arguments, int argument_count,
                                lazylua_value* results, int result_capacity);

/* Makes `function` the global `name`; user_data is passed to each call. */
lazylua_status lazylua_register_function(lazylua_interpreter* interpreter, const char* name,
                                         lazylua_function function, void* user_data);
/* For a host function's return: records `message` (copied) as the Lua error
 * to raise when the function returns, and returns -1. */
int lazylua_raise(lazylua_interpreter* interpreter, const char* message);

/* ---- Tensors ----------------------------------------------------------- */

typedef enum lazylua_dtype {
  LAZYLUA_F32 = 0, /* float */
  LAZYLUA_F64,     /* double */
  LAZYLUA_I32,     /* int32_t */
  LAZYLUA_I64,     /* int64_t */
  LAZYLUA_BOOL     /* one byte, 0 or 1 */
} lazylua_dtype;

/* Bytes per element of a dtype (0 for an unknown one). */
size_t lazylua_dtype_size(lazylua_dtype dtype);

/* A new tensor holding a copy of `data`: a row-major array of `dtype` with
 * `rank` extents (rank 0: one element; at most 8). */
lazylua_status lazylua_tensor_from_buffer(lazylua_interpreter* interpreter, lazylua_dtype dtype,
                                          const void* data, const int64_t* shape, int rank,
                                          lazylua_tensor** tensor);

typedef void (*lazylua_release_function)(void* data, void* user_data);

/* A tensor that uses the host's memory without a copy. `data` must stay
 * valid until release(data, user_data) is called, which happens exactly
 * once, on whichever thread drops the last reference: when Lua has
 * collected every tensor and view sharing it and the host has freed its
 * handles, or at lazylua_close at the latest. lazylua may write into it
 * when Lua updates the tensor in place; the host must not write into it
 * while lazylua holds it. On failure release is called before returning.
 * release may be NULL. */
lazylua_status lazylua_tensor_wrap_buffer(lazylua_interpreter* interpreter, lazylua_dtype dtype,
                                          void* data, const int64_t* shape, int rank,
                                          lazylua_release_function release, void* user_data,
                                          lazylua_tensor** tensor);

/* Copies the tensor's values into `out` as a row-major array of `dtype`
 * (converting if the tensor's dtype differs), computing pending work first
 * (a sync). out_bytes must be at least numel * lazylua_dtype_size(dtype). */
lazylua_status lazylua_tensor_read(lazylua_interpreter* interpreter, lazylua_tensor* tensor,
                                   lazylua_dtype dtype, void* out, size_t out_bytes);

/* The tensor's dtype, rank, and extents (up to `capacity` of them written
 * to shape, which may be NULL when capacity is 0). Never syncs. */
lazylua_status lazylua_tensor_info(const lazylua_tensor* tensor, lazylua_dtype* dtype, int* rank,
                                   int64_t* shape, int capacity);
/* Number of elements (0 for NULL). */
int64_t lazylua_tensor_numel(const lazylua_tensor* tensor);

/* A second handle to the same tensor (NULL for NULL or out of memory). */
lazylua_tensor* lazylua_tensor_retain(lazylua_tensor* tensor);
/* Drops a handle. NULL is ignored. */
void lazylua_tensor_free(lazylua_tensor* tensor);

/* ---- Escape hatch ------------------------------------------------------ */

/* The interpreter's Lua state, for hosts that use Lua's own C API (with
 * lua.h, linking Lua 5.4). Lua errors raised outside a protected call
 * abort the process: use lua_pcall. */
struct lua_State* lazylua_lua_state(lazylua_interpreter* interpreter);

#ifdef __cplusplus
}
#endif

#endif /* LAZYLUA_H */
