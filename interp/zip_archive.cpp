// zip_archive.cpp - reads and writes the ZIP archives of .npz files.
//
// Reading trusts the central directory (at the end of the archive) for
// every size: NumPy's np.savez writes zip64 extra fields into its local
// headers even for small entries, and sizes there may be placeholders, so a
// local header is only used to find where its entry's data starts. Every
// offset and size is checked against the archive's bytes before use.
#include "interp/zip_archive.h"

#include <libdeflate.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "tensor/error.h"

namespace lazylua::zip {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndOfDirectorySize = 22;
constexpr uint16_t kStored = 0, kDeflated = 8;
// DEFLATE's largest expansion: a 258-byte match costs at least 2 bits.
constexpr uint64_t kMaxDeflateRatio = 1032;

uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t read_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}

void put_u16(std::string& out, uint32_t value) {
  out += static_cast<char>(value & 0xff);
  out += static_cast<char>((value >> 8) & 0xff);
}
void put_u32(std::string& out, uint32_t value) {
  put_u16(out, value & 0xffff);
  put_u16(out, value >> 16);
}

uint32_t crc32_of(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// An entry's name as messages show it: printable ASCII, at most 80 bytes.
std::string shown(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size() && i < 80; i++) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    out +=
        c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

using Decompressor = std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)>;

// One entry as the central directory describes it, checked against the
// archive's bytes.
struct Record {
  std::string name;
  uint16_t method = kStored;
  uint32_t crc = 0;
  uint32_t compressed_size = 0;
  uint32_t size_uncompressed = 0;
  size_t data_start = 0;
};

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * page_size : UINT64_MAX;
}

// The first bytes (up to `most`) the raw deflate data [in, in + size)
// inflates to, fewer when it ends sooner; nullopt when it is damaged or cut
// short before that many bytes come out.
std::optional<std::string> inflate_prefix(const uint8_t* in, size_t size, size_t most,
                                          const char* function) {
  std::string prefix(most, '\0');
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) {
    fail("{}: out of memory: cannot make a deflate decompressor", function);
  }
  stream.next_in = const_cast<uint8_t*>(in);
  stream.avail_in = static_cast<uInt>(std::min<size_t>(size, UINT32_MAX));
  stream.next_out = reinterpret_cast<Bytef*>(prefix.data());
  stream.avail_out = static_cast<uInt>(prefix.size());
  int status = Z_OK;
  while (stream.avail_out > 0 && status == Z_OK) status = inflate(&stream, Z_NO_FLUSH);
  prefix.resize(prefix.size() - stream.avail_out);
  inflateEnd(&stream);
  if (status != Z_OK && status != Z_STREAM_END) return std::nullopt;
  return prefix;
}

}  // namespace

