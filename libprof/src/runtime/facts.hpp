// run_info entries set from outside the library (the Python hook's torch.num_threads), kept
// for every flush of the process; a later value of a key replaces the earlier one.
#pragma once

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/signal_block.hpp"

namespace sonde {

class Facts {
 public:
  void set(const std::string& key, const std::string& value) {
    AsyncSignalBlock no_signals;  // a flush on a signal reads them too
    std::lock_guard lock(mu_);
    auto it = std::find_if(all_.begin(), all_.end(), [&](const auto& f) { return f.first == key; });
    if (it != all_.end())
      it->second = value;
    else
      all_.emplace_back(key, value);
  }
  void erase(const std::string& key) {
    AsyncSignalBlock no_signals;
    std::lock_guard lock(mu_);
    std::erase_if(all_, [&](const auto& f) { return f.first == key; });
  }
  bool has(const std::string& key) { return get(key).has_value(); }
  std::optional<std::string> get(const std::string& key) {
    std::lock_guard lock(mu_);
    for (const auto& [k, v] : all_)
      if (k == key) return v;
    return std::nullopt;
  }
  void append_to(std::vector<std::pair<std::string, std::string>>& info) {
    std::lock_guard lock(mu_);
    info.insert(info.end(), all_.begin(), all_.end());
  }
  std::mutex& mutex() { return mu_; }  // held across fork, as the runtime's other locks

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> all_;
};

}  // namespace sonde
