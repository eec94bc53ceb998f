#include "export/gzip_writer.hpp"

#include <fmt/format.h>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

namespace {
constexpr int kGzipWindow = 15 + 16;  // zlib's largest window, with a gzip header and trailer
constexpr std::size_t kBuffer = 1 << 16;
}  // namespace

GzipWriter::GzipWriter(std::ostream& out) : out_(out), buffer_(kBuffer) {
  // The fastest level, as Go's runtime/pprof writes: stacks repeat, and compress well anyway.
  if (deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(fmt::format("gzip: {}", z_.msg != nullptr ? z_.msg : "zlib would not start"));
}

GzipWriter::~GzipWriter() { deflateEnd(&z_); }

void GzipWriter::write(std::string_view bytes) {
  // zlib's counts are 32-bit: a larger block goes in pieces.
  while (!bytes.empty()) {
    std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z_.avail_in = static_cast<uInt>(n);
    deflate_to_out(Z_NO_FLUSH);
    bytes.remove_prefix(n);
  }
}

void GzipWriter::finish() {
  if (finished_) return;
  z_.next_in = nullptr;
  z_.avail_in = 0;
  deflate_to_out(Z_FINISH);
  finished_ = true;
}

void GzipWriter::deflate_to_out(int flush) {
  int rc = Z_OK;
  do {
    z_.next_out = reinterpret_cast<Bytef*>(buffer_.data());
    z_.avail_out = static_cast<uInt>(buffer_.size());
    rc = deflate(&z_, flush);
    if (rc == Z_STREAM_ERROR)
      throw Error(fmt::format("gzip: {}", z_.msg != nullptr ? z_.msg : "stream error"));
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size() - z_.avail_out));
    // Z_FINISH is done at Z_STREAM_END; otherwise zlib has more while it fills the buffer.
  } while (flush == Z_FINISH ? rc != Z_STREAM_END : z_.avail_out == 0);
}

}  // namespace sonde::analyzers
