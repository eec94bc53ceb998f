#include "render/op_shapes.hpp"

namespace sonde::analyzers {

std::vector<OpShapeRow> compute_op_shapes(const ProfileFile& file, std::size_t top) {
  std::vector<OpShapeRow> rows;
  if (!file.has_table("operator_shapes")) return rows;
  auto st = file.prepare(
      "SELECT operator, input_shapes, input_dtypes, calls, time_s, mean_us, caller "
      "FROM operator_shapes "
      "ORDER BY time_s DESC, operator, input_shapes, input_dtypes, caller "
      "LIMIT CASE WHEN ?1 > 0 THEN ?1 ELSE -1 END");
  st.bind(1, static_cast<std::int64_t>(top));
  while (st.step()) {
    OpShapeRow r;
    r.op = st.text(0);
    r.input_shapes = st.text(1);
    r.input_dtypes = st.text(2);
    r.calls = st.int64(3);
    r.time_s = st.real(4);
    if (!st.is_null(5)) r.mean_us = st.real(5);
    r.caller = st.text(6);  // a Python frame's name says its file and line already
    if (auto flops = operator_call_flops(r.op, r.input_shapes, r.input_dtypes))
      r.flops = OperatorFlops{*flops * double(r.calls), r.calls, r.time_s};
    rows.push_back(std::move(r));
  }
  return rows;
}

std::int64_t count_op_shapes(const ProfileFile& file) {
  if (!file.has_table("op_shapes")) return 0;
  auto st = file.prepare(
      "SELECT COUNT(*) FROM (SELECT DISTINCT input_shapes, input_dtypes FROM op_shapes)");
  return st.step() ? st.int64(0) : 0;
}

Table op_shapes_table(const std::vector<OpShapeRow>& rows) {
  Table t;
  t.columns = {
      {"operator", "operator"}, {"input_shapes", "input_shapes"}, {"input_dtypes", "input_dtypes"},
      {"calls", "calls"},       {"time_s", "time_s", 6},          {"mean_us", "mean_us", 1},
      {"gflop", "gflop", 4},    {"gflops", "gflops", 3},          {"caller", "caller"}};
  for (const auto& r : rows) {
    Cell mean = std::monostate{}, gflop = std::monostate{}, gflops = std::monostate{};
    if (r.mean_us) mean = *r.mean_us;
    if (r.flops) gflop = r.flops->flops / 1e9;
    if (auto rate = r.flops ? r.flops->gflops() : std::nullopt) gflops = *rate;
    t.rows.push_back(
        {r.op, r.input_shapes, r.input_dtypes, r.calls, r.time_s, mean, gflop, gflops, r.caller});
  }
  return t;
}

}  // namespace sonde::analyzers
