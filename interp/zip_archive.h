// zip_archive.h - the ZIP subset .npz files use: entries stored or
// deflated, read through the central directory and written with one.
// Not supported (each a clear Error): zip64, encryption, archives split
// over several disks, other compression methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lazylua::zip {

struct Entry {
  std::string name;
  std::string bytes;  // uncompressed
};

// The entries of the archive in [data, data + size), in central-directory
// order, each decompressed and checked against its CRC-32. Sizes are
// checked against the archive before anything is allocated: a deflated
// entry may claim at most DEFLATE's largest expansion of its compressed
// bytes. Errors start with "`function`: '`path`'".
std::vector<Entry> read_archive(const uint8_t* data, size_t size, const char* function,
                                const std::string& path);

// The archive's bytes: every entry stored as is, or deflated when
// `compress` (and smaller so). Error when it would need zip64 (an entry or
// the archive of 4 GiB or more, 65535 entries or more).
std::string write_archive(const std::vector<Entry>& entries, bool compress, const char* function);

}  // namespace lazylua::zip
