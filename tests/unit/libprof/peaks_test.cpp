// The one reader of the peaks file (libsonde at start-up and `sonde calibrate`): strict about
// each field, and never blocked or flooded by what SONDE_PEAKS names.
#include "store/peaks.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "temp_dir.hpp"

namespace sonde {
namespace {

TEST(PeaksParser, RejectsTrailingGarbageNonFiniteAndNonPositiveWithLineNumbers) {
  PeaksText t = parse_peaks(
      "# sonde peaks\n"
      "gemm.f32 0 100abc\n"       // 2
      "gemm.f32 1 nan\n"          // 3
      "gemm.f32 2 inf manual\n"   // 4
      "gemm.f64 0 0\n"            // 5
      "gemm.f64 1 -3\n"           // 6
      "mem.bw 1x 9\n"             // 7
      "mem.bw -1 9\n"             // 8
      "mem.bw 0 9 manual more\n"  // 9: a spread must be a number
      "mem.bw 0\n"                // 10
      "gemm.f32 2 88.5 calibrated 3.5\r\n"
      "gemm.f64 1 1e2  # a datasheet figure\n");
  ASSERT_EQ(t.peaks.size(), 2u);
  EXPECT_EQ(t.peaks[0].threads, 2);
  EXPECT_DOUBLE_EQ(t.peaks[0].value, 88.5);
  EXPECT_EQ(t.peaks[0].source, "calibrated");
  EXPECT_EQ(t.peaks[0].spread_pct, 3.5);
  EXPECT_DOUBLE_EQ(t.peaks[1].value, 100.0);
  EXPECT_FALSE(t.peaks[1].spread_pct);
  EXPECT_EQ(t.peaks[1].source, "manual");
  ASSERT_EQ(t.bad_lines.size(), 9u);
  EXPECT_EQ(t.bad_lines[0], "2: value is not a number: gemm.f32 0 100abc");
  EXPECT_EQ(t.bad_lines[1], "3: value must be finite and > 0: gemm.f32 1 nan");
  EXPECT_EQ(t.bad_lines[2], "4: value must be finite and > 0: gemm.f32 2 inf manual");
  EXPECT_EQ(t.bad_lines[3], "5: value must be finite and > 0: gemm.f64 0 0");
  EXPECT_EQ(t.bad_lines[4], "6: value must be finite and > 0: gemm.f64 1 -3");
  EXPECT_EQ(t.bad_lines[5], "7: threads must be a whole number >= 0: mem.bw 1x 9");
  EXPECT_EQ(t.bad_lines[6], "8: threads must be a whole number >= 0: mem.bw -1 9");
  EXPECT_EQ(t.bad_lines[7], "9: spread must be a finite number >= 0 (%): mem.bw 0 9 manual more");
  EXPECT_EQ(t.bad_lines[8], "10: expected `resource threads value [source [spread]]`: mem.bw 0");
}

TEST(PeaksFile, MissingIsNoPeaks) {
  test::TempDir dir;
  PeaksText t;
  std::string error;
  EXPECT_TRUE(read_peaks_file(dir.file("absent.txt"), t, error));
  EXPECT_TRUE(t.peaks.empty());
  EXPECT_TRUE(error.empty());
  std::string file = dir.write("plain", "x");  // a path beneath a file: nothing there either
  EXPECT_TRUE(read_peaks_file(file + "/peaks.txt", t, error));
  EXPECT_TRUE(error.empty());
}

TEST(PeaksFile, RefusesFifoDeviceAndDirectoryWithoutBlocking) {
  test::TempDir dir;
  std::string fifo = dir.file("peaks.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir.file("")}) {
    PeaksText t;
    std::string error;
    EXPECT_FALSE(read_peaks_file(path, t, error)) << path;
    EXPECT_EQ(error, path + ": not a regular file; peaks not read");
    EXPECT_TRUE(t.peaks.empty());
  }
}

TEST(PeaksFile, RefusesAFileOverTheCap) {
  test::TempDir dir;
  std::string path = dir.file("big.txt");
  {
    std::ofstream f(path);
    for (std::size_t i = 0; i * 24 <= kMaxPeaksFileBytes; ++i) f << "gemm.f32 1 10 manual    \n";
  }
  PeaksText t;
  std::string error;
  EXPECT_FALSE(read_peaks_file(path, t, error));
  EXPECT_NE(error.find("a peaks file may have; peaks not read"), std::string::npos) << error;
  EXPECT_TRUE(t.peaks.empty());
}

TEST(PeaksFile, ReadsARegularFile) {
  test::TempDir dir;
  std::string path = dir.file("peaks.txt");
  std::ofstream(path) << "gemm.f32 1 74.2 calibrated\ngemm.f32 0 100abc\n";
  PeaksText t;
  std::string error;
  ASSERT_TRUE(read_peaks_file(path, t, error)) << error;
  ASSERT_EQ(t.peaks.size(), 1u);
  ASSERT_EQ(t.bad_lines.size(), 1u);
  EXPECT_EQ(t.bad_lines[0], "2: value is not a number: gemm.f32 0 100abc");
}

}  // namespace
}  // namespace sonde
