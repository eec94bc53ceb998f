// Command-line options of mlp_train.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mlp {

struct Options {
  long steps = 300;
  std::optional<long> epochs;  // when set, overrides steps: epochs * (train size / batch)
  int batch = 100;
  int hidden = 1000;
  std::uint64_t seed = 1;
  long eval_every = 50;  // 0: only the final line
  std::optional<int> threads;
  std::string mnist_dir;  // empty: synthetic data
};

// Parses argv. On --help prints usage to stdout and exits 0; on a bad option prints one line to
// stderr and exits 2, so callers (and tests) see a plain usage error rather than an exception.
Options parse_options(int argc, char** argv);

}  // namespace mlp
