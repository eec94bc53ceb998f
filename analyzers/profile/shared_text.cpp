#include "profile/shared_text.hpp"

#include <mutex>
#include <unordered_set>

namespace sonde::analyzers {
namespace {

struct Hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Never freed: the texts of the routines a process read (a viewer serving files reads the same
// ones again and finds them here).
struct Pool {
  std::mutex lock;
  std::unordered_set<std::string, Hash, std::equal_to<>> texts;
};
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

}  // namespace

SharedText::SharedText(std::string_view text) {
  if (text.empty()) {
    text_ = &none();
    return;
  }
  Pool& p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  auto it = p.texts.find(text);
  if (it == p.texts.end()) it = p.texts.emplace(text).first;
  text_ = &*it;
}

const std::string& SharedText::none() {
  static const std::string* e = new std::string;
  return *e;
}

}  // namespace sonde::analyzers
