#include "render/shapes.hpp"

namespace sonde::analyzers {

std::vector<ShapeRow> compute_shapes(const ProfileFile& file, std::size_t top) {
  auto st = file.prepare(
      "SELECT routine, call_site, m, n, k, dtype, calls, time_s, gflops, pct_peak, routine_id "
      "FROM gemm_shapes ORDER BY time_s DESC, routine, call_site, m, n, k, routine_id "
      "LIMIT CASE WHEN ?1 > 0 THEN ?1 ELSE -1 END");
  st.bind(1, static_cast<std::int64_t>(top));
  std::vector<ShapeRow> rows;
  while (st.step()) {
    ShapeRow r;
    r.routine = st.text(0);
    r.call_site = st.text(1);
    r.m = st.int64(2);
    r.n = st.int64(3);
    r.k = st.int64(4);
    r.dtype = st.text(5);
    r.calls = st.int64(6);
    r.time_s = st.real(7);
    if (!st.is_null(8)) r.gflops = st.real(8);
    if (!st.is_null(9)) r.pct_peak = st.real(9);
    r.routine_id = st.int64(10);
    rows.push_back(std::move(r));
  }
  return rows;
}

Table shapes_table(const std::vector<ShapeRow>& rows) {
  Table t;
  t.columns = {{"routine", "routine"},
               {"call_site", "call_site"},
               {"m", "m"},
               {"n", "n"},
               {"k", "k"},
               {"dtype", "dtype"},
               {"calls", "calls"},
               {"time_s", "time_s", 6},
               {"gflops", "gflops", 3},
               {"pct_peak", "pct_peak", 1}};
  auto opt = [](const std::optional<double>& v) -> Cell {
    if (v) return *v;
    return std::monostate{};
  };
  for (const auto& r : rows)
    t.rows.push_back({r.routine, r.call_site, r.m, r.n, r.k, r.dtype, r.calls, r.time_s,
                      opt(r.gflops), opt(r.pct_peak)});
  return t;
}

}  // namespace sonde::analyzers
