#include "metrics/operator_flops.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sonde::analyzers {

namespace {

using Dims = std::vector<std::int64_t>;

bool floating(const std::string& dtype) {
  return dtype == "float" || dtype == "double" || dtype == "c10::Half" || dtype == "c10::BFloat16";
}

double product(const Dims& d, std::size_t from, std::size_t to) {
  double p = 1;
  for (std::size_t i = from; i < to; ++i) p *= double(d[i]);
  return p;
}

// Leading (batch) dimensions of two operands broadcast together; nullopt where they do not.
std::optional<double> broadcast_batch(const Dims& a, std::size_t na, const Dims& b,
                                      std::size_t nb) {
  double batch = 1;
  for (std::size_t i = 0; i < std::max(na, nb); ++i) {
    std::int64_t x = i < na ? a[na - 1 - i] : 1, y = i < nb ? b[nb - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    batch *= double(std::max(x, y));
  }
  return batch;
}

// torch.matmul's cases: vector or matrix on either side, batches broadcast.
std::optional<double> matmul_flops(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  if (a.size() == 1 && b.size() == 1) {
    if (a[0] != b[0]) return std::nullopt;
    return 2.0 * double(a[0]);
  }
  if (b.size() == 1) {  // (..., M, K) · (K)
    if (a.back() != b[0]) return std::nullopt;
    return 2.0 * product(a, 0, a.size());
  }
  std::int64_t k = b[b.size() - 2], n = b.back();
  if (a.size() == 1) {  // (K) · (..., K, N)
    if (a[0] != k) return std::nullopt;
    return 2.0 * product(b, 0, b.size() - 2) * double(k) * double(n);
  }
  if (a.back() != k) return std::nullopt;
  std::int64_t m = a[a.size() - 2];
  auto batch = broadcast_batch(a, a.size() - 2, b, b.size() - 2);
  if (!batch) return std::nullopt;
  return 2.0 * *batch * double(m) * double(k) * double(n);
}

}  // namespace

std::optional<double> operator_call_flops(std::string_view op, std::string_view input_shapes,
                                          std::string_view input_dtypes) {
  std::vector<Dims> shapes;
  std::vector<std::string> dtypes;
  try {
    auto s = nlohmann::json::parse(input_shapes);
    for (const auto& input : s) {
      Dims d;
      for (const auto& x : input) d.push_back(x.get<std::int64_t>());
      shapes.push_back(std::move(d));
    }
    // The dtypes as operator_shapes holds them, names joined by ", " ("float, , Int": an empty
    // name for None), one per input.
    for (std::string_view t = input_dtypes;;) {
      std::size_t comma = t.find(", ");
      dtypes.emplace_back(t.substr(0, comma));
      if (comma == std::string_view::npos) break;
      t.remove_prefix(comma + 2);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // The operands multiplied, by position: the first two, or the second and third after an
  // added input (addmm's, baddbmm's, addmv's self).
  bool added =
      op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::addbmm" || op == "aten::addmv";
  std::size_t i = added ? 1 : 0;
  if (shapes.size() < i + 2 || dtypes.size() < i + 2) return std::nullopt;
  if (!floating(dtypes[i]) || !floating(dtypes[i + 1])) return std::nullopt;
  const Dims& a = shapes[i];
  const Dims& b = shapes[i + 1];
  if (op == "aten::mm" || op == "aten::addmm") {
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) return std::nullopt;
    return 2.0 * double(a[0]) * double(a[1]) * double(b[1]);
  }
  if (op == "aten::bmm" || op == "aten::baddbmm" || op == "aten::addbmm") {
    if (a.size() != 3 || b.size() != 3 || a[0] != b[0] || a[2] != b[1]) return std::nullopt;
    return 2.0 * double(a[0]) * double(a[1]) * double(a[2]) * double(b[2]);
  }
  if (op == "aten::mv" || op == "aten::addmv") {
    if (a.size() != 2 || b.size() != 1 || a[1] != b[0]) return std::nullopt;
    return 2.0 * double(a[0]) * double(a[1]);
  }
  if (op == "aten::linear") {  // input (..., K), weight (N, K)
    if (a.empty() || b.size() != 2 || a.back() != b[1]) return std::nullopt;
    return 2.0 * product(a, 0, a.size()) * double(b[0]);
  }
  if (op == "aten::matmul") return matmul_flops(a, b);
  return std::nullopt;
}

std::map<std::int64_t, OperatorFlops> load_operator_flops(const ProfileFile& file) {
  std::map<std::int64_t, OperatorFlops> out;
  if (!file.has_table("operator_shapes")) return out;
  auto st = file.prepare(
      "SELECT routine_id, operator, input_shapes, input_dtypes, calls, time_s "
      "FROM operator_shapes");
  while (st.step()) {
    auto flops = operator_call_flops(st.text(1), st.text(2), st.text(3));
    if (!flops) continue;
    OperatorFlops& o = out[st.int64(0)];
    o.flops += *flops * double(st.int64(4));
    o.calls += st.int64(4);
    o.time_s += st.real(5);
  }
  return out;
}

}  // namespace sonde::analyzers
