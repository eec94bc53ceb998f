// The callgrind format (valgrind.org/docs/manual/cl-format.html), for KCachegrind, QCachegrind
// and callgrind_annotate: one event, nanoseconds. Each routine is a function whose self cost is
// its exclusive time, under a "file" that is its Python file, else its library, else its kind;
// each caller-callee pair of the routine_edges view is a call with its count and the callee's
// cumulative time over its primitive calls (so that a reader adding self and call costs gets
// each function's inclusive time once, recursion included).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "export/export.hpp"

namespace sonde::analyzers {

namespace {

struct Function {
  std::string file, name;
  std::int64_t line = 0;
  std::int64_t self_ns = 0;
  bool ran = false;  // called at least once: listed even where its own time rounds to 0 ns
  struct Call {
    std::int64_t callee = 0, calls = 0, incl_ns = 0;
  };
  std::vector<Call> calls;
};

// A name on one line: the format's lines end at a newline, and a name may hold anything.
std::string one_line(const std::string& text) { return visible(text); }

std::int64_t ns(double seconds) { return std::llround(seconds * 1e9); }

}  // namespace

void write_callgrind(const ProfileFile& file, std::ostream& out) {
  std::map<std::int64_t, Function> functions;
  {
    auto st = file.prepare("SELECT routine_id, name, kind, library, file, line FROM routines");
    while (st.step()) {
      Function& f = functions[st.int64(0)];
      f.name = one_line(st.text(1));
      std::string where = !st.text(4).empty() ? st.text(4) : st.text(3);
      f.file = one_line(!where.empty() ? where : "[" + st.text(2) + "]");
      f.line = st.int64(5);
    }
  }
  auto st = file.prepare(
      "SELECT e.caller_id, e.routine_id, e.calls, e.excl_s, e.incl_s, r.kind = 'root' "
      "FROM routine_edges e JOIN routines r ON r.routine_id = e.caller_id "
      "ORDER BY e.caller_id, e.routine_id");
  while (st.step()) {
    auto callee = functions.find(st.int64(1));
    if (callee == functions.end()) continue;
    callee->second.self_ns += ns(st.real(3));
    callee->second.ran |= st.int64(2) > 0;
    // A thread's top-level calls come from its root, which is no function here.
    if (st.int64(5) != 0) continue;
    auto caller = functions.find(st.int64(0));
    if (caller == functions.end()) continue;
    caller->second.calls.push_back({st.int64(1), st.int64(2), ns(st.real(4))});
  }
  std::int64_t total = 0;
  for (const auto& [id, f] : functions) total += f.self_ns;
  out << "# callgrind format\nversion: 1\ncreator: sonde\npositions: line\nevents: ns\n"
      << "summary: " << total << "\n";
  // Every file and function by the format's compressed names, "(id) name" the first time and
  // "(id)" after: written bare, a name that starts with "(7)" read as compressed name 7, and
  // callgrind_annotate merged a region named "(7)" into "(7) load_data" (a red-team find).
  std::map<std::string, std::int64_t> file_ids;
  std::map<std::int64_t, bool> named;
  auto file_ref = [&](const std::string& file) {
    auto [it, first] = file_ids.emplace(file, std::int64_t(file_ids.size()) + 1);
    return first ? fmt::format("({}) {}", it->second, file) : fmt::format("({})", it->second);
  };
  auto fn_ref = [&](std::int64_t id, const Function& f) {
    bool& done = named[id];
    std::string ref = done ? fmt::format("({})", id) : fmt::format("({}) {}", id, f.name);
    done = true;
    return ref;
  };
  for (const auto& [id, f] : functions) {
    // Never ran. Not its own time: a call whose exclusive time was 0 ns (a copy through the CUDA
    // stub, all of it its children's) came and went from the golden file under load.
    if (!f.ran && f.self_ns == 0 && f.calls.empty()) continue;
    out << fmt::format("\nfl={}\nfn={}\n{} {}\n", file_ref(f.file), fn_ref(id, f), f.line,
                       f.self_ns);
    for (const Function::Call& c : f.calls) {
      const Function& callee = functions.at(c.callee);
      out << fmt::format("cfl={}\ncfn={}\ncalls={} {}\n{} {}\n", file_ref(callee.file),
                         fn_ref(c.callee, callee), c.calls, callee.line, f.line, c.incl_ns);
    }
  }
}

}  // namespace sonde::analyzers
