// pprof's profile.proto (github.com/google/pprof, proto/profile.proto), gzip-compressed, for
// `go tool pprof`, pprof's web UI, Pyroscope and Parca. The profile is measured, not sampled:
// one Sample per node of the calling-context tree (a call path of one thread), its stack leaf
// first down to the thread root, with the node's own figures: calls, exclusive nanoseconds and,
// where the cost models counted any, FLOPs. pprof adds up samples of one stack (what the
// `callpaths` view does over threads and processes) and adds a sample's values to every frame
// of its stack, so a frame's cumulative time is its inclusive time. The roots' own time (what
// no measured call covers) is in their samples: the total is the busy threads' time, `sonde
// report`'s 100 %; idle threads are left out, as there. Stacks are walked in memory from the
// nodes' parents rather than read from callpaths, whose path strings cost 40 times as much on
// a deep tree. Each routine is one Location and one Function; a native routine's library is
// its Mapping, marked as already symbolized so that pprof looks for no binary.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/table_format.hpp"
#include "export/export.hpp"
#include "export/gzip_writer.hpp"
#include "export/protobuf_writer.hpp"
#include "profile/counted_nodes.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

namespace {

// profile.proto's field numbers, of the messages sonde writes.
namespace field {
constexpr int kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5,
              kStringTable = 6, kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11, kPeriod = 12,
              kDefaultSampleType = 14;
constexpr int kValueTypeType = 1, kValueTypeUnit = 2;
constexpr int kSampleLocationId = 1, kSampleValue = 2;
constexpr int kMappingId = 1, kMappingFilename = 5, kMappingHasFunctions = 7;
constexpr int kLocationId = 1, kLocationMappingId = 2, kLocationLine = 4;
constexpr int kLineFunctionId = 1, kLineLine = 2;
constexpr int kFunctionId = 1, kFunctionName = 2, kFunctionSystemName = 3, kFunctionFilename = 4,
              kFunctionStartLine = 5;
}  // namespace field

// string_table: entry 0 is "" (the spec's rule); every entry UTF-8, as proto3's strings must be.
class Strings {
 public:
  Strings() { index(""); }
  std::int64_t index(const std::string& text) {
    auto [it, added] =
        index_.try_emplace(valid_utf8(text), static_cast<std::int64_t>(table_.size()));
    if (added) table_.push_back(it->first);
    return it->second;
  }
  const std::vector<std::string>& table() const { return table_; }

 private:
  std::unordered_map<std::string, std::int64_t> index_;
  std::vector<std::string> table_;
};

struct Routine {
  std::string name, kind, library, file;
  std::int64_t line = 0;
  std::uint64_t id = 0;  // its Location's and Function's id; 0 until a sample uses it
};

std::int64_t ns(double seconds) { return std::llround(seconds * 1e9); }

// Top-level fields go to the gzip stream as they are made: a million call paths are written
// without the message being held whole.
class Writer {
 public:
  explicit Writer(std::ostream& out) : gzip_(out) {}
  ProtoMessage& top() { return top_; }
  void flush_if_full() {
    if (top_.bytes().size() >= (1u << 20)) flush();
  }
  void flush() {
    gzip_.write(top_.bytes());
    top_.clear();
  }
  void finish() {
    flush();
    gzip_.finish();
  }

 private:
  GzipWriter gzip_;
  ProtoMessage top_;
};

void value_type(ProtoMessage& top, int field_number, Strings& s, const char* type,
                const char* unit) {
  ProtoMessage m;
  m.int64_field(field::kValueTypeType, s.index(type));
  m.int64_field(field::kValueTypeUnit, s.index(unit));
  top.message_field(field_number, m);
}

// The counted threads' nodes as counted_nodes has them (busy or waiting threads, without the
// nodes inside waits for work; idle threads stay out, and a waiting thread's root has no time of
// its own, as in hotspots), each with its routine's location id; parents are found by node id
// once all are read.
struct Node {
  std::int64_t node_id = 0, parent_id = 0;
  bool root = false;  // a thread root: no parent
  std::uint64_t location = 0;
  std::int64_t calls = 0, excl_ns = 0, flops = 0;
};

std::vector<Node> read_nodes(const ProfileFile& file, std::map<std::int64_t, Routine>& routines) {
  std::vector<Node> nodes;
  std::uint64_t used = 0;
  auto st = file.prepare(
      "SELECT n.node_id, n.parent_id, n.routine_id, n.calls, "
      "CASE WHEN t.waiting AND n.parent_id IS NULL THEN 0 ELSE n.excl_ns END, n.flops "
      "FROM " +
      counted_nodes_table(file) + " n JOIN thread_times t USING (thread_id) WHERE t.counted");
  while (st.step()) {
    auto [r, added] = routines.try_emplace(st.int64(2));
    // A routine the file does not name still gets a frame, so its callees keep their stack.
    if (added) r->second = {fmt::format("routine {}", st.int64(2)), "unknown", "", "", 0};
    if (r->second.id == 0) r->second.id = ++used;
    nodes.push_back({st.int64(0), st.is_null(1) ? 0 : st.int64(1), st.is_null(1), r->second.id,
                     st.int64(3), st.int64(4), std::llround(st.real(5))});
  }
  return nodes;
}

// One Sample per node, its stack leaf first: the nodes are walked parents first (children in
// node order), the path from the root kept as the walk goes.
void write_samples(const std::vector<Node>& nodes, bool flops, Writer& w) {
  std::unordered_map<std::int64_t, std::size_t> index;
  index.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i].node_id, i);
  // Children as one array (first_child[i] .. first_child[i + 1]), in node order.
  std::vector<std::size_t> first_child(nodes.size() + 1, 0), children(nodes.size());
  std::vector<std::size_t> roots;
  std::vector<std::size_t> parent_of(nodes.size(), SIZE_MAX);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto p = nodes[i].root ? index.end() : index.find(nodes[i].parent_id);
    if (p == index.end()) {
      roots.push_back(i);
    } else {
      parent_of[i] = p->second;
      ++first_child[p->second + 1];
    }
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) first_child[i + 1] += first_child[i];
  std::vector<std::size_t> filled(first_child.begin(), first_child.end() - 1);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (parent_of[i] != SIZE_MAX) children[filled[parent_of[i]]++] = i;

  std::vector<std::uint64_t> path, leaf_first;
  std::vector<std::int64_t> values;
  std::vector<std::pair<std::size_t, std::size_t>> todo;  // node, depth
  ProtoMessage sample;
  for (std::size_t root : roots) {
    todo.assign(1, {root, 0});
    while (!todo.empty()) {
      auto [i, depth] = todo.back();
      todo.pop_back();
      const Node& n = nodes[i];
      path.resize(depth);
      path.push_back(n.location);
      leaf_first.assign(path.rbegin(), path.rend());
      values = {n.calls, n.excl_ns};
      if (flops) values.push_back(n.flops);
      sample.clear();
      sample.packed_field(field::kSampleLocationId, leaf_first);
      sample.packed_field(field::kSampleValue, values);
      w.top().message_field(field::kSample, sample);
      w.flush_if_full();
      for (std::size_t c = first_child[i + 1]; c-- > first_child[i];)
        todo.emplace_back(children[c], depth + 1);
    }
  }
}

