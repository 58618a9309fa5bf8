// npy_format.h - NumPy's .npy format (versions 1.0, 2.0 and 3.0): decoding
// a file's bytes into an Array and encoding an Array into them. No Lua here:
// interp/lua_npy.cpp binds these to tensor.load_npy / save_npy and, with
// interp/zip_archive.h, to the .npz functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/array.h"

namespace lazylua::npy {

// The largest header accepted (NumPy's own np.load refuses more than 10000
// bytes by default): a header of megabytes is hostile, not data.
inline constexpr size_t kMaxHeaderBytes = 65536;

// The array held by the .npy bytes [data, data + size). Element types:
// <f4 <f8 <i4 <i8 |b1 keep their dtype; |u1 |i1 <i2 <u2 become i32, <u4 and
// <u8 become i64 (a u8 value above 2^63-1 is an error), <f2 becomes f32.
// Big-endian ('>') data is byte-swapped. fortran_order True data is
// transposed into lazylua's row-major layout. Throws Error starting with
// "`function`: `source`" for anything else: a wrong magic, an unknown
// version, a header that does not parse, or data of the wrong length.
Array decode(const uint8_t* data, size_t size, const char* function, const std::string& source);

// The length of the .npy file whose first bytes are [prefix, prefix + size)
// (its header and data), as its header announces it: what a gzip-compressed
// .npy file or an .npz entry may decompress to. SIZE_MAX when the prefix
// ends before the header does; an Error, as decode gives it, when the
// header is not valid.
size_t announced_length(const uint8_t* prefix, size_t size, const char* function,
                        const std::string& source);

// The .npy bytes of `array` (any layout: it is copied in row-major order),
// version 1.0 unless its header needs more than 65535 bytes (then 2.0).
std::string encode(const Array& array);

// An IEEE half (binary16) as a float, exactly (ONNX's FLOAT16 too).
float half_to_float(uint16_t half);

}  // namespace lazylua::npy
