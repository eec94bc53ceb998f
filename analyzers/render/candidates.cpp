// `sonde candidates`' outputs: the text list, the JSON array and the table (CSV), each
// candidate with its estimate and the bound it is held to.
#include "render/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/table_format.hpp"

namespace sonde::analyzers {

namespace {
std::string cell_text(const Cell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&cell)) return fmt::format("{:.4g}", *d);
  if (const auto* s = std::get_if<std::string>(&cell)) return visible(*s);
  return "-";
}
}  // namespace

std::string render_candidates_text(const std::vector<Candidate>& cs, std::size_t top) {
  if (cs.empty()) return "no tuning candidates: no rule fired\n";
  std::size_t n = top == 0 ? cs.size() : std::min(top, cs.size());
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = cs[i];
    out += fmt::format("{}. [{}] {}  (est. gain {:.3f} s)\n", i + 1, c.rule, visible(c.location),
                       c.est_gain_s);
    out += fmt::format("   {}\n", visible(c.summary));
    std::string ev;
    for (const auto& [k, v] : c.evidence)
      ev += fmt::format("{}{}={}", ev.empty() ? "" : ", ", k, cell_text(v));
    out += fmt::format("   evidence: {}\n", ev);
    out += fmt::format("   gain bound: {}\n", visible(c.gain_bound));
    out += fmt::format("   advice: {}\n", visible(c.advice));
    if (const auto& m = c.measured)
      out += fmt::format(
          "   measured: estimated {:.3f} s, measured {:.3f} s by sonde tune (stage {}, "
          "{} time): {}\n",
          m->estimated_s, m->measured_s, m->stage, m->judged_on == "cpu" ? "CPU" : "wall",
          m->verdict);
  }
  if (n < cs.size()) out += fmt::format("({} more candidates; --top 0 shows all)\n", cs.size() - n);
  return out;
}

Table candidates_table(const std::vector<Candidate>& cs, std::size_t top) {
  Table t;
  t.columns = {{"rank", "rank", 0},         {"rule", "rule", 0},
               {"location", "location", 0}, {"est. gain s", "est_gain_s", 3},
               {"summary", "summary", 0},   {"advice", "advice", 0},
               {"evidence", "evidence", 0}, {"gain bound", "gain_bound", 0}};
  Json all = render_candidates_json(cs, top);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Candidate& c = cs[i];
    t.rows.push_back({static_cast<std::int64_t>(i + 1), c.rule, c.location, c.est_gain_s, c.summary,
                      c.advice, dump_json(all[i]["evidence"], -1), c.gain_bound});
  }
  return t;
}

Json render_candidates_json(const std::vector<Candidate>& cs, std::size_t top) {
  std::size_t n = top == 0 ? cs.size() : std::min(top, cs.size());
  Json out = Json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = cs[i];
    Json ev = Json::object();
    for (const auto& [k, v] : c.evidence) ev[k] = cell_to_json(v);
    out.push_back(Json{{"rule", c.rule},
                       {"location", c.location},
                       {"routine_id", c.routine_id ? Json(*c.routine_id) : Json(nullptr)},
                       {"summary", c.summary},
                       {"evidence", std::move(ev)},
                       {"advice", c.advice},
                       {"est_gain_s", c.est_gain_s},
                       {"gain_bound", c.gain_bound}});
    if (const auto& m = c.measured)
      out.back()["measured"] = Json{{"stage", m->stage},
                                    {"judged_on", m->judged_on},
                                    {"estimated_s", m->estimated_s},
                                    {"measured_s", m->measured_s},
                                    {"verdict", m->verdict},
                                    {"source", m->source}};
  }
  return out;
}

}  // namespace sonde::analyzers
