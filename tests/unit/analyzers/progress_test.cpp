// The progress line on a real terminal (a pseudo-terminal): its rate, the time left once a
// second has gone by, and the time taken at the end; nothing where the stream is not one.
#include "base/progress.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

namespace sonde::analyzers {
namespace {

class OnTerminal : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::openpty(&master_, &slave_, nullptr, nullptr, nullptr), 0);
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
    out_ = ::fdopen(slave_, "w");
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    std::fclose(out_);
    ::close(master_);
  }
  std::string seen() {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(master_, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
    return text;
  }
  int master_ = -1, slave_ = -1;
  std::FILE* out_ = nullptr;
};

TEST_F(OnTerminal, SaysTheRateThenTheTimeLeftThenTheTimeTaken) {
  {
    Progress p(out_, "sonde export");
    p.start(10, "files", true);
    p.advance();  // the first unit draws the line, with the rate so far and no estimate yet
    std::string first = seen();
    EXPECT_TRUE(std::regex_search(first, std::regex("^\rsonde export:  10 % \\(1 of 10 files\\), "
                                                    "[0-9.]+ ?[kMG]? files/s\x1b\\[K$")))
        << first;
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    p.advance();  // past a second: 2 of 10 in ~1.1 s, 8 left at that rate is ~4 s (more if slow)
    std::string later = seen();
    EXPECT_TRUE(
        std::regex_search(later, std::regex("\\(2 of 10 files\\), [0-9.]+ files/s, ~[3-9] s "
                                            "left\x1b\\[K$")))
        << later;
  }  // the destructor ends the line at 100 % with the time it took
  std::string last = seen();
  EXPECT_TRUE(std::regex_search(
      last, std::regex("100 % \\(10 of 10 files\\), [0-9]+\\.[0-9] s\x1b\\[K\r?\n$")))
      << last;
}

TEST_F(OnTerminal, ShortWorkShowsNothing) {
  {
    Progress p(out_, "sonde export");
    p.start(Progress::kMinTotal - 1, "events");
    for (int i = 0; i < 10; ++i) p.advance();
  }
  EXPECT_EQ(seen(), "");
}

TEST(Progress, NotATerminalShowsNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress p(file, "sonde merge");
    p.start(3, "files", true);
    p.advance(3);
  }
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
}

}  // namespace
}  // namespace sonde::analyzers
