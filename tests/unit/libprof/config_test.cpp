#include "runtime/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <string>

namespace sonde {
namespace {

// parse_config takes a plain function pointer, so the fake environment is a global.
std::map<std::string, std::string> g_env;

const char* fake_lookup(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

struct Parsed {
  Config config;
  std::string stderr_text;
};

Parsed parse(std::map<std::string, std::string> env) {
  g_env = std::move(env);
  testing::internal::CaptureStderr();
  Parsed p{parse_config(fake_lookup), ""};
  p.stderr_text = testing::internal::GetCapturedStderr();
  set_log_level(LogLevel::kWarn);
  return p;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(Config, EmptyEnvironmentGivesTheDefaultsSilently) {
  Parsed p = parse({});
  Config d;
  EXPECT_EQ(p.config.output, "");
  EXPECT_EQ(p.config.trace, d.trace);
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, 10.0);
  EXPECT_EQ(p.config.max_depth, 1024u);
  EXPECT_TRUE(p.config.counters.empty());
  EXPECT_EQ(p.stderr_text, "");
}

TEST(Config, ValidValuesAreParsed) {
  Parsed p = parse({{"SONDE_OUTPUT", "/tmp/x.db"},
                    {"SONDE_TRACE", "1"},
                    {"SONDE_TRACE_BUFFER", "4096"},
                    {"SONDE_FLUSH_INTERVAL", "0.5"},
                    {"SONDE_COUNTERS", "a, b,,c"},
                    {"SONDE_TRACE_MEMORY", "64"},
                    {"SONDE_RECORD_ARGS", "0"},
                    {"SONDE_PROCESS", "12:3"},
                    {"SONDE_LOG", "info"},
                    {"SONDE_MAX_DEPTH", "64"},
                    {"SONDE_RUN_ID", "abc123"}});
  EXPECT_EQ(p.config.output, "/tmp/x.db");
  EXPECT_TRUE(p.config.trace);
  EXPECT_EQ(p.config.trace_buffer, 4096u);
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, 0.5);
  EXPECT_EQ(p.config.counters, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(p.config.trace_memory_mb, 64u);
  EXPECT_FALSE(p.config.record_args);
  EXPECT_EQ(p.config.process_ref, "12:3");
  EXPECT_EQ(p.config.log_level, LogLevel::kInfo);
  EXPECT_EQ(p.config.max_depth, 64u);
  EXPECT_EQ(p.config.run_id, "abc123");
  EXPECT_EQ(p.stderr_text, "");
}

TEST(Config, ZeroFlushIntervalMeansOnlyAtExit) {
  Parsed p = parse({{"SONDE_FLUSH_INTERVAL", "0"}});
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, 0.0);
  EXPECT_EQ(p.stderr_text, "");
}

struct BadValue {
  const char* name;
  const char* value;
};

// Test names show the value rather than the struct's bytes.
void PrintTo(const BadValue& bad, std::ostream* os) { *os << bad.name << "='" << bad.value << "'"; }

class ConfigBadValue : public testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadValue, KeepsTheDefaultAndWarnsOnceNamingTheVariable) {
  const BadValue& bad = GetParam();
  Parsed p = parse({{bad.name, bad.value}});
  Config d;
  EXPECT_EQ(p.config.trace, d.trace);
  EXPECT_EQ(p.config.trace_buffer, d.trace_buffer);
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, d.flush_interval_s);
  EXPECT_EQ(p.config.max_depth, d.max_depth);
  EXPECT_EQ(p.config.log_level, d.log_level);
  EXPECT_EQ(p.config.output, d.output);
  EXPECT_EQ(p.config.run_id, d.run_id);
  EXPECT_EQ(p.config.process_ref, d.process_ref);
  EXPECT_EQ(p.config.exec_of, d.exec_of);
  EXPECT_EQ(lines(p.stderr_text), 1u) << p.stderr_text;
  EXPECT_NE(p.stderr_text.find(bad.name), std::string::npos) << p.stderr_text;
  EXPECT_NE(p.stderr_text.find(std::string("'") + bad.value + "'"), std::string::npos)
      << p.stderr_text;
  EXPECT_EQ(p.stderr_text.rfind("sonde: ", 0), 0u) << p.stderr_text;
}

