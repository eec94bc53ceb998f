#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "export/export.hpp"
#include "export/export_samples.hpp"
#include "export/json_sink.hpp"
#include "export/untraced.hpp"

namespace sonde::analyzers {
namespace {

// Chrome's stackFrames dictionary: one entry per distinct call path, a frame (name, category)
// and its parent entry, shared by every thread. An event names its path by "sf" instead of
// repeating it: the path of a deep Python stack was most of a 2-step PyTorch trace's 536 MB.
// Ids grow from 1, a parent always below its children (the order chrome://tracing reads them).
class FrameTable {
 public:
  std::int64_t intern(std::int64_t parent, std::int64_t routine_id, const std::string& name,
                      const std::string& kind) {
    auto [it, added] = ids_.try_emplace({parent, routine_id}, next_id());
    if (added) {
      frames_.push_back(
          fmt::format("{{\"name\":{},\"category\":{}{}}}", json_string(name), json_string(kind),
                      parent == 0 ? std::string() : fmt::format(",\"parent\":\"{}\"", parent)));
    }
    return it->second;
  }
  void write(JsonSink& out) const {
    out.put("\"stackFrames\":{{");
    for (std::size_t i = 0; i < frames_.size(); ++i)
      out.put("{}\n\"{}\":{}", i == 0 ? "" : ",", i + 1, frames_[i]);
    out.put("}}");
  }

 private:
  struct PairHash {
    std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
      return std::hash<std::int64_t>()(p.first * 1000003 + p.second);
    }
  };
  std::int64_t next_id() const { return static_cast<std::int64_t>(frames_.size()) + 1; }

  std::unordered_map<std::pair<std::int64_t, std::int64_t>, std::int64_t, PairHash> ids_;
  std::vector<std::string> frames_;  // the JSON of frame id i + 1
};

// Streams the traceEvents array: a trace can hold millions, which need not sit in memory.
class EventWriter {
 public:
  explicit EventWriter(JsonSink& out) : out_(out) { out_.put("{{\"traceEvents\":[\n"); }
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    if (!first_) out_.put(",\n");
    out_.put(format, std::forward<Args>(args)...);
    first_ = false;
  }
  void complete(std::int64_t ts_ns, std::int64_t dur_ns, std::int64_t pid, std::int64_t tid,
                const std::string& name_json, const std::string& cat_json, std::int64_t sf,
                const std::string& args = {}) {
    add("{{\"ph\":\"X\",\"name\":{},\"cat\":{},\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{}",
        name_json, cat_json, Micros{ts_ns}, Micros{dur_ns}, pid, tid);
    if (sf != 0) out_.put(",\"sf\":{}", sf);
    if (!args.empty()) out_.put(",\"args\":{}", args);
    out_.put("}}");
  }
  void finish(const FrameTable& frames, const Json& other_data) {
    out_.put("\n],\n\"displayTimeUnit\":\"ms\",\n");
    frames.write(out_);
    out_.put(",\n\"otherData\":{}}}\n", dump_json(other_data, -1));
  }

 private:
  JsonSink& out_;
  bool first_ = true;
};

// `aggregated`: whether a process has no trace events and its layout below is the call tree,
// not time: said in its title, the first thing Perfetto and chrome://tracing show, as well as
// in otherData, which neither shows.
void add_metadata(EventWriter& w, const std::vector<ThreadTree>& threads,
                  const std::function<bool(std::int64_t pid)>& aggregated) {
  std::unordered_set<std::int64_t> named;
  std::set<std::pair<std::int64_t, std::int64_t>> tracks;
  for (const ThreadTree& t : threads) {
    // An exec'd image keeps its predecessor's pid and thread id: one track, named once.
    if (!tracks.insert({t.pid, t.tid}).second) continue;
    if (named.insert(t.pid).second) {
      w.add(
          "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}"
          "}",
          t.pid, t.tid,
          json_string(
              fmt::format("{} (pid {}){}", t.process_command, t.pid,
                          aggregated(t.pid) ? " [aggregated call tree, not a timeline]" : "")));
    }
    std::string name = t.thread_name.empty() ? fmt::format("thread {}", t.seq) : t.thread_name;
    w.add(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
        t.pid, t.tid, json_string(name));
    w.add(
        "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
        "\"args\":{{\"sort_index\":{}}}}}",
        t.pid, t.tid, t.seq);
  }
}

