#include "options.hpp"

#include <string_view>

#include "arg_parser.hpp"

namespace cnn {
namespace {

constexpr const char* kUsage =
    "usage: cnn_train [options]\n"
    "Trains a small CNN on MNIST-shaped data on the GPU, every layer a cuDNN or cuBLAS call:\n"
    "conv 5x5x8 - ReLU - max-pool 2 - conv 5x5x16 - ReLU - max-pool 2 - fully connected 784-10 -\n"
    "softmax cross-entropy, SGD with momentum (cuBLAS scal/axpy).\n"
    "\n"
    "  --steps N        training steps (default 200)\n"
    "  --batch N        minibatch size (default 64)\n"
    "  --lr X           learning rate (default 0.05)\n"
    "  --momentum X     momentum (default 0.9)\n"
    "  --seed S         seed for data, weights and shuffling (default 1)\n"
    "  --eval-every N   print training loss/accuracy every N steps (default 50, 0: never)\n"
    "  --mnist-dir DIR  train on MNIST idx files in DIR instead of synthetic data\n"
    "  --help           print this text\n";

}  // namespace

Options parse_options(int argc, char** argv) {
  Options opt;
  examples::ArgParser args("cnn_train", kUsage, argc, argv);
  while (args.next()) {
    const std::string_view arg = args.name();
    if (arg == "--steps") {
      opt.steps = args.number<long>(1, 1L << 40);
    } else if (arg == "--batch") {
      opt.batch = args.number<int>(1, 1 << 14);
    } else if (arg == "--lr") {
      opt.lr = args.number<float>(0.0f, 10.0f);
    } else if (arg == "--momentum") {
      opt.momentum = args.number<float>(0.0f, 0.999f);
    } else if (arg == "--seed") {
      opt.seed = args.number<std::uint64_t>(0, ~std::uint64_t{0});
    } else if (arg == "--eval-every") {
      opt.eval_every = args.number<long>(0, 1L << 40);
    } else if (arg == "--mnist-dir") {
      opt.mnist_dir = args.nonempty_text();
    } else {
      args.unknown();
    }
  }
  return opt;
}

}  // namespace cnn
