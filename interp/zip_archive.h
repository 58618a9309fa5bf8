// zip_archive.h - the ZIP subset .npz files use: entries stored or
// deflated, read through the central directory and written with one.
// Not supported (each a clear Error): zip64, encryption, archives split
// over several disks, other compression methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lazylua::zip {

struct Entry {
  std::string name;
  std::string bytes;  // uncompressed
};

// How many bytes an entry may hold, said by its content: given its name
// and the first bytes it inflates to (up to kEntryPeekBytes, fewer if it is
// shorter), the most the caller can use (SIZE_MAX: no limit). It may throw
// Error to refuse the entry from these alone. A format whose header gives
// its length (.npy) refuses a deflate bomb this way before inflating it.
inline constexpr size_t kEntryPeekBytes = 65536 + 16;
using EntryLimit =
    std::function<size_t(const std::string& name, const uint8_t* prefix, size_t size)>;

// The entries of the archive in [data, data + size), in central-directory
// order, each decompressed and checked against its CRC-32. Sizes are
// checked before anything is allocated: against the archive (a deflated
// entry may claim at most DEFLATE's largest expansion of its compressed
// bytes), their sum against the machine's memory (all entries are held at
// once), and each against what `limit` says its content announces. Errors
// start with "`function`: '`path`'".
std::vector<Entry> read_archive(const uint8_t* data, size_t size, const char* function,
                                const std::string& path, const EntryLimit& limit = nullptr);

// The archive's bytes: every entry stored as is, or deflated when
// `compress` (and smaller so). Error when it would need zip64 (an entry or
// the archive of 4 GiB or more, 65535 entries or more).
std::string write_archive(const std::vector<Entry>& entries, bool compress, const char* function);

}  // namespace lazylua::zip
