#include "data.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "rng.hpp"

namespace mlp {
namespace {

// Sample = mix of its class prototype with a distractor prototype, plus pixel noise. The
// distractor and noise keep the task from being solved in a handful of steps, and near-even mixes
// leave some samples ambiguous, so accuracy lands in MNIST's range (about 94 % after 300 steps)
// rather than at 100 %.
constexpr double kMinOwnWeight = 0.5;
constexpr double kNoise = 0.5;

Dataset sample_set(const std::vector<float>& prototypes, long n, Rng& rng) {
  Dataset set;
  set.images.resize(static_cast<size_t>(n) * kImageSize);
  set.labels.resize(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) {
    const auto label = static_cast<std::int32_t>(rng.below(kClasses));
    const auto other = static_cast<std::int32_t>((label + 1 + rng.below(kClasses - 1)) % kClasses);
    const double own = kMinOwnWeight + (1.0 - kMinOwnWeight) * rng.uniform();
    const float* p = prototypes.data() + static_cast<size_t>(label) * kImageSize;
    const float* q = prototypes.data() + static_cast<size_t>(other) * kImageSize;
    float* x = set.images.data() + static_cast<size_t>(i) * kImageSize;
    for (int k = 0; k < kImageSize; ++k) {
      const double v = own * p[k] + (1.0 - own) * q[k] + kNoise * rng.normal();
      x[k] = static_cast<float>(std::clamp(v, 0.0, 1.0));
    }
    set.labels[static_cast<size_t>(i)] = label;
  }
  return set;
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t read_be32(const std::vector<unsigned char>& bytes, size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

// idx3: magic 0x00000803, count, rows, cols, then count*rows*cols unsigned bytes.
std::vector<float> read_idx_images(const std::string& path) {
  const auto bytes = read_file(path);
  if (bytes.size() < 16) throw DataError(path + ": too short for an idx3 header");
  if (read_be32(bytes, 0) != 0x803) throw DataError(path + ": bad magic (not an idx3 image file)");
  const std::uint32_t count = read_be32(bytes, 4);
  const std::uint32_t rows = read_be32(bytes, 8);
  const std::uint32_t cols = read_be32(bytes, 12);
  if (rows != 28 || cols != 28) {
    throw DataError(path + ": images are " + std::to_string(rows) + "x" + std::to_string(cols) +
                    ", expected 28x28");
  }
  if (count == 0 || bytes.size() != 16 + std::uint64_t{count} * kImageSize) {
    throw DataError(path + ": size does not match header count " + std::to_string(count));
  }
  std::vector<float> images(static_cast<size_t>(count) * kImageSize);
  // Chainer's get_mnist scales pixels to [0, 1] the same way.
  std::transform(bytes.begin() + 16, bytes.end(), images.begin(),
                 [](unsigned char b) { return static_cast<float>(b) / 255.0f; });
  return images;
}

// idx1: magic 0x00000801, count, then count unsigned bytes.
std::vector<std::int32_t> read_idx_labels(const std::string& path) {
  const auto bytes = read_file(path);
  if (bytes.size() < 8) throw DataError(path + ": too short for an idx1 header");
  if (read_be32(bytes, 0) != 0x801) throw DataError(path + ": bad magic (not an idx1 label file)");
  const std::uint32_t count = read_be32(bytes, 4);
  if (count == 0 || bytes.size() != 8 + std::uint64_t{count}) {
    throw DataError(path + ": size does not match header count " + std::to_string(count));
  }
  std::vector<std::int32_t> labels(bytes.begin() + 8, bytes.end());
  for (const auto label : labels) {
    if (label >= kClasses) throw DataError(path + ": label out of range 0..9");
  }
  return labels;
}

Dataset load_pair(const std::string& dir, const std::string& prefix) {
  Dataset set;
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte";
  set.images = read_idx_images(images_path);
  set.labels = read_idx_labels(dir + "/" + prefix + "-labels-idx1-ubyte");
  if (set.images.size() != set.labels.size() * kImageSize) {
    throw DataError(images_path + ": image count differs from its label file");
  }
  return set;
}

}  // namespace

TrainTest make_synthetic(std::uint64_t seed) {
  // A separate stream for the data keeps it identical whatever the weights' stream draws.
  Rng rng(seed ^ 0xD1B54A32D192ED03ull);
  std::vector<float> prototypes(static_cast<size_t>(kClasses) * kImageSize);
  for (auto& p : prototypes) p = static_cast<float>(rng.uniform());
  TrainTest data;
  data.train = sample_set(prototypes, kSyntheticTrain, rng);
  data.test = sample_set(prototypes, kSyntheticTest, rng);
  return data;
}

TrainTest load_mnist(const std::string& dir) {
  return {load_pair(dir, "train"), load_pair(dir, "t10k")};
}

TrainTest load_for_training(const char* program, const std::string& mnist_dir, std::uint64_t seed,
                            int batch) {
  TrainTest data;
  try {
    data = mnist_dir.empty() ? make_synthetic(seed) : load_mnist(mnist_dir);
  } catch (const DataError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    std::exit(2);
  }
  if (batch > data.train.size()) {
    std::fprintf(stderr, "%s: --batch %d exceeds the %ld training samples\n", program, batch,
                 data.train.size());
    std::exit(2);
  }
  return data;
}

}  // namespace mlp
