#include "view/view_timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/table_format.hpp"

namespace sonde::analyzers {

namespace {

// A trace event's or a GPU record's row, before it is numbered for the page.
struct Event {
  std::int32_t lane;
  std::int32_t depth;
  std::int64_t node_id;   // -1: none
  std::int64_t frame;     // routine_id for a call; index into gpu names for GPU work
  std::int64_t start_ns;  // CLOCK_REALTIME
  std::int64_t end_ns;
};

std::string json_string(const std::string& s) { return dump_json(Json(s), -1); }

std::int64_t count(const ProfileFile& file, const char* sql) {
  auto st = file.prepare(sql);
  return st.step() && !st.is_null(0) ? st.int64(0) : 0;
}

constexpr const char* kTimedGpu = "start_ns IS NOT NULL AND end_ns IS NOT NULL";

// Where the carried events stop: the start of the first event past the cap, so that the
// events starting before it are at most max_events; nullopt when all fit.
std::optional<std::int64_t> cut_at(const ProfileFile& file, bool cpu, bool gpu,
                                   std::size_t max_events) {
  std::string from = cpu ? "SELECT start_ns FROM trace_events" : "";
  if (gpu)
    from += fmt::format("{}SELECT start_ns FROM gpu_activity WHERE {}", cpu ? " UNION ALL " : "",
                        kTimedGpu);
  auto st = file.prepare(
      fmt::format("SELECT start_ns FROM ({}) ORDER BY start_ns LIMIT 1 OFFSET ?1", from));
  st.bind(1, static_cast<std::int64_t>(max_events));
  if (!st.step()) return std::nullopt;
  return st.int64(0);
}

// Appends "key":[v,v,...] of one column.
template <typename Get>
void column(std::string& out, std::string_view key, std::size_t n, Get get) {
  out += fmt::format(",\"{}\":[", key);
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", get(i));
  }
  out += ']';
}

struct Lane {
  Json entry;
  std::int32_t depths = 0;
  std::int64_t events = 0;
};

}  // namespace

