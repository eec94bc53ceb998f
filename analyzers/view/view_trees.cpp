#include "view/view_trees.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "metrics/share_change.hpp"
#include "profile/call_tree.hpp"
#include "render/tree.hpp"

namespace sonde::analyzers {

namespace {

std::string command_of(const ProfileFile& file, std::int64_t process_id) {
  auto st = file.prepare("SELECT command FROM processes WHERE process_id = ?1");
  st.bind(1, process_id);
  return st.step() ? st.text(0) : std::string();
}

}  // namespace

TreeScopes list_tree_scopes(const ProfileFile& file) {
  TreeScopes out;
  std::map<std::int64_t, std::vector<std::int64_t>> processes_of_rank;
  for (auto st = file.prepare("SELECT rank, process_id FROM process_ranks ORDER BY process_id");
       st.step();)
    processes_of_rank[st.int64(0)].push_back(st.int64(1));
  out.ranks = static_cast<std::int64_t>(processes_of_rank.size());
  std::map<std::int64_t, std::string> part_of_rank;
  if (out.ranks > 1) {
    auto st = file.prepare(
        "SELECT rank, processes, busy_threads, busy_s, host FROM rank_times ORDER BY rank");
    while (st.step() && out.scopes.size() < kViewScopesMax) {
      std::int64_t rank = st.int64(0);
      TreeScope s{fmt::format("tree_rank_{}", rank), processes_of_rank[rank], nullptr};
      s.entry = Json{{"kind", "rank"},
                     {"rank", rank},
                     {"processes", st.int64(1)},
                     {"busy_threads", st.int64(2)},
                     {"busy_s", st.real(3)},
                     {"host", st.text(4)},
                     {"part", s.part}};
      part_of_rank[rank] = s.part;
      out.scopes.push_back(std::move(s));
    }
  }
  // Processes with a busy thread, by pid within a rank (an exec'd image keeps its pid: one
  // process, as `sonde tree --pid` takes it), in the order they started (rows are in the order
  // processes first flushed); one alone in its rank has the rank's tree already.
  std::vector<TreeScope> processes;
  auto st = file.prepare(
      "SELECT pr.rank, p.pid, GROUP_CONCAT(p.process_id), SUM(pt.busy_threads), SUM(pt.thread_s), "
      "       MAX(p.process_id), COUNT(*) "
      "FROM processes p JOIN process_times pt USING (process_id) "
      "JOIN process_ranks pr USING (process_id) "
      "GROUP BY pr.rank, p.pid HAVING SUM(pt.busy_threads + pt.waiting_threads) > 0 "
      "ORDER BY MIN(p.started_ns), MIN(p.process_id)");
  while (st.step()) {
    ++out.processes;
    if (processes.size() >= kViewScopesMax) continue;
    std::int64_t rank = st.int64(0), pid = st.int64(1);
    std::vector<std::int64_t> ids;
    for (std::string_view rest = st.text(2); !rest.empty();) {
      std::size_t comma = std::min(rest.find(','), rest.size());
      ids.push_back(std::stoll(std::string(rest.substr(0, comma))));
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    std::sort(ids.begin(), ids.end());
    auto shared = part_of_rank.find(rank);
    bool alone = shared != part_of_rank.end() && processes_of_rank[rank] == ids;
    TreeScope s{alone ? shared->second : fmt::format("tree_process_{}", ids.front()), ids, nullptr};
    s.entry = Json{{"kind", "process"},
                   {"pid", pid},
                   {"command", command_of(file, st.int64(5))},
                   {"rank", out.ranks > 1 ? Json(rank) : Json(nullptr)},
                   {"images", st.int64(6)},
                   {"busy_threads", st.int64(3)},
                   {"busy_s", st.real(4)},
                   {"part", s.part}};
    processes.push_back(std::move(s));
  }
  if (out.processes > 1)
    for (TreeScope& s : processes) out.scopes.push_back(std::move(s));
  return out;
}

Json tree_scopes_json(const TreeScopes& scopes) {
  Json list = Json::array();
  for (const TreeScope& s : scopes.scopes) list.push_back(s.entry);
  return Json{{"ranks", scopes.ranks},
              {"processes", scopes.processes},
              {"max", kViewScopesMax},
              {"scopes", std::move(list)}};
}

Json scope_tree_json(const ProfileFile& file, const TreeScope& scope, double min_pct) {
  ProfileFile alone = ProfileFile::open_processes(file, scope.processes);
  return render_tree_json(load_forest(alone, true), TreeOptions{min_pct, std::nullopt, true});
}

Json diff_tree_json(const ProfileFile& after, const ProfileFile& before,
                    const std::string& before_name, double min_pct) {
  CallNode root = load_merged_tree(after);
  sort_by_inclusive(root);
  PathShares shares(root, load_merged_tree(before));  // after the sort: looked up by node
  auto share_fields = [&](const CallNode& node, Json& j) {
    PathShare s = shares.of(node);
    std::optional<double> change = s.change();
    j["before_pct"] = s.is_new() ? Json(nullptr) : Json(100 * s.before);
    j["after_pct"] = 100 * s.after;
    j["change_pct"] = change ? Json(100 * *change) : Json(nullptr);
    j["fill"] = share_change_fill(s);
  };
  Json legend = Json::array();
  for (const ShareChangeKey& k : share_change_legend())
    legend.push_back(Json{{"label", k.label}, {"fill", k.fill}});
  return Json{{"baseline", before_name},
              {"total_s", shares.after_total_ns() / 1e9},
              {"baseline_total_s", shares.before_total_ns() / 1e9},
              {"legend", std::move(legend)},
              {"min_pct", min_pct},
              {"max_depth", nullptr},
              {"threads", "merge"},
              {"denominator", "busy threads' time"},
              {"tree", render_node_json(root, root.incl_ns,
                                        TreeOptions{min_pct, std::nullopt, true}, share_fields)}};
}

}  // namespace sonde::analyzers