std::vector<Entry> read_archive(const uint8_t* data, size_t size, const char* function,
                                const std::string& path, const EntryLimit& limit) {
  // The end-of-central-directory record: its 22 bytes, then a comment of
  // up to 65535 bytes. Searched from the end, as every zip reader does.
  if (size < kEndOfDirectorySize) {
    fail("{}: '{}' is not a zip archive ({} bytes, too short for one)", function, path, size);
  }
  size_t end = size - kEndOfDirectorySize;
  const size_t lowest = size - kEndOfDirectorySize > 65535 ? size - kEndOfDirectorySize - 65535 : 0;
  while (true) {
    if (read_u32(data + end) == kEndOfDirectory &&
        end + kEndOfDirectorySize + read_u16(data + end + 20) == size) {
      break;
    }
    if (end == lowest) {
      fail(
          "{}: '{}' is not a zip archive (no end of central directory record: truncated, or "
          "not an .npz file)",
          function, path);
    }
    end--;
  }
  const uint8_t* end_record = data + end;
  const uint16_t disk = read_u16(end_record + 4), directory_disk = read_u16(end_record + 6);
  const uint16_t entries_here = read_u16(end_record + 8), entry_count = read_u16(end_record + 10);
  const uint32_t directory_size = read_u32(end_record + 12),
                 directory_offset = read_u32(end_record + 16);
  if ((end >= 20 && read_u32(data + end - 20) == kZip64Locator) || entry_count == 0xffff ||
      directory_size == 0xffffffff || directory_offset == 0xffffffff) {
    fail("{}: '{}' is a zip64 archive (4 GiB or more, or 65535 entries or more); not supported",
         function, path);
  }
  if (disk != 0 || directory_disk != 0 || entries_here != entry_count) {
    fail("{}: '{}' is one part of a zip archive split over several files; not supported", function,
         path);
  }
  if (uint64_t{directory_offset} + directory_size > end) {
    fail("{}: '{}' is corrupted: its central directory ({} bytes at {}) lies outside the archive",
         function, path, directory_size, directory_offset);
  }

  // First every record, checked, and the sizes they claim: an archive that
  // cannot fit is refused before anything is inflated.
  std::vector<Record> records;
  std::set<std::string> names;
  uint64_t total = 0;
  size_t position = directory_offset;
  const size_t directory_end = size_t{directory_offset} + directory_size;
  for (int index = 0; index < entry_count; index++) {
    if (directory_end - position < kCentralHeaderSize ||
        read_u32(data + position) != kCentralHeader) {
      fail("{}: '{}' is corrupted: central directory entry {} of {} is damaged or missing",
           function, path, index + 1, entry_count);
    }
    const uint8_t* header = data + position;
    const uint16_t flags = read_u16(header + 8), method = read_u16(header + 10);
    const uint32_t crc = read_u32(header + 16);
    const uint32_t compressed_size = read_u32(header + 20),
                   size_uncompressed = read_u32(header + 24);
    const uint16_t name_length = read_u16(header + 28), extra_length = read_u16(header + 30),
                   comment_length = read_u16(header + 32);
    const uint32_t local_offset = read_u32(header + 42);
    const size_t record_size = kCentralHeaderSize + name_length + extra_length + comment_length;
    if (directory_end - position < record_size) {
      fail("{}: '{}' is corrupted: central directory entry {} runs past the directory", function,
           path, index + 1);
    }
    std::string name(reinterpret_cast<const char*>(header + kCentralHeaderSize), name_length);
    position += record_size;
    const std::string where = fmt::format("entry '{}'", shown(name));
    if (compressed_size == 0xffffffff || size_uncompressed == 0xffffffff ||
        local_offset == 0xffffffff) {
      fail("{}: '{}' {} uses zip64 sizes (4 GiB or more); not supported", function, path, where);
    }
    if (flags & 1) fail("{}: '{}' {} is encrypted; not supported", function, path, where);
    if (method != kStored && method != kDeflated) {
      fail("{}: '{}' {} uses compression method {}; lazylua reads stored (0) and deflated (8)",
           function, path, where, method);
    }
    if (!names.insert(name).second) {
      fail("{}: '{}' holds two entries named '{}'", function, path, shown(name));
    }
    // The local header: its own name and extra field lengths say where the
    // data starts.
    if (local_offset > directory_offset || directory_offset - local_offset < kLocalHeaderSize ||
        read_u32(data + local_offset) != kLocalHeader) {
      fail("{}: '{}' is corrupted: the local header of {} is damaged or missing", function, path,
           where);
    }
    // The local header repeats the name: a mismatch is damage (as Python's
    // zipfile says too), and it catches a flipped byte in either copy.
    const uint16_t local_name_length = read_u16(data + local_offset + 26);
    const size_t data_start = size_t{local_offset} + kLocalHeaderSize + local_name_length +
                              read_u16(data + local_offset + 28);
    if (local_name_length != name.size() || data_start > directory_offset ||
        std::memcmp(data + local_offset + kLocalHeaderSize, name.data(), name.size()) != 0) {
      fail("{}: '{}' is corrupted: the local header of {} names another entry", function, path,
           where);
    }
    if (data_start > directory_offset || directory_offset - data_start < compressed_size) {
      fail("{}: '{}' is truncated or corrupted: the {} bytes of {} run past the entries' area",
           function, path, compressed_size, where);
    }
    if (method == kStored && compressed_size != size_uncompressed) {
      fail("{}: '{}' is corrupted: {} is stored, yet its sizes differ ({} and {})", function, path,
           where, compressed_size, size_uncompressed);
    }
    if (method == kDeflated &&
        size_uncompressed > uint64_t{compressed_size} * kMaxDeflateRatio + 16) {
      fail(
          "{}: '{}' is corrupted: {} claims {} bytes from {} compressed ones, more than "
          "deflate can give",
          function, path, where, size_uncompressed, compressed_size);
    }
    total += size_uncompressed;
    records.push_back(
        Record{std::move(name), method, crc, compressed_size, size_uncompressed, data_start});
  }
  // All entries are held at once, then decoded into arrays of about their
  // size: more than half of the memory cannot load.
  if (total > physical_memory() / 2) {
    fail("{}: '{}' holds {:.1f} MiB once inflated, more than half of this machine's memory",
         function, path, static_cast<double>(total) / 1048576.0);
  }

  const Decompressor decompressor(libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (!decompressor) fail("{}: out of memory: cannot make a deflate decompressor", function);
  std::vector<Entry> entries;
  for (Record& record : records) {
    const std::string where = fmt::format("entry '{}'", shown(record.name));
    const uint8_t* stored = data + record.data_start;
    // What the entry's content announces bounds what it may inflate to:
    // checked on its first bytes, before the room for all is made.
    if (limit) {
      std::optional<std::string> inflated;
      if (record.method == kDeflated) {
        inflated = inflate_prefix(stored, record.compressed_size, kEntryPeekBytes, function);
        if (!inflated) {
          fail("{}: '{}' is corrupted or truncated: bad deflate data in {}", function, path, where);
        }
      }
      const uint8_t* prefix =
          inflated ? reinterpret_cast<const uint8_t*>(inflated->data()) : stored;
      const size_t prefix_size =
          inflated ? inflated->size() : std::min<size_t>(record.compressed_size, kEntryPeekBytes);
      const size_t most = limit(record.name, prefix, prefix_size);
      if (record.size_uncompressed > most) {
        fail("{}: '{}' {} claims {} bytes, more than the {} its content announces", function, path,
             where, record.size_uncompressed, most);
      }
    }
    Entry entry{std::move(record.name), {}};
    if (record.method == kStored) {
      entry.bytes.assign(reinterpret_cast<const char*>(stored), record.compressed_size);
    } else {
      entry.bytes.resize(record.size_uncompressed);
      size_t produced = 0;
      const libdeflate_result result =
          libdeflate_deflate_decompress(decompressor.get(), stored, record.compressed_size,
                                        entry.bytes.data(), entry.bytes.size(), &produced);
      if (result == LIBDEFLATE_INSUFFICIENT_SPACE ||
          (result == LIBDEFLATE_SUCCESS && produced != record.size_uncompressed)) {
        fail("{}: '{}' is corrupted: {} does not inflate to the {} bytes it announces", function,
             path, where, record.size_uncompressed);
      }
      if (result != LIBDEFLATE_SUCCESS) {
        fail("{}: '{}' is corrupted or truncated: bad deflate data in {}", function, path, where);
      }
    }
    if (crc32_of(entry.bytes) != record.crc) {
      fail("{}: '{}' is corrupted: the CRC-32 of {} does not match", function, path, where);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string write_archive(const std::vector<Entry>& entries, bool compress, const char* function) {
  if (entries.size() >= 0xffff) {
    fail("{}: {} entries would need a zip64 archive; at most 65534 are written", function,
         entries.size());
  }
  const std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> compressor(
      compress ? libdeflate_alloc_compressor(6) : nullptr, &libdeflate_free_compressor);
  if (compress && !compressor)
    fail("{}: out of memory: cannot make a deflate compressor", function);
  std::string archive, directory;
  for (const Entry& entry : entries) {
    if (entry.bytes.size() >= 0xffffffffu || entry.name.size() > 0xffff) {
      fail("{}: entry '{}' is {} bytes; a zip archive without zip64 holds less than 4 GiB",
           function, shown(entry.name), entry.bytes.size());
    }
    const uint32_t crc = crc32_of(entry.bytes);
    uint16_t method = kStored;
    std::string deflated;
    if (compress) {
      deflated.resize(libdeflate_deflate_compress_bound(compressor.get(), entry.bytes.size()));
      const size_t length =
          libdeflate_deflate_compress(compressor.get(), entry.bytes.data(), entry.bytes.size(),
                                      deflated.data(), deflated.size());
      if (length > 0 && length < entry.bytes.size()) {
        deflated.resize(length);
        method = kDeflated;
      }
    }
    const std::string& stored = method == kDeflated ? deflated : entry.bytes;
    if (archive.size() >= 0xffffffffu - stored.size()) {
      fail("{}: the archive would reach 4 GiB, which needs zip64; not supported", function);
    }
    // Names of non-ASCII bytes are UTF-8 (flag bit 11), as Lua strings
    // usually are. The date is fixed (1980-01-01), so that saving the same
    // tensors gives the same bytes.
    const bool ascii = std::all_of(entry.name.begin(), entry.name.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    const uint16_t flags = ascii ? 0 : 1 << 11;
    const uint32_t offset = static_cast<uint32_t>(archive.size());
    auto common = [&](std::string& out) {
      put_u16(out, 20);  // version needed: 2.0 (deflate)
      put_u16(out, flags);
      put_u16(out, method);
      put_u16(out, 0);       // time
      put_u16(out, 0x0021);  // date: 1980-01-01
      put_u32(out, crc);
      put_u32(out, static_cast<uint32_t>(stored.size()));
      put_u32(out, static_cast<uint32_t>(entry.bytes.size()));
      put_u16(out, static_cast<uint32_t>(entry.name.size()));
      put_u16(out, 0);  // extra field length
    };
    put_u32(archive, kLocalHeader);
    common(archive);
    archive += entry.name;
    archive += stored;

    put_u32(directory, kCentralHeader);
    put_u16(directory, 20);  // made by: 2.0, MS-DOS attributes
    common(directory);
    put_u16(directory, 0);  // comment length
    put_u16(directory, 0);  // disk
    put_u16(directory, 0);  // internal attributes
    put_u32(directory, 0);  // external attributes
    put_u32(directory, offset);
    directory += entry.name;
  }
  if (archive.size() + directory.size() >= 0xffffffffu) {
    fail("{}: the archive would reach 4 GiB, which needs zip64; not supported", function);
  }
  const uint32_t directory_offset = static_cast<uint32_t>(archive.size());
  archive += directory;
  put_u32(archive, kEndOfDirectory);
  put_u16(archive, 0);  // this disk
  put_u16(archive, 0);  // the directory's disk
  put_u16(archive, static_cast<uint32_t>(entries.size()));
  put_u16(archive, static_cast<uint32_t>(entries.size()));
  put_u32(archive, static_cast<uint32_t>(directory.size()));
  put_u32(archive, directory_offset);
  put_u16(archive, 0);  // comment length
  return archive;
}

}  // namespace lazylua::zip
