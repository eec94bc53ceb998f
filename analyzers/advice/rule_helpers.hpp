// Small arithmetic and text helpers shared by the rule files of `sonde candidates`.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "advice/candidates.hpp"
#include "metrics/metrics.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers::rules_detail {

inline double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

// part as % of total; 0 when total is not positive.
inline double share(std::int64_t part, std::int64_t total) {
  return total > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

// The rule's advice text with each "{}" replaced by what the candidate concerns.
inline std::string fill(std::string_view text, std::string_view what) {
  std::string out(text);
  for (auto pos = out.find("{}"); pos != std::string::npos; pos = out.find("{}", pos + what.size()))
    out.replace(pos, 2, what);
  return out;
}

// `word` in `text` with no identifier character on either side ("run" is not in "run_info").
inline bool contains_word(std::string_view text, std::string_view word) {
  if (word.size() < 3) return false;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (auto pos = text.find(word); pos != std::string_view::npos; pos = text.find(word, pos + 1)) {
    bool left = pos == 0 || !ident(text[pos - 1]);
    auto end = pos + word.size();
    bool right = end >= text.size() || !ident(text[end]);
    if (left && right) return true;
  }
  return false;
}

// Whether the run recorded PyTorch operators (torch was imported under the Python hook).
inline bool ran_torch(const Metrics& m) {
  return std::any_of(m.routines.begin(), m.routines.end(),
                     [](const RoutineMetrics& r) { return r.kind == kinds::kTorch; });
}

// The run's torch version where it is before 2 (no torch.compile there); nullopt for torch 2
// or a file that does not say (run_info torch.version).
inline std::optional<std::string> torch_before_2(const RunFacts& facts) {
  auto it = facts.info.find("torch.version");
  if (it != facts.info.end() && !it->second.empty() && it->second[0] < '2') return it->second;
  return std::nullopt;
}

inline std::optional<double> info_number(const RunFacts& facts, const std::string& key) {
  auto it = facts.info.find(key);
  if (it == facts.info.end()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str()) return std::nullopt;
  return v;
}

// The work cannot take less than `floor_s` (its FLOPs at the calibrated peak, its bytes at the
// calibrated bandwidth): the gain is held to time - floor, and says so.
inline void bound_gain(Candidate& c, double time_s, double floor_s, const std::string& limit) {
  double most = std::max(0.0, time_s - floor_s);
  c.evidence.emplace_back("floor_s", floor_s);
  c.evidence.emplace_back("max_gain_s", most);
  bool capped = c.est_gain_s > most;
  if (capped) c.est_gain_s = most;
  c.gain_bound =
      fmt::format("at most {:.3f} s: {} takes at least {:.3f} s of its {:.3f} s{}", most, limit,
                  floor_s, time_s, capped ? " (the rule's estimate was higher: held to this)" : "");
}

}  // namespace sonde::analyzers::rules_detail
