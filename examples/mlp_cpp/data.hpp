// Training data: a learnable synthetic stand-in for MNIST, or the real MNIST idx files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlp {

inline constexpr int kImageSize = 28 * 28;
inline constexpr int kClasses = 10;

// Images as rows of kImageSize floats in [0, 1], one label in [0, kClasses) per row.
struct Dataset {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  long size() const { return static_cast<long>(labels.size()); }
  const float* image(long i) const { return images.data() + i * kImageSize; }
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// A bad or missing data file; main reports it on one line and exits 2.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Ten prototype images plus per-sample mixing and noise, all determined by `seed`. Sized so that
// generating it takes a fraction of a second yet an epoch is still 100 steps at batch 100.
inline constexpr long kSyntheticTrain = 10000;
inline constexpr long kSyntheticTest = 2000;
TrainTest make_synthetic(std::uint64_t seed);

// Reads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte from `dir`; throws DataError naming the file on any inconsistency.
TrainTest load_mnist(const std::string& dir);

// What an example's main needs: MNIST from `mnist_dir`, else the synthetic set; a bad file or a
// batch larger than the training set is reported as "<program>: ..." with exit status 2.
TrainTest load_for_training(const char* program, const std::string& mnist_dir, std::uint64_t seed,
                            int batch);

}  // namespace mlp