// The aggregated tree as a flame chart: each child after its previous sibling, from its
// parent's start, lasting its inclusive time. The thread root is no frame (like callpaths).
void layout(EventWriter& w, FrameTable& frames, const ThreadTree& t, std::int64_t start_ns,
            Progress& progress) {
  // Parents before children, children in order, on a stack of its own (a 65,536-deep path).
  struct Item {
    const CallNode* node;
    std::int64_t start_ns, parent_sf;
  };
  std::vector<Item> todo{{&t.root, start_ns, 0}};
  while (!todo.empty()) {
    auto [node, start, parent_sf] = todo.back();
    todo.pop_back();
    std::int64_t sf =
        node == &t.root ? 0 : frames.intern(parent_sf, node->routine_id, node->name, node->kind);
    w.complete(start, node->incl_ns, t.pid, t.tid, json_string(node->name), json_string(node->kind),
               sf,
               fmt::format("{{\"calls\":{},\"excl_us\":{}}}", node->calls, Micros{node->excl_ns}));
    progress.advance();
    std::int64_t end = start;
    for (const CallNode& child : node->children) end += child.incl_ns;
    for (auto it = node->children.rbegin(); it != node->children.rend(); ++it) {
      end -= it->incl_ns;
      todo.push_back({&*it, end, sf});
    }
  }
}

// Trees laid out one after another on their tracks: threads of the same track (an exec'd image
// and the one it replaced: same pid and thread id) in the order they ran, not on top of each
// other.
// `track_end`: where each track's earlier content ends (an untraced image after a traced one's
// events).
void layout_trees(EventWriter& w, FrameTable& frames, const std::vector<ThreadTree*>& trees,
                  Progress& progress,
                  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> track_end = {}) {
  for (ThreadTree* t : trees) {
    sort_by_inclusive(t->root);
    std::int64_t& start = track_end[{t->pid, t->tid}];
    layout(w, frames, *t, start, progress);
    start += t->root.incl_ns;
  }
}

std::int64_t count_nodes(const CallNode& root) {
  std::int64_t n = 0;
  for_each_node(root, [&](const CallNode&, int) { ++n; });
  return n;
}

void write_trace_events(const ProfileFile& file, EventWriter& w, FrameTable& frames,
                        Progress& progress) {
  struct Routine {
    std::string name_json, kind_json, name, kind;
  };
  std::unordered_map<std::int64_t, Routine> routines;
  {
    auto st = file.prepare("SELECT routine_id, name, kind FROM routines");
    while (st.step()) {
      std::string name = st.text(1), kind = st.text(2);
      routines.emplace(st.int64(0), Routine{json_string(name), json_string(kind), name, kind});
    }
  }
  // A node's frame; parents are read before their children. Thread roots have none.
  struct Node {
    std::int64_t sf = 0;
    const Routine* routine = nullptr;
  };
  std::unordered_map<std::int64_t, Node> nodes;
  {
    auto st =
        file.prepare("SELECT node_id, parent_id, routine_id FROM nodes ORDER BY depth, node_id");
    while (st.step()) {
      const Routine& r = routines.at(st.int64(2));
      Node node{0, &r};
      if (!st.is_null(1)) {
        auto parent = nodes.find(st.int64(1));
        std::int64_t parent_sf = parent == nodes.end() ? 0 : parent->second.sf;
        node.sf = frames.intern(parent_sf, st.int64(2), r.name, r.kind);
      }
      nodes.emplace(st.int64(0), node);
    }
  }
  std::int64_t total = 0;
  {
    auto st = file.prepare("SELECT COUNT(*) FROM trace_events");
    if (st.step()) total = st.int64(0);
  }
  progress.start(total, "events");
  // Ties by the longer first: a parent starting with its child is written before it, which
  // chrome://tracing needs to nest them.
  auto st = file.prepare(
      "SELECT e.start_ns - (SELECT MIN(start_ns) FROM trace_events), e.end_ns - e.start_ns, "
      "       p.pid, t.tid, e.node_id "
      "FROM trace_events e JOIN threads t USING (thread_id) JOIN processes p USING (process_id) "
      "ORDER BY e.start_ns, e.end_ns DESC");
  while (st.step()) {
    auto node = nodes.find(st.int64(4));
    if (node == nodes.end()) continue;  // cannot happen in a file sonde wrote: nodes come first
    const Routine& r = *node->second.routine;
    w.complete(st.int64(0), st.int64(1), st.int64(2), st.int64(3), r.name_json, r.kind_json,
               node->second.sf);
    progress.advance();
  }
}

