// file_bytes.h - the program's one pair of safe file helpers. Every file
// lazylua reads or writes by name goes through them: the data readers (IDX,
// CSV), checkpoints, NumPy files, ONNX models and tensors, profiles, plots
// (the Lua stdlib reaches them as native.read_file / native.write_file).
//
//   read_file_bytes  regular files only (a FIFO, a device, a directory is
//                    refused at once, never waited on or read forever),
//                    bounded (a file larger than the caller's limit is
//                    refused before it is read; gzip data decompresses to
//                    no more than its content announces).
//   write_file       replaces a regular file or makes a new one (a FIFO, a
//                    device, a directory is left alone), through a
//                    temporary file renamed over it: a failed or killed
//                    write never leaves a partial file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace lazylua {

// Bytes in anonymous memory: pages cost nothing until written, so a generous
// capacity is free, and growing moves pages (mremap) instead of copying them.
// Large buffers ask for transparent huge pages (fewer faults on first touch).
class HostBytes {
 public:
  HostBytes() = default;
  ~HostBytes();
  HostBytes(HostBytes&& other) noexcept;
  HostBytes& operator=(HostBytes&& other) noexcept;
  HostBytes(const HostBytes&) = delete;
  HostBytes& operator=(const HostBytes&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  // Makes room for at least `capacity` bytes, keeping the first size().
  // Throws Error naming `function` when the memory cannot be had.
  void reserve(size_t capacity, const char* function);
  // Sets size(); `size` <= capacity().
  void set_size(size_t size) { size_ = size; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// How much a gzip file may decompress to, said by its content: given the
// first bytes it decompresses to (up to kPeekBytes, fewer if it is shorter),
// the most the caller can use (SIZE_MAX: no limit). A format whose header
// gives its length (IDX, .npy) refuses a gzip bomb this way before
// inflating it. It may also throw Error: the prefix alone shows the file is
// not of the format. kPeekBytes holds the largest header a reader here
// accepts (.npy: 12 bytes, then up to 64 KiB of text).
inline constexpr size_t kPeekBytes = 65536 + 16;
using OutputLimit = std::function<size_t(const uint8_t* prefix, size_t size)>;

struct ReadOptions {
  // The most bytes the file may hold: a larger one is refused from its
  // size, before anything is read. Any file is refused when it could not
  // fit in the machine's memory.
  size_t max_bytes = SIZE_MAX;
  // A file starting with the gzip magic (1f 8b) is decompressed: every
  // member in turn, as `gzip -d` does; bytes after the last member that do
  // not start another member are ignored, as gzip and zlib's gzread do.
  bool gunzip = true;
  // The most the gzip data may decompress to (gunzip only).
  OutputLimit output_limit = nullptr;
};

// The bytes of the regular file at `path` (a symlink is followed), as
// `options` say. Errors (Error, message starting with `function`): the file
// cannot be opened or read, is not a regular file, is larger than allowed,
// its gzip data is corrupted or truncated, or would decompress to more than
// the output limit allows.
HostBytes read_file_bytes(const std::string& path, const char* function,
                          const ReadOptions& options);
// The same, gunzipped, with no size limit but the output limit.
inline HostBytes read_file_bytes(const std::string& path, const char* function,
                                 const OutputLimit& limit = nullptr) {
  return read_file_bytes(path, function, ReadOptions{.output_limit = limit});
}

// Writes `bytes` to `path`: to a temporary file next to it (in the same
// directory, so the rename cannot cross file systems), then renamed over
// it. An existing `path` must be a regular file, or a symlink leading to
// one (the file it leads to is replaced; the links stay). A replaced file
// keeps its permission bits; a new one gets 0644. Temporaries that a
// killed write left behind more than an hour ago are removed. Errors
// (Error, message starting with `function`) leave `path` as it was.
void write_file(const std::string& path, std::string_view bytes, const char* function);

}  // namespace lazylua
