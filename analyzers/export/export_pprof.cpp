// pprof's profile.proto (github.com/google/pprof, proto/profile.proto), gzip-compressed, for
// `go tool pprof`, pprof's web UI, Pyroscope and Parca. The profile is measured, not sampled:
// one Sample per call path of the `callpaths` view (merged over threads and processes, as the
// other exports), its stack leaf first down to the thread root, with the path's own figures:
// calls, exclusive nanoseconds and, where the cost models counted any, FLOPs. pprof adds a
// sample's values to every frame of its stack, so a frame's cumulative time is its inclusive
// time; the thread root's own sample (the `hotspots` view's row: the busy threads' time no
// measured call covers) makes the total the busy threads' time, `sonde report`'s 100 %.
// Each routine is one Location and one Function; a native routine's library is its Mapping,
// marked as already symbolized so that pprof looks for no binary.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export/export.hpp"
#include "export/gzip_writer.hpp"
#include "export/protobuf_writer.hpp"
#include "render/table_format.hpp"

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

class Samples {
 public:
  Samples(std::map<std::int64_t, Routine>& routines, Writer& w) : routines_(routines), w_(w) {}
  // stack: routine ids, leaf first.
  void add(const std::vector<std::int64_t>& stack, const std::vector<std::int64_t>& values) {
    locations_.clear();
    for (std::int64_t routine : stack) {
      auto r = routines_.find(routine);
      if (r == routines_.end()) return;  // a routine the file does not name: no frame to show
      if (r->second.id == 0) r->second.id = ++used_;
      locations_.push_back(r->second.id);
    }
    ProtoMessage sample;
    sample.packed_field(field::kSampleLocationId, locations_);
    sample.packed_field(field::kSampleValue, values);
    w_.top().message_field(field::kSample, sample);
    w_.flush_if_full();
  }

 private:
  std::map<std::int64_t, Routine>& routines_;
  Writer& w_;
  std::uint64_t used_ = 0;
  std::vector<std::uint64_t> locations_;
};

std::vector<std::int64_t> path_routines(std::string_view path_ids) {
  std::vector<std::int64_t> ids;
  while (!path_ids.empty()) {
    std::size_t slash = path_ids.find('/');
    std::string_view part = path_ids.substr(0, slash);
    std::int64_t id = 0;
    std::from_chars(part.data(), part.data() + part.size(), id);
    ids.push_back(id);
    path_ids.remove_prefix(slash == std::string_view::npos ? path_ids.size() : slash + 1);
  }
  return ids;
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
    if (r.kind != "python" && !r.library.empty()) {
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
  bool flops = false;
  {
    auto st = file.prepare("SELECT COALESCE(SUM(flops), 0) > 0 FROM routine_totals");
    flops = st.step() && st.int64(0) != 0;
  }
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

  Samples samples(routines, w);
  std::vector<std::int64_t> values;
  // The thread root (one routine, '<thread>', for every thread) ends every stack.
  std::int64_t root = 0;
  {
    auto st = file.prepare(
        "SELECT routine_id, calls, excl_s FROM hotspots WHERE kind = 'root' ORDER BY routine_id");
    while (st.step()) {
      if (root == 0) root = st.int64(0);
      values = {st.int64(1), ns(st.real(2))};
      if (flops) values.push_back(0);
      samples.add({st.int64(0)}, values);
    }
  }
  auto st = file.prepare("SELECT path_ids, calls, excl_s, flops FROM callpaths ORDER BY path_ids");
  while (st.step()) {
    std::vector<std::int64_t> stack = path_routines(st.text(0));
    std::reverse(stack.begin(), stack.end());
    if (root != 0) stack.push_back(root);
    values = {st.int64(1), ns(st.real(2))};
    if (flops) values.push_back(std::llround(st.real(3)));
    samples.add(stack, values);
  }
  write_frames(routines, s, w);
  for (const std::string& text : s.table()) w.top().bytes_field(field::kStringTable, text);
  w.finish();
}

}  // namespace sonde::analyzers