// The Functions, Locations and Mappings of the routines the samples used.
void write_frames(const std::map<std::int64_t, Routine>& routines, Strings& s, Writer& w) {
  std::map<std::string, std::uint64_t> mappings;
  for (const auto& [routine_id, r] : routines) {
    if (r.id == 0) continue;
    ProtoMessage function;
    function.uint64_field(field::kFunctionId, r.id);
    // As `sonde report` shows it; the name as recorded is the system name, which also keeps
    // pprof from simplifying names it takes for C++ ("<module>", "<thread>").
    function.int64_field(field::kFunctionName, s.index(fmt::format("{} [{}]", r.name, r.kind)));
    function.int64_field(field::kFunctionSystemName, s.index(r.name));
    function.int64_field(field::kFunctionFilename, s.index(!r.file.empty() ? r.file : r.library));
    function.int64_field(field::kFunctionStartLine, r.line);
    w.top().message_field(field::kFunction, function);

    ProtoMessage location;
    location.uint64_field(field::kLocationId, r.id);
    if (r.kind != kinds::kPython && !r.library.empty()) {
      auto [m, added] = mappings.try_emplace(r.library, mappings.size() + 1);
      if (added) {
        ProtoMessage mapping;
        mapping.uint64_field(field::kMappingId, m->second);
        mapping.int64_field(field::kMappingFilename, s.index(r.library));
        mapping.bool_field(field::kMappingHasFunctions, true);
        w.top().message_field(field::kMapping, mapping);
      }
      location.uint64_field(field::kLocationMappingId, m->second);
    }
    ProtoMessage line;
    line.uint64_field(field::kLineFunctionId, r.id);
    line.int64_field(field::kLineLine, r.line);
    location.message_field(field::kLocationLine, line);
    w.top().message_field(field::kLocation, location);
    w.flush_if_full();
  }
}

}  // namespace

void write_pprof(const ProfileFile& file, std::ostream& out) {
  std::map<std::int64_t, Routine> routines;
  {
    auto st = file.prepare("SELECT routine_id, name, kind, library, file, line FROM routines");
    while (st.step())
      routines[st.int64(0)] = {st.text(1), st.text(2), st.text(3), st.text(4), st.int64(5)};
  }
  std::vector<Node> nodes = read_nodes(file, routines);
  bool flops = std::any_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.flops != 0; });
  Writer w(out);
  Strings s;
  // Counts first, as the spec's convention asks; time is the type pprof shows unless told.
  value_type(w.top(), field::kSampleType, s, "calls", "count");
  value_type(w.top(), field::kSampleType, s, "time", "nanoseconds");
  if (flops) value_type(w.top(), field::kSampleType, s, "flops", "count");
  w.top().int64_field(field::kDefaultSampleType, s.index("time"));
  // Measured, not sampled: every nanosecond is counted.
  value_type(w.top(), field::kPeriodType, s, "time", "nanoseconds");
  w.top().int64_field(field::kPeriod, 1);
  {
    auto st = file.prepare(
        "SELECT (SELECT MIN(started_ns) FROM runs), COALESCE(wall_s, 0) FROM run_totals");
    if (st.step()) {
      w.top().int64_field(field::kTimeNanos, st.is_null(0) ? 0 : st.int64(0));
      w.top().int64_field(field::kDurationNanos, ns(st.real(1)));
    }
  }

  write_samples(nodes, flops, w);
  write_frames(routines, s, w);
  for (const std::string& text : s.table()) w.top().bytes_field(field::kStringTable, text);
  w.finish();
}

}  // namespace sonde::analyzers
