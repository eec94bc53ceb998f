// `sonde run`: refusals before anything runs, and what the child sees and returns. A harmless
// system library stands in for libsonde.so so that these tests do not depend on libprof.
#include "programs/launcher.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/signal_name.hpp"
#include "fixture.hpp"

namespace sonde::test {
namespace {
namespace fs = std::filesystem;

std::string stand_in_library() {
  for (const char* p :
       {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6", "/usr/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"})
    if (fs::exists(p)) return p;
  return "";
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = stand_in_library();
    if (lib_.empty()) GTEST_SKIP() << "no libm.so.6 to preload";
    env_ = "SONDE_LIBRARY='" + lib_ + "'";
  }
  std::string q(const fs::path& p) { return "'" + p.string() + "'"; }
  TempDir dir_;
  std::string lib_;
  std::string env_;
};

TEST_F(LauncherTest, MissingCommandIs127) {
  CliResult r =
      run_sonde("run -o " + q(dir_.path / "p.db") + " -- no-such-command-sonde-xyz", env_);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "sonde run: command not found: no-such-command-sonde-xyz\n");
}

TEST_F(LauncherTest, ExistingOutputIsNotTouchedWithoutForce) {
  fs::path out = dir_.path / "p.db";
  std::ofstream(out) << "precious";
  CliResult r = run_sonde("run -o " + q(out) + " -- true", env_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists and is not a sonde profile; use --force"), std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(out), "precious");
  EXPECT_FALSE(fs::exists(out.string() + ".old"));
}

TEST_F(LauncherTest, AnOutputNamingTheProgramOrAnArgumentIsRefusedEvenWithForce) {
  // --force replaced the program's file before it ran; without it, an input profile of the
  // command's was set aside as .old.
  fs::path script = dir_.path / "s.sh";
  std::ofstream(script) << "exit 0\n";
  fs::path input = dir_.path / "in.db";
  std::ofstream(input) << "input";
  for (const std::string& how :
       {"--force -o " + q(script), "--force -o " + q(input), "-o " + q(input)}) {
    CliResult r = run_sonde("run " + how + " -- /bin/sh " + q(script) + " " + q(input), env_);
    EXPECT_EQ(r.exit_code, 2) << how;
    EXPECT_NE(r.err.find("names a file the command was given"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_file(script), "exit 0\n");
  EXPECT_EQ(read_file(input), "input");
  EXPECT_FALSE(fs::exists(input.string() + ".old"));
  // The program itself.
  fs::permissions(script, fs::perms::owner_all);
  CliResult self = run_sonde("run --force -o " + q(script) + " -- " + q(script), env_);
  EXPECT_EQ(self.exit_code, 2) << self.err;
  EXPECT_EQ(read_file(script), "exit 0\n");
}

TEST_F(LauncherTest, ForceRemovesOutputAndJournals) {
  fs::path out = dir_.path / "p.db";
  std::ofstream(out) << "old";
  std::ofstream(out.string() + "-wal") << "old";
  CliResult r = run_sonde("run --force -o " + q(out) + " -- true", env_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + "-wal"));
  EXPECT_NE(r.err.find("sonde: warning: no profile was written"), std::string::npos) << r.err;
}

TEST_F(LauncherTest, UnwritableOrMissingDirectory) {
  CliResult missing = run_sonde("run -o " + q(dir_.path / "nodir" / "p.db") + " -- true", env_);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  // /proc refuses new files even to root, where permission bits would not.
  CliResult proc = run_sonde("run -o /proc/sonde-test.db -- true", env_);
  EXPECT_EQ(proc.exit_code, 1);
  EXPECT_NE(proc.err.find("sonde run: cannot write to output directory /proc"), std::string::npos)
      << proc.err;
  if (::geteuid() != 0) {
    fs::path ro = dir_.path / "ro";
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    CliResult r = run_sonde("run -o " + q(ro / "p.db") + " -- true", env_);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot write to output directory"), std::string::npos) << r.err;
  }
}

TEST_F(LauncherTest, ChildSeesTheEnvironmentAndItsStatusIsReturned) {
  fs::path out = dir_.path / "p.db";
  fs::path seen = dir_.path / "seen";
  fs::path script = dir_.path / "child.sh";
  std::ofstream(script) << "echo \"$SONDE_OUTPUT|$LD_PRELOAD|${SONDE_RUN_ID-unset}|$SONDE_TRACE|"
                           "$SONDE_FLUSH_INTERVAL\" > '"
                        << seen.string() << "'\nexit 3\n";
  CliResult r = run_sonde("run -o " + q(out) + " --trace --flush-interval 2 -- sh " + q(script),
                          env_ + " SONDE_RUN_ID=outer LD_PRELOAD=");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(read_file(seen), out.string() + "|" + lib_ + "|unset|1|2\n");
}

TEST_F(LauncherTest, KilledChildGives128PlusSignal) {
  CliResult r = run_sonde("run -o " + q(dir_.path / "p.db") + " -- sh -c 'kill -SEGV $$'", env_);
  EXPECT_EQ(r.exit_code, 128 + 11);
  EXPECT_NE(r.err.find("sonde run: sh killed by signal 11 (SIGSEGV)"), std::string::npos) << r.err;
}

TEST_F(LauncherTest, CommandOptionsAreNotSondes) {
  // Without "--", the command starts at the first word that is not a sonde option.
  fs::path out = dir_.path / "p.db";
  CliResult r = run_sonde("run -o " + q(out) + " sh -c 'exit 5' -o x", env_);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  CliResult none = run_sonde("run -o " + q(out) + " --", env_);
  EXPECT_EQ(none.exit_code, 2);
  // One line, as every usage error (the whole help, 77 lines, came under it).
  EXPECT_EQ(none.err,
            "sonde run: no command given (sonde run [OPTIONS] [--] COMMAND [ARGS...]) (see sonde "
            "run --help)\n");
}

TEST_F(LauncherTest, HelpListsEnvironmentVariables) {
  CliResult r = run_sonde("run --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("SONDE_FLUSH_INTERVAL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SONDE_MAX_DEPTH"), std::string::npos);
}

TEST_F(LauncherTest, MissingLibraryIsAClearError) {
  CliResult r = run_sonde("run -o " + q(dir_.path / "p.db") + " -- true",
                          "SONDE_LIBRARY=" + (dir_.path / "nolib.so").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("sonde run: SONDE_LIBRARY="), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sonde::test

namespace sonde {
namespace {

// The table the tool carries (glibc 2.31 has no sigabbrev_np) names each signal as this
// machine's glibc does.
TEST(SignalName, NamesEverySignalAsGlibcDoes) {
  for (int sig = 1; sig <= SIGSYS; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    ASSERT_NE(abbrev, nullptr) << sig;
    EXPECT_EQ(analyzers::signal_name(sig), std::string("SIG") + abbrev) << sig;
  }
  EXPECT_EQ(analyzers::signal_name(SIGRTMIN + 1), fmt::format("signal {}", SIGRTMIN + 1));
}

}  // namespace
}  // namespace sonde
