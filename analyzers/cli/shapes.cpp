// sonde shapes: GEMM-like calls per shape and call site, with GFLOP/s and % of peak; with
// --operators, PyTorch operators per input signature (`--record-shapes`).
#include "render/shapes.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "metrics/metrics.hpp"
#include "render/op_shapes.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::size_t top = 0;
  std::optional<std::int64_t> rank;
  bool operators = false;
};

int operator_shapes(const ProfileFile& file, const Options& a, Format format) {
  std::vector<OpShapeRow> rows = compute_op_shapes(file, a.top);
  if (rows.empty() && format == Format::kText) {
    std::cout << "no operator input shapes recorded (profile a PyTorch program with "
                 "`python3 -m sonde --record-shapes`)\n";
    return 0;
  }
  print_table(op_shapes_table(rows), format, "shapes", a.file);
  return 0;
}

int shapes(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = open_for_report(a.file, a.rank, format);
  if (a.operators) return operator_shapes(file, a, format);
  std::vector<ShapeRow> rows = compute_shapes(file, a.top);
  for (const std::string& w : peaks_exceeded(file))
    (format == Format::kText ? std::cout : std::cerr)
        << (format == Format::kText ? "warning: " : "sonde shapes: warning: ") << w << '\n';
  std::int64_t signatures = format == Format::kText ? count_op_shapes(file) : 0;
  // FLOP-counted calls without a shape (oneDNN's bf16 and s8: shapes are f32's only) are GEMMs
  // all the same: a red-team bf16 run's 480 dnnl:matmul calls, 34.6 GFLOP, read "no GEMM-like
  // calls recorded", and beside f32 GEMMs a mixed run's bf16 ones were left unsaid.
  std::string unshaped;
  if (format == Format::kText) {
    auto st = file.prepare(
        "SELECT SUM(n.calls), SUM(n.flops), GROUP_CONCAT(DISTINCT r.name) "
        "FROM counted_nodes n JOIN routines r USING (routine_id) "
        "WHERE r.kind = 'onednn' AND n.flops > 0 "
        "AND NOT EXISTS (SELECT 1 FROM shapes s WHERE s.node_id = n.node_id)");
    if (st.step() && !st.is_null(0) && st.int64(0) > 0) {
      std::string names = st.text(2);
      for (std::size_t at = names.find(','); at != std::string::npos; at = names.find(',', at + 2))
        names.replace(at, 1, ", ");
      unshaped = fmt::format(
          "{} FLOP-counted calls of {} ({:.1f} GFLOP) ran in a type sonde keeps FLOPs of but no "
          "shape (oneDNN's shapes are f32's only: docs/cost-models.md); sonde report and sonde "
          "metrics show them",
          st.int64(0), names, st.real(1) / 1e9);
    }
  }
  if (rows.empty() && format == Format::kText) {
    std::cout << (unshaped.empty() ? "no GEMM-like calls recorded\n"
                                   : "no GEMM shapes recorded: " + unshaped + "\n");
  } else {
    print_table(shapes_table(rows), format, "shapes", a.file);
    if (!unshaped.empty()) std::cout << "also " << unshaped << "\n";
  }
  if (signatures > 0)
    std::cout << signatures << " operator input signatures recorded: sonde shapes --operators\n";
  return 0;
}
}  // namespace

Command add_shapes(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("shapes", "GEMM-like calls per shape and call site, GFLOP/s");
  add_file(cmd, a->file);
  cmd->add_option("-n,--top", a->top, "Rows to show, by time (0: all)")
      ->check(count_check())
      ->capture_default_str();
  cmd->add_flag("--operators", a->operators,
                "PyTorch operators per input shapes, dtypes and caller instead (recorded by "
                "python3 -m sonde --record-shapes), as torch.profiler's "
                "key_averages(group_by_input_shape=True)");
  add_rank(cmd, a->rank);
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return shapes(*a); }};
}

}  // namespace sonde::cli
