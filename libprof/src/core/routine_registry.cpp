#include "core/routine_registry.hpp"

#include "core/signal_block.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde {

RoutineRegistry::RoutineRegistry() { intern({"<thread>", kinds::kRoot, ""}); }

RoutineId RoutineRegistry::intern(const RoutineSpec& spec) {
  std::string key;
  for (const char* part : {spec.name, spec.kind, spec.library, spec.file}) {
    key += part ? part : "";
    key += '\x1f';
  }
  key += std::to_string(spec.line);
  AsyncSignalBlock no_signals;  // see signals.hpp: a flush on SIGTERM needs this lock
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  RoutineId id = RoutineId(routines_.size());
  routines_.push_back(Routine{spec.name ? spec.name : "", spec.kind ? spec.kind : "",
                              spec.library ? spec.library : "", spec.file ? spec.file : "",
                              spec.line, spec.dtype, spec.role ? spec.role : ""});
  index_.emplace(std::move(key), id);
  return id;
}

std::vector<const Routine*> RoutineRegistry::since(size_t from) {
  std::lock_guard lock(mu_);
  std::vector<const Routine*> out;
  if (from >= routines_.size()) return out;
  out.reserve(routines_.size() - from);
  for (size_t i = from; i < routines_.size(); ++i) out.push_back(&routines_[i]);
  return out;
}

std::vector<bool> RoutineRegistry::measured_kinds() {
  std::lock_guard lock(mu_);
  std::vector<bool> out(routines_.size());
  for (size_t i = 0; i < routines_.size(); ++i) {
    out[i] = routines_[i].kind != kinds::kRoot && routines_[i].kind != kinds::kRegion;
  }
  return out;
}

}  // namespace sonde
