// A gzip stream (RFC 1952) over an std::ostream, compressed by zlib as it is written: pprof's
// profile.proto is read gzip-compressed, and a million call paths need not be held twice.
#pragma once

#include <zlib.h>

#include <ostream>
#include <string_view>
#include <vector>

namespace sonde::analyzers {

class GzipWriter {
 public:
  explicit GzipWriter(std::ostream& out);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  void write(std::string_view bytes);
  // Writes what zlib still holds and gzip's trailer (CRC-32 and length); nothing may follow.
  void finish();

 private:
  void deflate_to_out(int flush);
  std::ostream& out_;
  z_stream z_{};
  std::vector<char> buffer_;
  bool finished_ = false;
};

}  // namespace sonde::analyzers
