#include "cli/routine_arg.hpp"

#include <fmt/format.h>

#include <set>

#include "cli/did_you_mean.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {

// Where a routine is, as NAME@WHERE names it: its file:line, else its library, else its kind
// (a region: `step@region` beside an optimizer's `step`, which a training loop's region often
// shares its name with).
std::string where_of(const HotspotRow& r) {
  if (!r.file.empty()) return fmt::format("{}:{}", r.file, r.line);
  return r.library.empty() ? r.kind : r.library;
}

// A Python frame's function name: its display name is pstats' "prog.py:10(helper)".
std::string_view function_name(const HotspotRow& r) {
  std::string_view name = r.name;
  std::size_t open = name.rfind('(');
  if (r.kind != kinds::kPython || !name.ends_with(')') || open == std::string_view::npos)
    return name;
  return name.substr(open + 1, name.size() - open - 2);
}

std::vector<const HotspotRow*> named(const Hotspots& h, std::string_view name,
                                     std::string_view where_end = {}) {
  std::vector<const HotspotRow*> out;
  for (const HotspotRow& r : h.rows)
    if ((r.name == name || function_name(r) == name) && where_of(r).ends_with(where_end))
      out.push_back(&r);
  return out;
}

// Shown at most when listing names: a name matching hundreds of routines is not a list to read.
constexpr std::size_t kListed = 8;

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kListed; ++i)
    out += fmt::format("{}'{}'", i ? ", " : "", names[i]);
  if (names.size() > kListed) out += fmt::format(" and {} more", names.size() - kListed);
  return out;
}

}  // namespace

const HotspotRow& pick_routine(const Hotspots& h, std::string_view spec) {
  std::vector<const HotspotRow*> found = named(h, spec);
  // NAME@WHERE, unless a routine is named with the '@' itself (C++ and Python names have none).
  std::size_t at = spec.rfind('@');
  if (found.empty() && at != std::string_view::npos && at > 0)
    found = named(h, spec.substr(0, at), spec.substr(at + 1));
  if (found.size() == 1) return *found.front();
  if (found.size() > 1) {
    std::vector<std::string> each;
    for (const HotspotRow* r : found)
      each.push_back(fmt::format("{}@{}", function_name(*r), where_of(*r)));
    throw Error(fmt::format("{} routines are named '{}': name one as NAME@WHERE ({})", found.size(),
                            spec, listed(each)),
                2);
  }
  // Hotspots rows are sorted by time: names containing the text come largest first.
  std::set<std::string> seen;
  std::vector<std::string> names, containing;
  for (const HotspotRow& r : h.rows) {
    std::string name(function_name(r));
    if (!seen.insert(name).second) continue;
    names.push_back(name);
    if (name.find(spec) != std::string::npos) containing.push_back(name);
  }
  std::string message = fmt::format("no routine named '{}' was called", spec);
  if (auto meant = nearest_name(spec, names))
    message += fmt::format("; did you mean '{}'?", *meant);
  else if (!containing.empty())
    message += fmt::format("; names containing it: {}", listed(containing));
  else
    message += " (sonde report lists the routines)";
  throw Error(message, 2);
}

}  // namespace sonde::cli
