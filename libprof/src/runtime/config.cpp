#include "runtime/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "sonde/options.hpp"
#include "store/peaks.hpp"

namespace sonde {

namespace {

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "yes" || v == "true" || v == "on") return out = true, true;
  if (v == "0" || v == "no" || v == "false" || v == "off") return out = false, true;
  return false;
}

bool parse_uint(std::string_view v, uint64_t& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size() && !v.empty();
}

bool parse_seconds(std::string_view v, double& out) {
  std::string s(v);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d) || d < 0) return false;
  out = d;
  return true;
}

std::string range_text(const OptionSpec& spec) {
  std::string unit = spec.type == OptionType::kSeconds ? " seconds" : "";
  return fmt::format("{}{:g} to {:g}{}", spec.zero_ok ? "0 or " : "", spec.min, spec.max, unit);
}

bool parse_level(std::string_view v, LogLevel& out) {
  if (v == "quiet") return out = LogLevel::kQuiet, true;
  if (v == "warn") return out = LogLevel::kWarn, true;
  if (v == "info") return out = LogLevel::kInfo, true;
  if (v == "debug") return out = LogLevel::kDebug, true;
  return false;
}

// A run id travels between processes and names the run in the file: a short word.
bool valid_run_id(std::string_view v) {
  return v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char ch) {
           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
         });
}

// "pid:process_id", as sonde writes it.
bool valid_process_ref(std::string_view v) {
  size_t colon = v.find(':');
  uint64_t a = 0, b = 0;
  return colon != std::string_view::npos && parse_uint(v.substr(0, colon), a) &&
         parse_uint(v.substr(colon + 1), b);
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> items;
  while (!v.empty()) {
    size_t comma = v.find(',');
    std::string_view item = v.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return items;
}

// One variable's parser: stores the value in its Config field; false when it does not parse.
// Numbers have been checked against the spec's range before.
using Parser = bool (*)(Config&, std::string_view);

template <auto Field>
bool as_bool(Config& c, std::string_view v) {
  return parse_bool(v, c.*Field);
}

template <auto Field>
bool as_uint(Config& c, std::string_view v) {
  uint64_t u = 0;
  if (!parse_uint(v, u)) return false;
  c.*Field = static_cast<std::remove_reference_t<decltype(c.*Field)>>(u);
  return true;
}

template <auto Field>
bool as_seconds(Config& c, std::string_view v) {
  return parse_seconds(v, c.*Field);
}

template <auto Field>
bool as_text(Config& c, std::string_view v) {
  c.*Field = std::string(v);
  return !v.empty();
}

template <auto Field>
bool as_list(Config& c, std::string_view v) {
  c.*Field = split_list(v);
  return true;
}

template <auto Field, bool (*Valid)(std::string_view)>
bool as_checked_text(Config& c, std::string_view v) {
  c.*Field = std::string(v);
  return Valid(v);
}

bool as_deadline(Config& c, std::string_view v) {
  uint64_t u = 0;
  if (!parse_uint(v, u) || u == 0 || u >= uint64_t(INT64_MAX)) return false;
  c.delay_until_ns = int64_t(u);
  return true;
}

bool as_level(Config& c, std::string_view v) { return parse_level(v, c.log_level); }

struct OptionParser {
  std::string_view name;
  Parser parse;
};

// Every variable the library reads (kOptionSpecs' kLibrary rows) and where its value goes.
constexpr OptionParser kParsers[] = {
    {"SONDE_OUTPUT", as_text<&Config::output>},
    {"SONDE_TRACE", as_bool<&Config::trace>},
    {"SONDE_TRACE_BUFFER", as_uint<&Config::trace_buffer>},
    {"SONDE_TRACE_MEMORY", as_uint<&Config::trace_memory_mb>},
    {"SONDE_RECORD_ARGS", as_bool<&Config::record_args>},
    {"SONDE_FTZ", as_bool<&Config::ftz>},
    {"SONDE_FLUSH_INTERVAL", as_seconds<&Config::flush_interval_s>},
    {"SONDE_DELAY", as_seconds<&Config::delay_s>},
    {"SONDE_DELAY_UNTIL", as_deadline},
    {"SONDE_STEPS", as_uint<&Config::steps>},
    {"SONDE_STEP_REGION", as_text<&Config::step_region>},
    {"SONDE_COUNTERS", as_list<&Config::counters>},
    {"SONDE_LOG", as_level},
    {"SONDE_SAMPLE_HZ", as_uint<&Config::sample_hz>},
    {"SONDE_ADAPTIVE", as_uint<&Config::adaptive>},
    {"SONDE_MAX_DEPTH", as_uint<&Config::max_depth>},
    {"SONDE_RUN_ID", as_checked_text<&Config::run_id, valid_run_id>},
    {"SONDE_PROCESS", as_checked_text<&Config::process_ref, valid_process_ref>},
    {"SONDE_EXEC_OF", as_checked_text<&Config::exec_of, valid_process_ref>},
    {"SONDE_SAY_WRITTEN", as_text<&Config::say_written>},
    {"SONDE_UNPROFILED", as_text<&Config::unprofiled>},
    {"SONDE_PEAKS", as_text<&Config::peaks_file>},
    {"SONDE_CUPTI_LIBRARY", as_text<&Config::cupti_library>},
    {"SONDE_GPU_METRICS", as_list<&Config::gpu_metrics>},
};

constexpr Parser parser_of(std::string_view name) {
  for (const OptionParser& p : kParsers) {
    if (p.name == name) return p.parse;
  }
  return nullptr;
}

// A variable the library declares but nothing parses, or a parser of an undeclared one, fails
// the build: the table and the declarations cannot drift.
constexpr bool parsers_match_declarations() {
  size_t library = 0;
  for (const OptionSpec& spec : kOptionSpecs) {
    if (spec.reader != OptionReader::kLibrary) continue;
    ++library;
    if (parser_of(spec.name) == nullptr) return false;
  }
  return library == std::size(kParsers);
}
static_assert(parsers_match_declarations(),
              "each kLibrary option of sonde/options.hpp needs a "
              "parser in kParsers, and only those");

}  // namespace

