// cProfile's stats file (what `python -m cProfile -o FILE` and pstats.Stats.dump_stats write),
// so that pstats, snakeviz, tuna and gprof2dot read a sonde profile: a marshal'd dict
//   {(file, line, function): (primitive calls, calls, tottime, cumtime,
//                             {caller: (calls, primitive calls, tottime, cumtime)})}
// (a caller's tuple puts the calls first, as cProfile's snapshot_stats does). cProfile counts a
// caller's primitive calls per caller-callee pair (fib(8) -> fib(7) is primitive for it, being
// the first fib -> fib on the stack); sonde's are the callee's calls that are not inside
// another of its own, so a recursive function's callers entry for itself says 0 where
// cProfile's says how many chains began.
// Marshal's format is CPython's (Python/marshal.c): each object is a type byte and its data,
// little-endian; sonde writes the five kinds this needs.
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "base/table_format.hpp"
#include "export/export.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

namespace {

static_assert(std::endian::native == std::endian::little, "marshal is little-endian");

class Marshal {
 public:
  explicit Marshal(std::ostream& out) : out_(out) {}
  void dict_begin() { byte('{'); }
  void dict_end() { byte('0'); }  // TYPE_NULL closes a dict
  void tuple(std::int32_t n) {
    byte('(');
    raw(n);
  }
  void integer(std::int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      byte('i');
      raw(static_cast<std::int32_t>(v));
      return;
    }
    // TYPE_LONG: a signed count of 15-bit digits, least significant first.
    std::uint64_t m = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    std::int32_t digits = 0;
    for (std::uint64_t t = m; t != 0; t >>= 15) ++digits;
    byte('l');
    raw(v < 0 ? -digits : digits);
    for (; m != 0; m >>= 15) raw(static_cast<std::uint16_t>(m & 0x7fff));
  }
  void real(double v) {
    byte('g');  // TYPE_BINARY_FLOAT
    raw(v);
  }
  // Names are the program's bytes; marshal's strings must be UTF-8 (else pstats cannot load
  // the file).
  void text(const std::string& s) {
    std::string utf8 = valid_utf8(s);
    byte('u');  // TYPE_UNICODE: UTF-8 bytes
    raw(static_cast<std::int32_t>(utf8.size()));
    out_.write(utf8.data(), static_cast<std::streamsize>(utf8.size()));
  }

 private:
  void byte(char c) { out_.put(c); }
  template <class T>
  void raw(T v) {
    out_.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  std::ostream& out_;
};

// cProfile's key for a routine: a Python function is (file, first line, its name); anything
// else is ('~', 0, name), as cProfile keys built-ins, which pstats prints by name alone. Other
// than Python's, names get their kind ("cblas_sgemm [blas]"), as sonde report shows them.
using Key = std::tuple<std::string, std::int64_t, std::string>;

Key key_of(const std::string& name, const std::string& kind, const std::string& file,
           std::int64_t line) {
  if (kind == kinds::kPython && !file.empty()) {
    // sonde names a function "base.py:LINE(function)".
    std::string base = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
    std::string prefix = fmt::format("{}:{}(", base, line);
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        name.back() == ')')
      return {file, line, name.substr(prefix.size(), name.size() - prefix.size() - 1)};
    return {file, line, name};
  }
  if (kind == kinds::kBuiltin || kind == kinds::kRoot) return {"~", 0, name};
  return {"~", 0, fmt::format("{} [{}]", name, kind)};
}

struct Figures {
  std::int64_t primitive = 0, calls = 0;
  double tottime = 0, cumtime = 0;
  void add(std::int64_t p, std::int64_t c, double excl, double incl) {
    primitive += p;
    calls += c;
    tottime += excl;
    cumtime += incl;
  }
};

void write_figures(Marshal& m, const Figures& f, bool calls_first = false) {
  m.integer(calls_first ? f.calls : f.primitive);
  m.integer(calls_first ? f.primitive : f.calls);
  m.real(f.tottime);
  m.real(f.cumtime);
}

void write_key(Marshal& m, const Key& k) {
  m.tuple(3);
  m.text(std::get<0>(k));
  m.integer(std::get<1>(k));
  m.text(std::get<2>(k));
}

}  // namespace

void write_pstats(const ProfileFile& file, std::ostream& out) {
  std::map<std::int64_t, Key> keys;
  {
    auto st = file.prepare("SELECT routine_id, name, kind, file, line FROM routines");
    while (st.step())
      keys.emplace(st.int64(0), key_of(st.text(1), st.text(2), st.text(3), st.int64(4)));
  }
  struct Entry {
    Figures total;
    std::map<Key, Figures> callers;
  };
  // Two routines of one key (a region and a function of one name) are one entry, as cProfile
  // would have seen one function.
  std::map<Key, Entry> entries;
  auto st = file.prepare(
      "SELECT e.caller_id, e.routine_id, e.primitive_calls, e.calls, e.excl_s, e.incl_s, "
      "r.kind = 'root' FROM routine_edges e JOIN routines r ON r.routine_id = e.caller_id");
  while (st.step()) {
    auto caller = keys.find(st.int64(0));
    auto callee = keys.find(st.int64(1));
    if (caller == keys.end() || callee == keys.end()) continue;
    Entry& e = entries[callee->second];
    e.total.add(st.int64(2), st.int64(3), st.real(4), st.real(5));
    // A thread's top-level calls have no caller in cProfile's terms.
    if (st.int64(6) == 0)
      e.callers[caller->second].add(st.int64(2), st.int64(3), st.real(4), st.real(5));
  }
  Marshal m(out);
  m.dict_begin();
  for (const auto& [key, e] : entries) {
    write_key(m, key);
    m.tuple(5);
    write_figures(m, e.total);
    m.dict_begin();
    for (const auto& [caller, f] : e.callers) {
      write_key(m, caller);
      m.tuple(4);
      write_figures(m, f, true);
    }
    m.dict_end();
  }
  m.dict_end();
}

}  // namespace sonde::analyzers
