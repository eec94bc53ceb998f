// A small seeded generator written out by hand, so data, initial weights and shuffles are the same
// on every standard library (std::normal_distribution is not specified bit-for-bit).
#pragma once

#include <cmath>
#include <cstdint>

namespace mlp {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  // splitmix64: tiny, fast and well mixed, which is all a synthetic workload needs.
  std::uint64_t next_u64() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n); the modulo bias is irrelevant for n far below 2^64.
  std::uint64_t below(std::uint64_t n) { return next_u64() % n; }

  // Standard normal by Box-Muller (one value per call keeps the state easy to reason about).
  double normal() {
    const double u1 = 1.0 - uniform();  // in (0, 1], so the log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace mlp
