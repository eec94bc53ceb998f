// The pprof export's encoders: protobuf's wire format byte for byte (the encoding guide's own
// examples: 150 is 96 01), gzip read back by zlib's inflate, and the UTF-8 cleaning its strings
// go through.
#include <gtest/gtest.h>
#include <zlib.h>

#include <sstream>
#include <string>

#include "base/table_format.hpp"
#include "export/gzip_writer.hpp"
#include "export/protobuf_writer.hpp"

namespace sonde::analyzers {
namespace {

using namespace std::string_literals;

TEST(ProtoMessage, VarintsAndTags) {
  ProtoMessage m;
  m.uint64_field(1, 150);
  m.uint64_field(2, 0);  // proto3's default: not written
  m.int64_field(3, -1);  // two's complement: ten bytes
  m.bool_field(7, true);
  EXPECT_EQ(m.bytes(), "\x08\x96\x01"s + "\x18" + std::string(9, '\xff') + "\x01" + "\x38\x01");
}

TEST(ProtoMessage, LengthDelimitedAndPacked) {
  ProtoMessage inner;
  inner.uint64_field(1, 1);
  ProtoMessage m;
  m.bytes_field(6, "");  // an empty string still takes its place in a repeated field
  m.bytes_field(6, "ab");
  m.packed_field(1, std::vector<std::uint64_t>{3, 270, 86942});
  m.packed_field(2, std::vector<std::int64_t>{});  // nothing for an empty list
  m.message_field(4, inner);
  EXPECT_EQ(m.bytes(), "\x32\x00"s +
                           "\x32\x02"
                           "ab" +
                           "\x0a\x06\x03\x8e\x02\x9e\xa7\x05" + "\x22\x02\x08\x01");
  // A field number above 15 takes a two-byte tag.
  ProtoMessage big;
  big.uint64_field(16, 1);
  EXPECT_EQ(big.bytes(), "\x80\x01\x01"s);
}

std::string gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + 15), Z_OK);  // gzip only
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  EXPECT_EQ(z.avail_in, 0u);  // nothing after the trailer
  inflateEnd(&z);
  return out;
}

TEST(GzipWriter, ReadBackByInflate) {
  std::string data;
  // Repeating, as stacks do, with some variety: it must come out smaller, and whole.
  for (int i = 0; i < 200000; ++i) data += "frame" + std::to_string(i * 7919 % 101) + ",";
  std::ostringstream out;
  GzipWriter gz(out);
  // In pieces of several sizes, as the exporter writes, across zlib's output buffer.
  for (std::size_t at = 0, n = 1; at < data.size(); at += n, n = n * 3 % 70001 + 1)
    gz.write(std::string_view(data).substr(at, n));
  gz.finish();
  std::string file = out.str();
  ASSERT_GT(file.size(), 18u);
  EXPECT_EQ(file.substr(0, 3), "\x1f\x8b\x08"s);
  EXPECT_LT(file.size(), data.size() / 4);
  EXPECT_EQ(gunzip(file), data);
}

TEST(GzipWriter, NothingWrittenIsAnEmptyMember) {
  std::ostringstream out;
  GzipWriter gz(out);
  gz.finish();
  EXPECT_EQ(gunzip(out.str()), "");
}

TEST(ValidUtf8, ReplacesWhatIsNotUtf8) {
  EXPECT_EQ(valid_utf8("plain"), "plain");
  EXPECT_EQ(valid_utf8("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(valid_utf8("a\xff"
                       "b"),
            "a\xef\xbf\xbd"
            "b");
  // An overlong '/' and a surrogate are not UTF-8 either: each byte is replaced.
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(valid_utf8("cut \xe2\x82"), "cut \xef\xbf\xbd\xef\xbf\xbd");
}

}  // namespace
}  // namespace sonde::analyzers