// Trace events the run recorded but the file lacks (a full buffer, the memory budget, a flush
// a full disk refused): the count and libsonde's notes saying why, so that a timeline with
// gaps, or the tree laid out in its place, is not taken for the whole run.
void add_trace_losses(const ProfileFile& file, Json& other) {
  if (!file.has_table("trace_drops") || !file.has_rows("trace_drops")) return;
  auto count = file.prepare("SELECT COALESCE(SUM(dropped), 0) FROM trace_drops");
  std::int64_t dropped = count.step() ? count.int64(0) : 0;
  if (dropped == 0) return;
  other["sonde_trace_dropped"] = dropped;
  Json notes = Json::array();
  auto st = file.prepare(
      "SELECT DISTINCT message FROM notes WHERE topic = 'trace-drops' ORDER BY note_id");
  while (st.step()) notes.push_back(st.text(0));
  other["sonde_trace_notes"] = notes;
}

}  // namespace

void write_chrome_trace(const ProfileFile& file, std::ostream& out, Progress* progress) {
  Progress silent;
  Progress& p = progress != nullptr ? *progress : silent;
  std::vector<ThreadTree> threads = load_thread_trees(file);
  bool has_events = file.has_rows("trace_events");
  Untraced untraced_of = load_untraced(file);
  std::set<std::int64_t> traced_pids;  // pids of the processes with trace events
  if (has_events)
    for (const ThreadTree& t : threads)
      if (untraced_of.threads.count(t.thread_id) == 0) traced_pids.insert(t.pid);
  JsonSink sink(out);
  EventWriter w(sink);
  FrameTable frames;
  add_metadata(w, threads, [&](std::int64_t pid) { return traced_pids.count(pid) == 0; });
  Json other{{"sonde_file", file.path()}};
  if (has_events) {
    write_trace_events(file, w, frames, p);
    other["sonde_layout"] = "timeline (trace events)";
    // The processes that have none (traced off in a child's environment, a file merged from
    // traced and untraced runs) were left as empty tracks: their trees instead, titled so.
    std::vector<ThreadTree*> untraced;
    std::set<std::int64_t> pids;
    for (ThreadTree& t : threads) {
      // (A thread of a traced process without events made no call, or had them dropped,
      // which otherData says: the timeline stays the process's.)
      if (untraced_of.threads.count(t.thread_id) == 0 || t.root.children.empty()) continue;
      untraced.push_back(&t);
      pids.insert(t.pid);
    }
    if (!untraced.empty()) {
      Progress silent;  // counted in events above
      layout_trees(w, frames, untraced, silent, untraced_of.events_end);
      other["sonde_untraced"] = fmt::format(
          "process{} {} recorded no trace events (tracing off there, or none kept): "
          "{} aggregated call tree{}, titled so, not a timeline",
          pids.size() == 1 ? "" : "es", fmt::join(pids, ", "), pids.size() == 1 ? "its" : "their",
          untraced.size() == 1 ? "" : "s");
    }
  } else {
    std::vector<ThreadTree*> all;
    std::int64_t total = 0;
    for (ThreadTree& t : threads) {
      all.push_back(&t);
      total += count_nodes(t.root);
    }
    p.start(total, "nodes");
    layout_trees(w, frames, all, p);
    other["sonde_layout"] = "aggregated call tree, not a timeline";
  }
  add_trace_losses(file, other);
  std::unordered_map<std::int64_t, ThreadLabel> labels;
  for (const ThreadTree& t : threads) {
    labels[t.thread_id] = {t.pid, t.tid,
                           t.thread_name.empty() ? fmt::format("thread {}", t.seq) : t.thread_name};
  }
  bool has_samples = false;
  write_sampled_tracks(file, labels, [&](const std::string& event) {
    w.add("{}", event);
    has_samples = true;
  });
  if (has_samples) {
    other["sonde_sampled"] =
        "tracks named [sampled]: the sampler's CPU-time samples per thread, "
        "merged into a flame chart (width = samples x period), apart from "
        "the exact figures";
  }
  other["sonde_call_paths"] = "stackFrames: each call path once; an event's sf names its path";
  w.finish(frames, other);
  p.finish();
}

}  // namespace sonde::analyzers
