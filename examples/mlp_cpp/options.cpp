#include "options.hpp"

#include <string_view>

#include "arg_parser.hpp"

namespace mlp {
namespace {

constexpr const char* kUsage =
    "usage: mlp_train [options]\n"
    "Trains the Chainer MNIST MLP (784-1000-1000-10, ReLU, softmax cross-entropy, Adam) in "
    "float32\n"
    "with every matrix product in CBLAS and the Adam update in plain loops.\n"
    "\n"
    "  --steps N        training steps (default 300)\n"
    "  --epochs N       train N passes over the training set instead of --steps\n"
    "  --batch N        minibatch size (default 100)\n"
    "  --hidden N       width of both hidden layers (default 1000)\n"
    "  --seed S         seed for data, weights and shuffling (default 1)\n"
    "  --eval-every N   print training loss/accuracy every N steps (default 50, 0: never)\n"
    "  --threads N      call openblas_set_num_threads(N)\n"
    "  --mnist-dir DIR  train on MNIST idx files in DIR instead of synthetic data\n"
    "  --help           print this text\n";

}  // namespace

Options parse_options(int argc, char** argv) {
  Options opt;
  examples::ArgParser args("mlp_train", kUsage, argc, argv);
  constexpr long kMaxLong = 1L << 40;
  while (args.next()) {
    const std::string_view arg = args.name();
    if (arg == "--steps") {
      opt.steps = args.number<long>(1, kMaxLong);
    } else if (arg == "--epochs") {
      opt.epochs = args.number<long>(1, 1L << 20);
    } else if (arg == "--batch") {
      opt.batch = args.number<int>(1, 1 << 16);
    } else if (arg == "--hidden") {
      opt.hidden = args.number<int>(1, 1 << 14);
    } else if (arg == "--seed") {
      opt.seed = args.number<std::uint64_t>(0, ~std::uint64_t{0});
    } else if (arg == "--eval-every") {
      opt.eval_every = args.number<long>(0, kMaxLong);
    } else if (arg == "--threads") {
      opt.threads = args.number<int>(1, 1024);
    } else if (arg == "--mnist-dir") {
      opt.mnist_dir = args.nonempty_text();
    } else {
      args.unknown();
    }
  }
  return opt;
}

}  // namespace mlp
