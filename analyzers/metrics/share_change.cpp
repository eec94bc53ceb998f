#include "metrics/share_change.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>
#include <utility>

namespace sonde::analyzers {

namespace {

// "train.py:46(main)" -> "train.py:(main)": a Python frame's name without its line; "" for a
// name of no such form.
std::string without_line(std::string_view name) {
  auto open = name.rfind('(');
  if (open == std::string_view::npos || !name.ends_with(')')) return "";
  auto colon = name.rfind(':', open);
  if (colon == std::string_view::npos || colon + 1 == open) return "";
  for (std::size_t i = colon + 1; i < open; ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return "";
  return std::string(name.substr(0, colon + 1)) + std::string(name.substr(open));
}

}  // namespace

std::optional<double> PathShare::change() const {
  if (is_new()) return std::nullopt;
  return (after - before) / before;
}

PathShares::PathShares(const CallNode& after, const CallNode& before)
    : after_total_(static_cast<double>(after.incl_ns)),
      before_total_(static_cast<double>(before.incl_ns)) {
  // An after node and the baseline's nodes of the same path; on a stack, not the call stack
  // (a path can be 65,536 frames deep).
  using Matches = std::vector<const CallNode*>;
  std::vector<std::pair<const CallNode*, Matches>> todo;
  todo.push_back({&after, Matches{&before}});
  while (!todo.empty()) {
    auto [node, matches] = std::move(todo.back());
    todo.pop_back();
    double sum = 0;
    std::size_t kids = 0;
    for (const CallNode* m : matches) {
      sum += static_cast<double>(m->incl_ns);
      kids += m->children.size();
    }
    before_.emplace(node, sum / std::max(before_total_, 1.0));
    if (node->children.empty() || kids == 0) continue;
    // A few children are compared by name; more go through a map of their own (a map kept
    // across nodes would clear its buckets each time: quadratic after one wide node).
    constexpr std::size_t kScanned = 16;
    std::unordered_map<std::string_view, Matches> by_name;
    std::unordered_map<std::string, std::vector<const CallNode*>> unmatched;
    if (kids > kScanned)
      for (const CallNode* m : matches)
        for (const CallNode& c : m->children) by_name[c.name].push_back(&c);
    for (const CallNode& child : node->children) {
      Matches same;
      if (kids > kScanned) {
        auto it = by_name.find(child.name);
        if (it != by_name.end()) same = it->second;
      } else {
        for (const CallNode* m : matches)
          for (const CallNode& c : m->children)
            if (c.name == child.name) same.push_back(&c);
      }
      if (!same.empty()) {
        todo.emplace_back(&child, std::move(same));
      } else if (std::string loose = without_line(child.name); !loose.empty()) {
        unmatched[loose].push_back(&child);
      }
    }
    // A Python function whose line moved (an edit above its def) is the same path: matched by
    // its name without the line where one child on each side has it, and the baseline's has
    // no exact match. Until 2026-12-06 every frame below an edit was drawn full red as "not in
    // the baseline", unchanged functions included.
    if (unmatched.empty()) continue;
    std::unordered_map<std::string_view, char> here;
    for (const CallNode& child : node->children) here.emplace(child.name, 0);
    std::unordered_map<std::string, Matches> gone;
    for (const CallNode* m : matches)
      for (const CallNode& c : m->children)
        if (!here.count(c.name))
          if (std::string loose = without_line(c.name); unmatched.count(loose))
            gone[loose].push_back(&c);
    for (auto& [loose, children] : unmatched) {
      auto it = gone.find(loose);
      if (children.size() != 1 || it == gone.end()) continue;
      // The baseline's nodes of one name (several threads' or call paths') are one match.
      const std::string& name = it->second.front()->name;
      bool one_name = std::all_of(it->second.begin(), it->second.end(),
                                  [&](const CallNode* c) { return c->name == name; });
      if (one_name) todo.emplace_back(children.front(), std::move(it->second));
    }
  }
}

PathShare PathShares::of(const CallNode& node) const {
  auto it = before_.find(&node);
  return PathShare{it == before_.end() ? 0.0 : it->second,
                   static_cast<double>(node.incl_ns) / std::max(after_total_, 1.0)};
}

std::string share_change_fill(const PathShare& s) {
  if (s.is_new()) return "hsl(0,80%,50%)";
  double depth = s.after > 0 ? std::min(std::abs(std::log2(s.after / s.before)), 1.0) : 1.0;
  return fmt::format("hsl({},80%,{}%)", s.after >= s.before ? 0 : 220,
                     static_cast<int>(96 - 46 * depth));
}

std::vector<ShareChangeKey> share_change_legend() {
  std::vector<ShareChangeKey> out;
  for (auto [ratio, label] :
       {std::pair{2.0, "new, or 2x its share and more"}, std::pair{std::sqrt(2.0), "1.41x"},
        std::pair{1.0, "the same share"}, std::pair{std::sqrt(0.5), "0.71x"},
        std::pair{0.5, "half its share and less"}})
    out.push_back({label, share_change_fill(PathShare{1.0, ratio})});
  return out;
}

}  // namespace sonde::analyzers