std::string timeline_json(const ProfileFile& file, std::size_t max_events) {
  bool cpu = file.has_table("trace_events") && file.has_rows("trace_events");
  std::int64_t gpu_events =
      file.has_table("gpu_activity")
          ? count(file,
                  "SELECT COUNT(*) FROM gpu_activity WHERE start_ns IS NOT NULL "
                  "AND end_ns IS NOT NULL")
          : 0;
  bool gpu = gpu_events > 0;
  if (!cpu && !gpu) return "null";
  std::int64_t total = gpu_events + (cpu ? count(file, "SELECT COUNT(*) FROM trace_events") : 0);
  std::optional<std::int64_t> cut = cut_at(file, cpu, gpu, max_events);
  std::int64_t before = cut ? *cut : INT64_MAX;

  // Lanes: each thread with events, in the order processes and then threads started, then each
  // GPU stream (by process, device, stream).
  std::vector<Lane> lanes;
  std::unordered_map<std::int64_t, std::int32_t> thread_lane;
  if (cpu) {
    auto st = file.prepare(
        "SELECT t.thread_id, p.pid, t.tid, t.seq, COALESCE(t.name, '') FROM threads t "
        "JOIN processes p USING (process_id) "
        "WHERE EXISTS (SELECT 1 FROM trace_events e WHERE e.thread_id = t.thread_id) "
        "ORDER BY p.started_ns, p.process_id, t.seq");
    while (st.step()) {
      thread_lane[st.int64(0)] = static_cast<std::int32_t>(lanes.size());
      lanes.push_back({Json{{"kind", "thread"},
                            {"thread_id", st.int64(0)},
                            {"pid", st.int64(1)},
                            {"tid", st.int64(2)},
                            {"seq", st.int64(3)},
                            {"name", st.text(4)}}});
    }
  }
  std::vector<Event> events;
  events.reserve(static_cast<std::size_t>(std::min<std::int64_t>(total, max_events)));
  if (cpu) {
    auto st = file.prepare(
        "SELECT e.thread_id, n.depth, e.node_id, n.routine_id, e.start_ns, e.end_ns "
        "FROM trace_events e JOIN nodes n USING (node_id) WHERE e.start_ns < ?1");
    st.bind(1, before);
    while (st.step()) {
      auto lane = thread_lane.find(st.int64(0));
      if (lane == thread_lane.end()) continue;  // cannot be: the lanes are these threads
      events.push_back({lane->second,
                        static_cast<std::int32_t>(std::max<std::int64_t>(st.int64(1) - 1, 0)),
                        st.int64(2), st.int64(3), st.int64(4), st.int64(5)});
    }
  }
  // GPU work's names, and the GPU events; their frame is -1 - (index into gpu_names).
  std::vector<std::pair<std::string, std::string>> gpu_names;  // kind, name
  if (gpu) {
    std::map<std::pair<std::string, std::string>, std::int64_t> name_index;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::int32_t> stream_lane;
    auto st = file.prepare(fmt::format(
        "SELECT g.process_id, p.pid, COALESCE(g.device, -1), COALESCE(g.stream, -1), "
        "       COALESCE(g.node_id, -1), g.kind, g.name, g.start_ns, g.end_ns "
        "FROM gpu_activity g JOIN processes p USING (process_id) WHERE {} AND g.start_ns < ?1 "
        "ORDER BY p.started_ns, g.process_id, g.device, g.stream",
        kTimedGpu));
    st.bind(1, before);
    while (st.step()) {
      auto key = std::make_tuple(st.int64(0), st.int64(2), st.int64(3));
      auto [lane, added] = stream_lane.try_emplace(key, static_cast<std::int32_t>(lanes.size()));
      if (added)
        lanes.push_back({Json{{"kind", "stream"},
                              {"process_id", st.int64(0)},
                              {"pid", st.int64(1)},
                              {"device", st.int64(2)},
                              {"stream", st.int64(3)}}});
      auto [name, fresh] = name_index.try_emplace({st.text(5), st.text(6)},
                                                  static_cast<std::int64_t>(gpu_names.size()));
      if (fresh) gpu_names.push_back(name->first);
      events.push_back({lane->second, 0, st.int64(4), -1 - name->second, st.int64(7), st.int64(8)});
    }
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.lane, a.start_ns, b.end_ns, a.depth) <
           std::tie(b.lane, b.start_ns, a.end_ns, b.depth);
  });
  std::int64_t origin = INT64_MAX, end = INT64_MIN;
  for (const Event& e : events) {
    origin = std::min(origin, e.start_ns);
    end = std::max(end, e.end_ns);
    Lane& l = lanes[static_cast<std::size_t>(e.lane)];
    l.depths = std::max(l.depths, e.depth + 1);
    ++l.events;
  }
  if (events.empty()) origin = end = 0;

  // Frames: the routines the events name, then GPU work's names.
  std::unordered_map<std::int64_t, std::int64_t> frame_of;  // routine_id or -1-gpu -> frame
  std::vector<std::int64_t> routine_ids;
  for (const Event& e : events)
    if (e.frame >= 0 && frame_of.try_emplace(e.frame, -1).second) routine_ids.push_back(e.frame);

  // Nodes: the events' call paths and their ancestors below the thread's root, numbered for
  // the page; a launch's node is the launching call.
  std::int64_t max_node = count(file, "SELECT MAX(node_id) FROM nodes");
  struct NodeRow {
    std::int64_t parent = -1, routine = -1, depth = 0;
  };
  std::vector<NodeRow> node_rows;
  std::vector<std::int64_t> node_index;  // node_id -> the page's index, -1: not carried
  std::vector<std::int64_t> node_ids;    // the page's index -> node_id
  bool any_node =
      std::any_of(events.begin(), events.end(), [](const Event& e) { return e.node_id >= 0; });
  if (any_node && max_node > 0) {
    node_rows.resize(static_cast<std::size_t>(max_node) + 1);
    node_index.assign(node_rows.size(), -1);
    auto st = file.prepare("SELECT node_id, COALESCE(parent_id, -1), routine_id, depth FROM nodes");
    while (st.step())
      node_rows[static_cast<std::size_t>(st.int64(0))] = {st.int64(1), st.int64(2), st.int64(3)};
    auto carry = [&](std::int64_t id) {
      std::vector<std::int64_t> chain;
      for (; id > 0 && id <= max_node && node_index[static_cast<std::size_t>(id)] < 0 &&
             node_rows[static_cast<std::size_t>(id)].depth > 0;
           id = node_rows[static_cast<std::size_t>(id)].parent)
        chain.push_back(id);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {  // parents first
        node_index[static_cast<std::size_t>(*it)] = static_cast<std::int64_t>(node_ids.size());
        node_ids.push_back(*it);
        std::int64_t routine = node_rows[static_cast<std::size_t>(*it)].routine;
        if (frame_of.try_emplace(routine, -1).second) routine_ids.push_back(routine);
      }
    };
    for (const Event& e : events)
      if (e.node_id >= 0) carry(e.node_id);
  }

  std::vector<std::string> names, kinds, wheres;
  std::vector<std::optional<std::int64_t>> frame_routine;
  {
    std::sort(routine_ids.begin(), routine_ids.end());
    auto st = file.prepare(
        "SELECT routine_id, name, kind, CASE WHEN file <> '' THEN file || ':' || line "
        "ELSE library END FROM routines ORDER BY routine_id");
    while (st.step()) {
      auto it = frame_of.find(st.int64(0));
      if (it == frame_of.end()) continue;
      it->second = static_cast<std::int64_t>(names.size());
      names.push_back(st.text(1));
      kinds.push_back(st.text(2));
      wheres.push_back(st.text(3));
      frame_routine.push_back(st.int64(0));
    }
  }
  std::int64_t first_gpu = static_cast<std::int64_t>(names.size());
  for (const auto& [kind, name] : gpu_names) {
    names.push_back(name);
    kinds.push_back(kind);
    wheres.emplace_back();
    frame_routine.emplace_back();
  }
  auto frame = [&](std::int64_t f) { return f >= 0 ? frame_of.at(f) : first_gpu + (-1 - f); };
  auto node = [&](std::int64_t id) {
    return id > 0 && id < static_cast<std::int64_t>(node_index.size())
               ? node_index[static_cast<std::size_t>(id)]
               : -1;
  };

  Json lane_list = Json::array();
  for (Lane& l : lanes) {
    l.entry["depths"] = l.depths;
    l.entry["events"] = l.events;
    lane_list.push_back(std::move(l.entry));
  }
  std::int64_t dropped =
      file.has_table("trace_drops") ? count(file, "SELECT SUM(dropped) FROM trace_drops") : 0;
  std::string out = fmt::format(
      "{{\"origin_ns\":\"{}\",\"end_ns\":{},\"events\":{},\"carried\":{},\"cut_ns\":{},"
      "\"max_events\":{},\"dropped\":{},\"lanes\":{}",
      origin, end - origin, total, events.size(), cut ? fmt::format("{}", *cut - origin) : "null",
      max_events, dropped, dump_json(lane_list, -1));
  out += ",\"frames\":{\"name\":[";
  for (std::size_t i = 0; i < names.size(); ++i) (out += i ? "," : "") += json_string(names[i]);
  out += "],\"kind\":[";
  for (std::size_t i = 0; i < kinds.size(); ++i) (out += i ? "," : "") += json_string(kinds[i]);
  out += "],\"where\":[";
  for (std::size_t i = 0; i < wheres.size(); ++i) (out += i ? "," : "") += json_string(wheres[i]);
  out += "]";
  column(out, "routine_id", frame_routine.size(), [&](std::size_t i) {
    return frame_routine[i] ? fmt::format("{}", *frame_routine[i]) : std::string("null");
  });
  out += "},\"nodes\":{\"parent\":[";
  for (std::size_t i = 0; i < node_ids.size(); ++i) {
    if (i) out += ',';
    fmt::format_to(std::back_inserter(out), "{}",
                   node(node_rows[static_cast<std::size_t>(node_ids[i])].parent));
  }
  out += ']';
  column(out, "frame", node_ids.size(), [&](std::size_t i) {
    return frame_of.at(node_rows[static_cast<std::size_t>(node_ids[i])].routine);
  });
  out += '}';
  std::size_t n = events.size();
  column(out, "lane", n, [&](std::size_t i) { return events[i].lane; });
  column(out, "depth", n, [&](std::size_t i) { return events[i].depth; });
  column(out, "frame", n, [&](std::size_t i) { return frame(events[i].frame); });
  column(out, "node", n, [&](std::size_t i) { return node(events[i].node_id); });
  column(out, "start", n, [&](std::size_t i) { return events[i].start_ns - origin; });
  column(out, "dur", n, [&](std::size_t i) { return events[i].end_ns - events[i].start_ns; });
  out += '}';
  return out;
}

}  // namespace sonde::analyzers
