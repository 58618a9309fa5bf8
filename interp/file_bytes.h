// file_bytes.h - a whole file in memory, gunzipped when it is gzip: what the
// data module's readers (IDX, CSV) parse.
#pragma once

#include <cstddef>
#include <cstdint>
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

// The bytes of the file at `path`. A file starting with the gzip magic (1f 8b)
// is decompressed: every member in turn, as `gzip -d` does; bytes after the
// last member that do not start another member are ignored, as gzip and
// zlib's gzread do. Errors (Error, message starting with `function`): the
// file cannot be opened or read, or its gzip data is corrupted or truncated.
HostBytes read_file_bytes(const std::string& path, const char* function);

}  // namespace lazylua