INSTANTIATE_TEST_SUITE_P(
    Values, ConfigBadValue,
    testing::Values(BadValue{"SONDE_FLUSH_INTERVAL", "abc"}, BadValue{"SONDE_FLUSH_INTERVAL", "-1"},
                    BadValue{"SONDE_FLUSH_INTERVAL", "inf"}, BadValue{"SONDE_FLUSH_INTERVAL", "1s"},
                    BadValue{"SONDE_TRACE", "maybe"}, BadValue{"SONDE_TRACE_BUFFER", "0"},
                    BadValue{"SONDE_MAX_DEPTH", "1"}, BadValue{"SONDE_MAX_DEPTH", "100000"},
                    BadValue{"SONDE_MAX_DEPTH", "12x"}, BadValue{"SONDE_LOG", "loud"},
                    BadValue{"SONDE_FLUSH_INTERVAL", "1e10"},
                    BadValue{"SONDE_FLUSH_INTERVAL", "1e-300"},
                    BadValue{"SONDE_FLUSH_INTERVAL", "nan"},
                    BadValue{"SONDE_TRACE_BUFFER", "268435457"},
                    BadValue{"SONDE_TRACE_BUFFER", "99999999999999999999999"},
                    BadValue{"SONDE_TRACE_MEMORY", "0"}, BadValue{"SONDE_TRACE_MEMORY", "-5"},
                    BadValue{"SONDE_RECORD_ARGS", "2"}, BadValue{"SONDE_RUN_ID", "x!y"},
                    BadValue{"SONDE_PROCESS", "12"}, BadValue{"SONDE_EXEC_OF", "a:b"}),
    [](const testing::TestParamInfo<BadValue>& info) {
      std::string name = std::string(info.param.name).substr(6) + "_" + std::to_string(info.index);
      return name;
    });

TEST(Config, EmptyMeansUnsetSilently) {
  Parsed p = parse({{"SONDE_OUTPUT", ""}, {"SONDE_FLUSH_INTERVAL", ""}, {"SONDE_TRACE", ""}});
  EXPECT_EQ(p.config.output, "");
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, 10.0);
  EXPECT_EQ(p.stderr_text, "");
}

TEST(Config, AProcessJoiningARunLeavesTheWarningToItsRoot) {
  Parsed p = parse({{"SONDE_RUN_ID", "abc"}, {"SONDE_MAX_DEPTH", "1"}});
  EXPECT_EQ(p.config.max_depth, Config().max_depth);
  EXPECT_EQ(p.stderr_text, "");
}

TEST(Config, AValueIsShownOnOneLineAndShort) {
  Parsed p = parse({{"SONDE_LOG", "a\nb" + std::string(200, 'x')}});
  EXPECT_EQ(lines(p.stderr_text), 1u) << p.stderr_text;
  EXPECT_NE(p.stderr_text.find("'a?bxxx"), std::string::npos) << p.stderr_text;
  EXPECT_LT(p.stderr_text.size(), 200u);
}

TEST(Config, TheRangeIsNamedInTheWarning) {
  Parsed p = parse({{"SONDE_FLUSH_INTERVAL", "1e10"}});
  EXPECT_NE(p.stderr_text.find("0 or 0.1 to 1e+06 seconds"), std::string::npos) << p.stderr_text;
}

TEST(Config, VariablesOfOtherReadersAreNotParsedHere) {
  Parsed p = parse({{"SONDE_PYTHON", "maybe"}, {"SONDE_LIBRARY", ""}});
  EXPECT_EQ(p.stderr_text, "");
}

TEST(Config, TheDefaultIsNamedInTheWarning) {
  Parsed p = parse({{"SONDE_FLUSH_INTERVAL", "abc"}});
  EXPECT_NE(p.stderr_text.find("'10'"), std::string::npos) << p.stderr_text;
}

TEST(Config, EachBadVariableGetsItsOwnLineAndGoodOnesStillApply) {
  Parsed p =
      parse({{"SONDE_TRACE", "maybe"}, {"SONDE_MAX_DEPTH", "1"}, {"SONDE_FLUSH_INTERVAL", "2.5"}});
  EXPECT_EQ(lines(p.stderr_text), 2u) << p.stderr_text;
  EXPECT_NE(p.stderr_text.find("SONDE_TRACE="), std::string::npos);
  EXPECT_NE(p.stderr_text.find("SONDE_MAX_DEPTH="), std::string::npos);
  EXPECT_DOUBLE_EQ(p.config.flush_interval_s, 2.5);
}

TEST(Config, QuietLevelSilencesTheWarnings) {
  Parsed p = parse({{"SONDE_LOG", "quiet"}, {"SONDE_TRACE", "maybe"}});
  EXPECT_EQ(p.config.log_level, LogLevel::kQuiet);
  EXPECT_FALSE(p.config.trace);
  EXPECT_EQ(p.stderr_text, "");
}

}  // namespace
}  // namespace sonde
