// The loops the python-loop and matrix-vector rules judge, from calling-context trees built by
// hand: which calls are small, how a comprehension folds into its function, how much of the
// backward's autograd nodes a loop's operators left, and which loop is a training step.
#include "advice/op_loops.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sonde::analyzers {
namespace {

std::int64_t next_id = 1;

CallNode node(const std::string& name, const char* kind, const std::string& file,
              std::int64_t calls, std::int64_t incl_ns, std::vector<CallNode> children = {}) {
  static std::map<std::string, std::int64_t> ids;
  CallNode n;
  auto [it, added] = ids.try_emplace(name + "|" + kind, 0);
  if (added) it->second = next_id++;
  n.routine_id = it->second;
  n.name = SharedText(name);
  n.kind = SharedText(kind);
  n.file = SharedText(file);
  n.calls = calls;
  n.incl_ns = incl_ns;
  std::int64_t below = 0;
  for (const CallNode& c : children) below += c.incl_ns;
  n.excl_ns = incl_ns - below;
  n.children = std::move(children);
  return n;
}

constexpr const char* kUser = "/home/u/train.py";
constexpr const char* kTorchFile = "/usr/lib/python3/dist-packages/torch/_tensor.py";

CallNode op(const std::string& name, std::int64_t calls, std::int64_t ns) {
  return node(name, "torch", "", calls, ns);
}

std::vector<ThreadTree> forest(CallNode module) {
  ThreadTree t;
  t.root = node("<thread>", "root", "", 1, module.incl_ns, {});
  t.root.children.push_back(std::move(module));
  return {std::move(t)};
}

const OpLoop* find(const std::vector<OpLoop>& loops, const std::string& suffix) {
  for (const OpLoop& l : loops)
    if (l.site.ends_with(suffix)) return &l;
  return nullptr;
}

TEST(OpLoops, BackwardNodesNameTheirForwardOperator) {
  EXPECT_EQ(forward_op_of("SelectBackward0"), "select");
  EXPECT_EQ(forward_op_of("LogSoftmaxBackward0"), "log_softmax");
  EXPECT_EQ(forward_op_of("AddmmBackward12"), "addmm");
  EXPECT_EQ(forward_op_of("torch::autograd::AccumulateGrad"), "");
  EXPECT_EQ(forward_op_of("Backward0"), "");
}

// numpy's `@` calls the BLAS from C: a product per iteration of a Python loop is a small call
// (the loop's own time, 2 us a product, is the interpreter's), the same products made by one
// matmul over a stack are not (0.06 us of the caller's own time each: numpy's C loop).
TEST(OpLoops, BlasProductsAreSmallCallsOfAPythonLoopOnly) {
  CallNode loop = node("rot.py:8(rotate)", "python", kUser, 1, 2 * 40'000'000 + 4'000'000,
                       {node("cblas_dgemm", "blas", "", 20'000, 2'000'000),
                        node("cblas_dgemv", "blas", "", 20'000, 2'000'000)});
  CallNode stacked = node("rot.py:20(rotate_all)", "python", kUser, 1, 4'000'000 + 2'400'000,
                          {node("cblas_dgemm", "blas", "", 20'000, 2'000'000),
                           node("cblas_dgemv", "blas", "", 20'000, 2'000'000)});
  auto loops = op_loops(forest(node("rot.py:1(<module>)", "python", kUser, 1, 100'000'000,
                                    {std::move(loop), std::move(stacked)})));
  const OpLoop* l = find(loops, "(rotate)");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->small_calls, 40'000);
  EXPECT_TRUE(l->blas && l->numpy && !l->torch);
  EXPECT_EQ(l->own_ns, 80'000'000);
  EXPECT_EQ(find(loops, "(rotate_all)"), nullptr);
}

// A loss picking elements one at a time (10 calls, 500 selects and 100 subs each), called by
// a training loop whose iterations run backward (the selects' backward nodes beneath it, 3,000
// of them; 1,000 more selects elsewhere) and a 2 ms model forward that is no small call.
TEST(OpLoops, ALossLoopWithItsShareOfTheBackward) {
  CallNode loss = node("train.py:11(masked_loss)", "python", kUser, 10, 9'000'000,
                       {op("aten::select", 5'000, 4'000'000), op("aten::sub", 1'000, 1'000'000)});
  CallNode other = node("train.py:30(metrics)", "python", kUser, 10, 1'000'000,
                        {op("aten::select", 1'000, 800'000)});
  CallNode backward = node("_tensor.py:429(backward)", "python", kTorchFile, 10, 6'000'000,
                           {node("autograd::engine::evaluate_function: SelectBackward0", "torch",
                                 "", 3'000, 6'000'000)});
  CallNode forward = node("train.py:20(forward)", "python", kUser, 10, 20'000'000,
                          {op("aten::linear", 10, 20'000'000)});
  CallNode counting = op("aten::add", 20'000, 2'000'000);  // small calls of the loop itself
  auto loops = op_loops(forest(node("train.py:1(<module>)", "python", kUser, 1, 40'000'000,
                                    {std::move(loss), std::move(other), std::move(backward),
                                     std::move(forward), std::move(counting)})));
  const OpLoop* l = find(loops, "(masked_loss)");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->site_calls, 10);
  EXPECT_EQ(l->small_calls, 6'000);
  EXPECT_EQ(l->small_ns, 5'000'000);
  EXPECT_EQ(l->own_ns, 4'000'000);
  EXPECT_DOUBLE_EQ(l->max_per_call, 500);
  EXPECT_TRUE(l->torch);
  EXPECT_FALSE(l->step);
  EXPECT_EQ(l->caller, "train.py:1(<module>)");
  // 5,000 of the run's 6,000 selects: that share of the 6 ms of SelectBackward0.
  EXPECT_EQ(l->backward_ns, 5'000'000);
  EXPECT_EQ(l->backward_calls, 2'500);
  // The training loop: backward among its calls (10 steps). Its small calls made many times a
  // step (aten::add, 2,000 a step) are a loop inside its loop, and its figures are theirs
  // alone: the helpers it calls once a step (masked_loss, metrics) and its own time are not.
  const OpLoop* module = find(loops, "(<module>)");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(module->step);
  EXPECT_EQ(module->steps, 10);
  EXPECT_EQ(module->small_calls, 20'000);
  EXPECT_EQ(module->small_ns, 2'000'000);
  EXPECT_EQ(module->own_ns, 0);
  EXPECT_DOUBLE_EQ(module->max_per_call, 2'000);
  // The forward's one 2 ms operator a call is no small call: no loop there.
  EXPECT_EQ(find(loops, "(forward)"), nullptr);
}

// A GRUCell stepped 20,000 times from Python on a host whose other programs held the cores:
// 13-17 us a step quiet, 70-250 us beside them (CI's flaky test). Stretched by how much longer
// the run's calls took for want of a core, the steps are small calls again.
TEST(OpLoops, CallsStretchedByOtherProgramsAreSmallStill) {
  auto loops = [](double stretch) {
    CallNode run = node("gru.py:5(run)", "python", kUser, 1, 2'200'000'000,
                        {op("aten::gru_cell", 20'000, 2'000'000'000)});
    return op_loops(
        forest(node("gru.py:1(<module>)", "python", kUser, 1, 2'300'000'000, {std::move(run)})),
        stretch);
  };
  EXPECT_EQ(find(loops(1), "(run)"), nullptr);  // 100 us a call: no small call
  EXPECT_EQ(find(loops(1.5), "(run)"), nullptr);
  const OpLoop* l = nullptr;
  auto stretched = loops(4);  // its thread on a core a quarter of the time
  l = find(stretched, "(run)");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->small_calls, 20'000);
  EXPECT_TRUE(l->recurrent);
}

// clip_grad_norm_ per parameter (60 a step) beside a step's few calls (a loss's sub and mean):
// the inner loop is the clipping alone. The steps are counted by the backward, an entry;
// clip_grad_norm_ is update time but no step of its own (counted so, it set the steps at its
// own 60,000 calls, 1 a step, and no loop was found).
TEST(OpLoops, ClippingPerParameterIsALoopInsideTheSteps) {
  auto loops = op_loops(forest(
      node("train.py:5(train)", "python", kUser, 1, 40'000'000,
           {node("_tensor.py:429(backward)", "python", kTorchFile, 1'000, 20'000'000),
            node("clip_grad.py:10(clip_grad_norm_)", "python",
                 "/usr/lib/python3/dist-packages/torch/nn/utils/clip_grad.py", 60'000, 12'000'000),
            op("aten::sub", 1'000, 1'000'000), op("aten::mean", 2'000, 2'000'000)})));
  const OpLoop* train = find(loops, "(train)");
  ASSERT_NE(train, nullptr);
  EXPECT_FALSE(train->step);
  EXPECT_EQ(train->steps, 1'000);
  EXPECT_EQ(train->small_calls, 60'000);
  EXPECT_EQ(train->small_ns, 12'000'000);
  EXPECT_DOUBLE_EQ(train->max_per_call, 60);
}

// numpy through a helper, from a comprehension (3.11's own frame): the helper's calls count
// for the function the comprehension runs in, per call of that function.
TEST(OpLoops, AComprehensionsCallsAreItsFunctions) {
  CallNode dist =
      node("knn.py:4(dist)", "python", kUser, 24'000, 48'000'000,
           {node("fromnumeric.py:2188(sum)", "python",
                 "/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py", 24'000, 30'000'000)});
  CallNode comp = node("knn.py:12(<listcomp>)", "python", kUser, 60, 50'000'000, {std::move(dist)});
  CallNode nearest = node("knn.py:6(nearest)", "python", kUser, 1, 52'000'000, {std::move(comp)});
  auto loops = op_loops(
      forest(node("knn.py:1(<module>)", "python", kUser, 1, 52'000'000, {std::move(nearest)})));
  const OpLoop* l = find(loops, "(nearest)");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->small_calls, 24'000);
  EXPECT_DOUBLE_EQ(l->max_per_call, 24'000);
  EXPECT_EQ(l->own_ns, 2'000'000 + 2'000'000);  // its own and the comprehension's
  EXPECT_TRUE(l->numpy);
  EXPECT_FALSE(l->torch);
  EXPECT_EQ(find(loops, "(<listcomp>)"), nullptr);
}

// A training loop whose backward runs in a helper of its own (apply_grads) is the training
// loop; a helper named update (an AverageMeter's) is no optimizer step; a per-row helper of
// several small numpy calls, over 20 us a call, is its loop's small calls, counted as them.
TEST(OpLoops, StepsBeneathHelpersAndHelpersOfSmallCalls) {
  const std::string np = "/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py";
  CallNode train =
      node("t.py:20(train)", "python", kUser, 1, 60'000'000,
           {op("aten::select", 20'000, 10'000'000),
            node("t.py:10(apply_grads)", "python", kUser, 1'000, 50'000'000,
                 {node("_tensor.py:429(backward)", "python", kTorchFile, 1'000, 40'000'000)})});
  CallNode meter = node("t.py:30(per_sample)", "python", kUser, 1, 40'000'000,
                        {op("aten::select", 20'000, 10'000'000),
                         node("t.py:5(update)", "python", kUser, 20'000, 20'000'000)});
  CallNode rows =
      node("t.py:40(all_rows)", "python", kUser, 1, 500'000'000,
           {node("t.py:35(features)", "python", kUser, 8'000, 480'000'000,
                 {node("fromnumeric.py:3345(mean)", "python", np, 56'000, 400'000'000)})});
  auto loops = op_loops(forest(node("t.py:1(<module>)", "python", kUser, 1, 600'000'000,
                                    {std::move(train), std::move(meter), std::move(rows)})));
  ASSERT_NE(find(loops, "(train)"), nullptr);
  EXPECT_TRUE(find(loops, "(train)")->step);
  ASSERT_NE(find(loops, "(per_sample)"), nullptr);
  EXPECT_FALSE(find(loops, "(per_sample)")->step);
  const OpLoop* r = find(loops, "(all_rows)");
  ASSERT_NE(r, nullptr);  // features: 60 us a call, of 7 numpy calls of 7.1 us
  EXPECT_EQ(r->small_calls, 56'000);
  EXPECT_EQ(r->small_ns, 480'000'000);
  EXPECT_DOUBLE_EQ(r->max_per_call, 8'000);
  EXPECT_TRUE(r->numpy);
}

// torch from pip in a venv: lib/python3.12/site-packages/torch/ holds "/python3.12/", which the
// standard library's test reads as its own; it is torch's.
TEST(OpLoops, TorchOfAVenvIsTorch) {
  const std::string venv = "/home/u/.venv/lib/python3.12/site-packages/torch/nn/functional.py";
  CallNode loop =
      node("t.py:5(loss)", "python", kUser, 10, 30'000'000,
           {node("functional.py:1909(log_softmax)", "python", venv, 20'000, 20'000'000)});
  auto loops =
      op_loops(forest(node("t.py:1(<module>)", "python", kUser, 1, 30'000'000, {std::move(loop)})));
  const OpLoop* l = find(loops, "(loss)");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->small_calls, 20'000);
  EXPECT_TRUE(l->torch);
}

TEST(OpLoops, MatrixVectorProductsByCaller) {
  CallNode mlp = node("infer.py:10(mlp)", "python", kUser, 2'000, 900'000'000,
                      {node("cblas_sgemv", "blas", "", 6'000, 860'000'000)});
  mlp.children[0].flops = 6.0e9;
  auto sites = matrix_vector_sites(
      forest(node("infer.py:1(<module>)", "python", kUser, 1, 900'000'000, {std::move(mlp)})));
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].routine, "cblas_sgemv");
  EXPECT_EQ(sites[0].caller, "infer.py:10(mlp)");
  EXPECT_EQ(sites[0].calls, 6'000);
  EXPECT_EQ(sites[0].caller_calls, 2'000);
  EXPECT_EQ(sites[0].ns, 860'000'000);
  EXPECT_DOUBLE_EQ(sites[0].flops, 6.0e9);
}

}  // namespace
}  // namespace sonde::analyzers
