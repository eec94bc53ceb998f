// Minibatches without replacement, shared by the C++ examples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "data.hpp"
#include "rng.hpp"

namespace mlp {

// Draws minibatches without replacement, reshuffling (as Chainer's SerialIterator does) when
// fewer than a batch of samples remain; the leftover samples are skipped for that pass.
class BatchSampler {
 public:
  BatchSampler(long size, std::uint64_t seed) : order_(static_cast<size_t>(size)), rng_(seed) {
    std::iota(order_.begin(), order_.end(), 0L);
    shuffle();
  }

  // Copies the next batch's images and labels into x and y.
  void next(const Dataset& set, int batch, float* x, std::int32_t* y) {
    if (pos_ + batch > order_.size()) shuffle();
    for (int r = 0; r < batch; ++r) {
      const long i = order_[pos_++];
      std::copy_n(set.image(i), kImageSize, x + static_cast<long>(r) * kImageSize);
      y[r] = set.labels[static_cast<size_t>(i)];
    }
  }

 private:
  void shuffle() {
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng_.below(i)]);
    pos_ = 0;
  }

  std::vector<long> order_;
  Rng rng_;
  size_t pos_ = 0;
};

}  // namespace mlp
