#include "runtime/config.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "sonde/options.hpp"

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

bool parse_level(std::string_view v, LogLevel& out) {
  if (v == "quiet") return out = LogLevel::kQuiet, true;
  if (v == "warn") return out = LogLevel::kWarn, true;
  if (v == "info") return out = LogLevel::kInfo, true;
  if (v == "debug") return out = LogLevel::kDebug, true;
  return false;
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

// Applies one variable's value; returns false when the value does not parse.
bool apply(Config& c, std::string_view name, std::string_view v) {
  uint64_t u = 0;
  if (name == "SONDE_OUTPUT") return c.output = std::string(v), !v.empty();
  if (name == "SONDE_TRACE") return parse_bool(v, c.trace);
  if (name == "SONDE_TRACE_BUFFER") {
    if (!parse_uint(v, u) || u == 0 || u > (1ull << 28)) return false;
    return c.trace_buffer = u, true;
  }
  if (name == "SONDE_FLUSH_INTERVAL") return parse_seconds(v, c.flush_interval_s);
  if (name == "SONDE_COUNTERS") return c.counters = split_list(v), true;
  if (name == "SONDE_PYTHON") return parse_bool(v, c.python);
  if (name == "SONDE_LOG") return parse_level(v, c.log_level);
  if (name == "SONDE_MAX_DEPTH") {
    if (!parse_uint(v, u) || u < 2 || u > 65536) return false;
    return c.max_depth = uint32_t(u), true;
  }
  if (name == "SONDE_RUN_ID") return c.run_id = std::string(v), true;
  if (name == "SONDE_PEAKS") return c.peaks_file = std::string(v), !v.empty();
  if (name == "SONDE_CUPTI_LIBRARY") return c.cupti_library = std::string(v), !v.empty();
  if (name == "SONDE_GPU_METRICS") return c.gpu_metrics = split_list(v), true;
  return true;
}

}  // namespace

Config parse_config(EnvLookup lookup) {
  Config c;
  std::vector<std::string> complaints;
  for (const OptionSpec& spec : kOptionSpecs) {
    std::string name(spec.name);
    const char* value = lookup(name.c_str());
    if (value == nullptr) continue;
    Config before = c;
    if (!apply(c, spec.name, value)) {
      c = before;
      complaints.push_back(fmt::format("ignoring {}='{}': not a valid value; using the default '{}'",
                                       spec.name, value, spec.default_value));
    }
  }
  if (c.peaks_file.empty()) {
    if (const char* cache = lookup("XDG_CACHE_HOME"); cache && *cache) {
      c.peaks_file = std::string(cache) + "/sonde/peaks.txt";
    } else if (const char* home = lookup("HOME"); home && *home) {
      c.peaks_file = std::string(home) + "/.cache/sonde/peaks.txt";
    }
  }
  // The level must be known before the complaints are printed.
  set_log_level(c.log_level);
  for (const auto& line : complaints) warn("{}", line);
  return c;
}

}  // namespace sonde
