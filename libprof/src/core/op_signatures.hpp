// Operators' input signatures (`--record-shapes`: the shapes and dtypes of an operator's inputs,
// as torch.profiler's record_shapes gives them), interned once per process and named by small
// ids in the threads' records. Only the opt-in path interns, so a mutex is fine here.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sonde {

struct OpSignature {
  std::string shapes;  // "[[64, 1, 28, 28], [32, 1, 3, 3], [32]]"
  std::string dtypes;  // "float, float, float"
};

class OpSignatures {
 public:
  // Distinct signatures a process keeps; later ones are counted in refused() and not recorded
  // (a program feeding ever new shapes would otherwise grow the table without bound).
  static constexpr uint32_t kMax = 65536;

  // The id (from 1) of this signature; 0 once kMax are held.
  uint32_t intern(std::string_view shapes, std::string_view dtypes);
  // Valid for the process's life: entries never move (a deque's elements stay where they are).
  const OpSignature* get(uint32_t id);
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::deque<OpSignature> entries_;
  std::unordered_map<std::string, uint32_t> index_;
  std::atomic<uint64_t> refused_{0};
};

// The process's table: never destroyed, since the exit flush reads it after static destructors
// may have begun.
OpSignatures& op_signatures();

}  // namespace sonde
