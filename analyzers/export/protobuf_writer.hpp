// Protocol Buffers' wire format (protobuf.dev/programming-guides/encoding), the part a writer of
// pprof's profile.proto needs: varints, length-delimited fields and packed repeated integers.
// Written by hand, as Go's runtime/pprof does: the format is small, and a generated encoder
// would bring libprotobuf to every machine that runs `sonde`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::analyzers {

// One message's bytes, field by field. Scalars equal to 0 are left out (proto3's default);
// strings and messages are always written, since a repeated entry must keep its place.
class ProtoMessage {
 public:
  void uint64_field(int field, std::uint64_t v) {
    if (v == 0) return;
    tag(field, kVarint);
    varint(v);
  }
  // int64 is a varint of the two's complement (ten bytes for a negative value), not zigzag.
  void int64_field(int field, std::int64_t v) {
    uint64_field(field, static_cast<std::uint64_t>(v));
  }
  void bool_field(int field, bool v) { uint64_field(field, v ? 1 : 0); }
  void bytes_field(int field, std::string_view v) {
    tag(field, kLengthDelimited);
    varint(v.size());
    bytes_.append(v);
  }
  void message_field(int field, const ProtoMessage& m) { bytes_field(field, m.bytes_); }
  template <class Int>
  void packed_field(int field, const std::vector<Int>& values) {
    if (values.empty()) return;
    std::string packed;
    for (Int v : values) varint(static_cast<std::uint64_t>(v), packed);
    bytes_field(field, packed);
  }
  const std::string& bytes() const { return bytes_; }
  void clear() { bytes_.clear(); }

 private:
  static constexpr int kVarint = 0, kLengthDelimited = 2;
  void tag(int field, int wire_type) { varint(static_cast<std::uint64_t>(field) << 3 | wire_type); }
  void varint(std::uint64_t v) { varint(v, bytes_); }
  static void varint(std::uint64_t v, std::string& to) {
    for (; v >= 0x80; v >>= 7) to += static_cast<char>(v | 0x80);
    to += static_cast<char>(v);
  }
  std::string bytes_;
};

}  // namespace sonde::analyzers
