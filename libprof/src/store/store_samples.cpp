// The sampler's counts (SONDE_SAMPLE_HZ) into `samples`: symbolized here, at flush, and kept
// apart from the nodes' exact figures.
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "store/sqlite_db.hpp"
#include "store/store.hpp"
#include "symbols/symbolize.hpp"

namespace sonde {

namespace {

// Under the store lock; never destroyed (a flush may run while exit handlers destroy statics).
const std::string& frame_name(uintptr_t pc) {
  static auto* names = new std::unordered_map<uintptr_t, std::string>;
  auto [it, added] = names->try_emplace(pc);
  if (added) {
    std::string name = symbolize(reinterpret_cast<const void*>(pc));
    // ';' separates the frames of a path: a C++ name never holds one, but be sure.
    for (char& c : name) c = c == ';' ? ',' : c;
    it->second = std::move(name);
  }
  return it->second;
}

}  // namespace

bool Store::write_samples(Database& db, const ThreadSnapshot& t, const ThreadIds& ids,
                          std::string& error) {
  if (t.samples.empty()) return true;
  // Different addresses in one function are one frame: counts are summed by name.
  std::map<std::pair<int64_t, std::string>, std::pair<std::string, uint64_t>> rows;
  for (const SampleRow& s : t.samples) {
    if (s.node >= ids.nodes.size() || ids.nodes[s.node] == 0) continue;
    std::string path, leaf;
    for (uintptr_t pc : s.frames) {
      const std::string& name = frame_name(pc);
      if (!path.empty()) path += ';';
      path += name;
      leaf = name;
    }
    auto& row = rows[{ids.nodes[s.node], std::move(path)}];
    row.first = std::move(leaf);
    row.second += s.count;
  }
  // Counts are totals since the thread began: each flush replaces its rows.
  Statement ins(db.handle(),
                "INSERT OR REPLACE INTO samples (node_id, frames, leaf, count) VALUES (?,?,?,?)");
  for (const auto& [key, value] : rows) {
    ins.bind(1, key.first).bind(2, key.second).bind(3, value.first);
    ins.bind(4, int64_t(value.second));
    int rc = ins.step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      error = fmt::format("writing samples: {}", db.message());
      return false;
    }
  }
  return true;
}

}  // namespace sonde
