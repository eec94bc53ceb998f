// Command-line options of cnn_cudnn.
#pragma once

#include <cstdint>
#include <string>

namespace cnn {

struct Options {
  long steps = 200;
  int batch = 64;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  long eval_every = 50;   // 0: only the final line
  std::string mnist_dir;  // empty: synthetic data
};

// Parses argv; --help prints usage and exits 0, a bad option prints one line and exits 2.
Options parse_options(int argc, char** argv);

}  // namespace cnn