bool ftz_requested(EnvLookup lookup) {
  const char* value = lookup("SONDE_FTZ");
  bool on = false;
  return value != nullptr && parse_bool(value, on) && on;
}

Config parse_config(EnvLookup lookup) {
  Config c;
  std::vector<std::string> complaints;
  for (const OptionSpec& spec : kOptionSpecs) {
    std::string name(spec.name);
    const char* value = lookup(name.c_str());
    // Empty is unset, as `SONDE_X= prog` means in a shell.
    if (value == nullptr || *value == '\0' || spec.reader != OptionReader::kLibrary) continue;
    std::string_view v(value);
    // Shown on one line, whatever the value holds.
    std::string shown(v.substr(0, 64));
    for (char& ch : shown) ch = std::isprint(static_cast<unsigned char>(ch)) ? ch : '?';
    if (v.size() > 64) shown += "...";
    auto complain = [&](const std::string& why) {
      complaints.push_back(fmt::format("ignoring {}='{}': {}; using the default '{}'", spec.name,
                                       shown, why, spec.default_value));
    };
    if (spec.type == OptionType::kUInt || spec.type == OptionType::kSeconds) {
      double d = option_number(spec, v);
      if (std::isnan(d)) {
        complain(spec.type == OptionType::kUInt ? "not a whole number" : "not a number");
        continue;
      }
      if (!option_in_range(spec, d)) {
        complain("out of range (" + range_text(spec) + ")");
        continue;
      }
    }
    Config before = c;
    if (!parser_of(spec.name)(c, v)) {
      c = before;
      complain("not a valid value");
    }
  }
  if (c.peaks_file.empty()) {
    c.peaks_default = true;
    c.peaks_file = default_peaks_location(lookup);
  }
  // CUDA loads the tool this names (Nsight Systems, Nsight Compute, another CUPTI client) as
  // its injection library, which takes CUPTI before sonde can.
  if (const char* tool = lookup("CUDA_INJECTION64_PATH"); tool && *tool) c.cuda_injection = tool;
  // The level must be known before the complaints are printed. A process that joins a run
  // (SONDE_RUN_ID set by its root) inherited the same values, which the root has already
  // complained about: a shell script's every command would say it again.
  // Nor does it say anything on a stderr that is not a terminal, unless SONDE_LOG asks: the
  // program that started it may read that stream (Python's test runner takes its worker's last
  // line of output for its result, and got sonde's depth warning). What it would have said is
  // in the profile's notes, which sonde report shows.
  if (const char* level = lookup("SONDE_LOG");
      !c.run_id.empty() && (level == nullptr || *level == '\0') && isatty(STDERR_FILENO) == 0) {
    c.log_level = LogLevel::kQuiet;
  }
  set_log_level(c.log_level);
  if (c.run_id.empty()) {
    for (const auto& line : complaints) warn("{}", line);
  }
  return c;
}

}  // namespace sonde
