#include "core/op_signatures.hpp"

namespace sonde {

uint32_t OpSignatures::intern(std::string_view shapes, std::string_view dtypes) {
  std::string key;
  key.reserve(shapes.size() + dtypes.size() + 1);
  key.append(shapes).push_back('\n');  // neither part holds a newline
  key.append(dtypes);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (entries_.size() >= kMax) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  entries_.push_back(OpSignature{std::string(shapes), std::string(dtypes)});
  uint32_t id = uint32_t(entries_.size());
  index_.emplace(std::move(key), id);
  return id;
}

const OpSignature* OpSignatures::get(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  return id >= 1 && id <= entries_.size() ? &entries_[id - 1] : nullptr;
}

OpSignatures& op_signatures() {
  static auto* table = new OpSignatures;
  return *table;
}

}  // namespace sonde
