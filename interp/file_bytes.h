// file_bytes.h - a whole file in memory, gunzipped when it is gzip: what the
// data module's readers (IDX, CSV) parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

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
// gives its length (IDX) refuses a gzip bomb this way before inflating it.
inline constexpr size_t kPeekBytes = 1024;
using OutputLimit = std::function<size_t(const uint8_t* prefix, size_t size)>;

// The bytes of the regular file at `path` (a symlink is followed). A file
// starting with the gzip magic (1f 8b) is decompressed: every member in turn,
// as `gzip -d` does; bytes after the last member that do not start another
// member are ignored, as gzip and zlib's gzread do. Errors (Error, message
// starting with `function`): the file cannot be opened or read, is not a
// regular file (a directory, a FIFO, a device: refused rather than waited on
// or read forever), its gzip data is corrupted or truncated, or it would
// decompress to more than `limit` allows.
HostBytes read_file_bytes(const std::string& path, const char* function,
                          const OutputLimit& limit = nullptr);

}  // namespace lazylua
