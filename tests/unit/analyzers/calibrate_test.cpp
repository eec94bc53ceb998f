// The peaks file of `sonde calibrate`: parsing (as libsonde reads it), --set syntax, merging
// calibrated and manual figures, and the written text. The measurements are tested end to end
// (tests/e2e/test_calibrate.py).
#include "programs/calibrate.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {
namespace {

PeaksFile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_peaks(in);
}

TEST(PeaksFile, ParsesLinesCommentsAndBadLines) {
  PeaksFile f = parse(
      "# header\n\ngemm.f32 1 74.2 calibrated\n  gemm.f32 0 141.9 calibrated  # trailing\n"
      "mem.bw 0 12.3\ngemm.f64 x 1 manual\nmem.bw 0 -1 manual\nmem.bw 1 2 manual extra\n");
  ASSERT_EQ(f.peaks.size(), 3u);
  EXPECT_EQ(f.peaks[0].resource, "gemm.f32");
  EXPECT_EQ(f.peaks[0].threads, 1);
  EXPECT_DOUBLE_EQ(f.peaks[0].value, 74.2);
  EXPECT_EQ(f.peaks[0].source, "calibrated");
  EXPECT_EQ(f.peaks[1].threads, 0);
  EXPECT_EQ(f.peaks[2].source, "manual");  // no source: hand-written
  ASSERT_EQ(f.bad_lines.size(), 3u);
  EXPECT_EQ(f.bad_lines[0], "6: threads must be a whole number >= 0: gemm.f64 x 1 manual");
}

TEST(PeaksFile, SetSyntax) {
  Peak p = parse_peak_setting("gemm.f32=1200");
  EXPECT_EQ(p.resource, "gemm.f32");
  EXPECT_EQ(p.threads, 0);
  EXPECT_DOUBLE_EQ(p.value, 1200);
  EXPECT_EQ(p.source, "manual");
  p = parse_peak_setting("gemm.f64@1=37.5");
  EXPECT_EQ(p.threads, 1);
  EXPECT_DOUBLE_EQ(p.value, 37.5);
  EXPECT_EQ(parse_peak_setting("mem.bw@0=1e2").value, 100);
  for (const char* bad :
       {"gemm.f32", "gemm.f32=", "gemm.f32=x", "gemm.f32=0", "gemm.f32=-3", "gemm.f32=inf",
        "gemm.f32=1x", "gemm.x=1", "gemm.f32@=1", "gemm.f32@-1=1", "gemm.f32@1.5=1", "=1"}) {
    try {
      parse_peak_setting(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << bad;
      EXPECT_NE(std::string(e.what()).find("RESOURCE[@THREADS]=VALUE"), std::string::npos);
    }
  }
}

TEST(PeaksFile, CalibratedReplacesCalibratedButKeepsManual) {
  std::vector<Peak> existing = {{"gemm.f32", 1, 10, "calibrated", {}},
                                {"gemm.f32", 0, 1200, "manual", {}},
                                {"gemm.bf16", 0, 300, "manual", {}}};
  std::vector<Peak> measured = {{"gemm.f32", 1, 74.2, "calibrated", {}},
                                {"gemm.f32", 0, 141.9, "calibrated", {}},
                                {"mem.bw", 0, 12.3, "calibrated", {}}};
  std::vector<Peak> kept;
  std::vector<Peak> merged = merge_peaks(existing, measured, &kept);
  ASSERT_EQ(merged.size(), 4u);
  EXPECT_DOUBLE_EQ(merged[0].value, 74.2);
  EXPECT_DOUBLE_EQ(merged[1].value, 1200);
  EXPECT_EQ(merged[1].source, "manual");
  EXPECT_EQ(merged[2].resource, "gemm.bf16");
  EXPECT_EQ(merged[3].resource, "mem.bw");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].resource, "gemm.f32");

  // A manual figure replaces either kind, and duplicates of its key go.
  std::vector<Peak> again =
      merge_peaks({{"mem.bw", 0, 1, "manual", {}},
                   {"gemm.f32", 1, 2, "calibrated", {}},
                   {"mem.bw", 0, 3, "manual", {}}},
                  {{"mem.bw", 0, 20, "manual", {}}, {"gemm.f32", 1, 600, "manual", {}}});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_DOUBLE_EQ(again[0].value, 20);
  EXPECT_DOUBLE_EQ(again[1].value, 600);
  EXPECT_EQ(again[1].source, "manual");
}

TEST(PeaksFile, FormatIsTheContractAndReadsBack) {
  std::vector<Peak> peaks = {{"mem.bw", 0, 12.3, "forced", 31.5},
                             {"gemm.x", 2, 5, "manual", {}},
                             {"gemm.f32", 0, 141.9, "calibrated", 2.5},
                             {"gemm.f64", 1, 37, "manual", {}},
                             {"gemm.f32", 1, 74.2, "calibrated", 0}};
  std::string text = format_peaks(peaks, "`sonde calibrate` on host 2026-01-01 00:00 UTC");
  EXPECT_EQ(text,
            "# sonde peaks, written by `sonde calibrate` on host 2026-01-01 00:00 UTC\n"
            "# resource threads value source [spread]; threads 0 = all; gemm.* in GFLOP/s, "
            "mem.bw in GB/s;\n# spread: % the median repeat fell below the value\n"
            "gemm.f32 1 74.2 calibrated 0\n"
            "gemm.f32 0 141.9 calibrated 2.5\n"
            "gemm.f64 1 37 manual\n"
            "mem.bw 0 12.3 forced 31.5\n"
            "gemm.x 2 5 manual\n");
  PeaksFile back = parse(text);
  EXPECT_TRUE(back.bad_lines.empty());
  ASSERT_EQ(back.peaks.size(), peaks.size());
  EXPECT_EQ(back.peaks[3].spread_pct, 31.5);  // the spread reads back; none stays none
  EXPECT_FALSE(back.peaks[2].spread_pct);
}

TEST(PeaksFile, DefaultPathFollowsTheEnvironment) {
  // Saved and restored: other tests in this binary may read them.
  auto saved = [](const char* n) -> std::optional<std::string> {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto old_peaks = saved("SONDE_PEAKS"), old_xdg = saved("XDG_CACHE_HOME"),
       old_home = saved("HOME");
  setenv("SONDE_PEAKS", "/p/peaks.txt", 1);
  setenv("XDG_CACHE_HOME", "/x", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(default_peaks_path(), "/p/peaks.txt");
  unsetenv("SONDE_PEAKS");
  EXPECT_EQ(default_peaks_path(), "/x/sonde/peaks.txt");
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(default_peaks_path(), "/h/.cache/sonde/peaks.txt");
  unsetenv("HOME");
  EXPECT_THROW(default_peaks_path(), Error);
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v)
      setenv(n, v->c_str(), 1);
    else
      unsetenv(n);
  };
  restore("SONDE_PEAKS", old_peaks);
  restore("XDG_CACHE_HOME", old_xdg);
  restore("HOME", old_home);
}

}  // namespace
}  // namespace sonde::analyzers
