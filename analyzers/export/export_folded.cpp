#include <cmath>
#include <map>

#include "export/export.hpp"

namespace sonde::analyzers {
namespace {

void collect(const CallNode& node, const std::string& path,
             std::map<std::string, std::int64_t>& excl_ns) {
  excl_ns[path] += node.excl_ns;
  for (const CallNode& child : node.children) collect(child, path + ";" + child.name, excl_ns);
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> folded_stacks(
    const std::vector<ThreadTree>& trees) {
  // Summed in nanoseconds and rounded once, so many small nodes are not each rounded away.
  std::map<std::string, std::int64_t> excl_ns;
  for (const ThreadTree& t : trees)
    for (const CallNode& child : t.root.children) collect(child, child.name, excl_ns);
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& [path, ns] : excl_ns) {
    auto us = static_cast<std::int64_t>(std::llround(static_cast<double>(ns) / 1e3));
    if (us > 0) out.emplace_back(path, us);
  }
  return out;
}

void write_folded(const std::vector<ThreadTree>& trees, std::ostream& out) {
  for (const auto& [path, us] : folded_stacks(trees)) out << path << ' ' << us << '\n';
}

}  // namespace sonde::analyzers
