#include <fmt/format.h>

#include <unordered_map>

#include "export/export.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {
namespace {

double micros(std::int64_t ns) { return static_cast<double>(ns) / 1e3; }

// Streams events one by one: a trace can hold millions, which need not sit in memory as JSON.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) { out_ << "{\"traceEvents\":[\n"; }
  void add(const Json& event) {
    out_ << (first_ ? "" : ",\n") << dump_json(event, -1);
    first_ = false;
  }
  void finish(const Json& other_data) {
    out_ << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" << dump_json(other_data, -1)
         << "}\n";
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

void add_metadata(EventWriter& w, const std::vector<ThreadTree>& threads) {
  std::unordered_map<std::int64_t, bool> named;
  for (const ThreadTree& t : threads) {
    if (!named[t.pid]) {
      w.add({{"name", "process_name"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid},
             {"args", {{"name", fmt::format("{} (pid {})", t.process_command, t.pid)}}}});
      named[t.pid] = true;
    }
    std::string name = t.thread_name.empty() ? fmt::format("thread {}", t.seq) : t.thread_name;
    w.add({{"name", "thread_name"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid},
           {"args", {{"name", name}}}});
    w.add({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid},
           {"args", {{"sort_index", t.seq}}}});
  }
}

void layout(EventWriter& w, const ThreadTree& t, const CallNode& node, std::int64_t start_ns,
            const std::string& path) {
  w.add({{"name", node.name}, {"cat", node.kind}, {"ph", "X"}, {"ts", micros(start_ns)},
         {"dur", micros(node.incl_ns)}, {"pid", t.pid}, {"tid", t.tid},
         {"args", {{"path", path}, {"calls", node.calls}, {"excl_us", micros(node.excl_ns)}}}});
  std::int64_t next = start_ns;
  for (const CallNode& child : node.children) {
    // Like the callpaths view, paths leave out the thread root.
    layout(w, t, child, next, &node == &t.root ? child.name : path + ";" + child.name);
    next += child.incl_ns;
  }
}

void write_trace_events(const ProfileFile& file, EventWriter& w) {
  // Paths are rebuilt from the node table: parents are read before their children.
  std::unordered_map<std::int64_t, std::string> path_of;
  {
    auto st = file.prepare(
        "SELECT n.node_id, n.parent_id, r.name FROM nodes n JOIN routines r USING (routine_id) "
        "ORDER BY n.depth, n.node_id");
    while (st.step()) {
      std::string path = st.text(2);
      if (!st.is_null(1)) {
        auto parent = path_of.find(st.int64(1));
        if (parent != path_of.end() && parent->second != "<thread>") path = parent->second + ";" + path;
      }
      path_of.emplace(st.int64(0), std::move(path));
    }
  }
  auto st = file.prepare(
      "SELECT e.start_ns - (SELECT MIN(start_ns) FROM trace_events), e.end_ns - e.start_ns, "
      "       p.pid, t.tid, r.name, r.kind, e.node_id "
      "FROM trace_events e JOIN threads t USING (thread_id) JOIN processes p USING (process_id) "
      "     JOIN nodes n ON n.node_id = e.node_id JOIN routines r ON r.routine_id = n.routine_id "
      "ORDER BY e.start_ns");
  while (st.step()) {
    auto path = path_of.find(st.int64(6));
    w.add({{"name", st.text(4)}, {"cat", st.text(5)}, {"ph", "X"}, {"ts", micros(st.int64(0))},
           {"dur", micros(st.int64(1))}, {"pid", st.int64(2)}, {"tid", st.int64(3)},
           {"args", {{"path", path == path_of.end() ? st.text(4) : path->second}}}});
  }
}

}  // namespace

void write_chrome_trace(const ProfileFile& file, std::ostream& out) {
  std::vector<ThreadTree> threads = load_thread_trees(file);
  bool has_events = false;
  {
    auto st = file.prepare("SELECT EXISTS (SELECT 1 FROM trace_events)");
    has_events = st.step() && st.int64(0) != 0;
  }
  EventWriter w(out);
  add_metadata(w, threads);
  Json other{{"sonde_file", file.path()}};
  if (has_events) {
    write_trace_events(file, w);
    other["sonde_layout"] = "timeline (trace events)";
  } else {
    for (ThreadTree& t : threads) {
      sort_by_inclusive(t.root);
      layout(w, t, t.root, 0, t.root.name);
    }
    other["sonde_layout"] = "aggregated call tree, not a timeline";
  }
  w.finish(other);
}

}  // namespace sonde::analyzers
