// The iteration breakdown on calling-context trees of the shapes real programs take, written
// with the real schema: Chainer's updater, PyTorch's optimizer set-up and zero_grad/clipping,
// names of the standard library and of tqdm, loops at a thread's top level, threads without a
// loop, and programs whose phases cannot be told.
#include "metrics/breakdown.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fixture.hpp"
#include "render/metrics_tables.hpp"

namespace sonde::analyzers {
namespace {

constexpr long long kMs = 1'000'000;

// Frames added parent first; times in ms; each frame's exclusive time is its inclusive time
// minus its children's, computed when written.
class TreeBuilder {
 public:
  int thread(const std::string& name) {
    threads_.push_back(name);
    return add(0, "<thread>", "root", "", 1, 0, int(threads_.size()));
  }
  int add(int parent, const std::string& name, const std::string& kind, const std::string& file,
          long long calls, long long incl_ms, int thread = 0) {
    if (parent) thread = frames_[parent - 1].thread;
    frames_.push_back({parent, name, kind, file, calls, incl_ms * kMs, thread});
    return int(frames_.size());
  }
  // A Python frame: name "file.py:LINE(fn)" from the path's base name.
  int py(int parent, const std::string& path, int line, const std::string& fn, long long calls,
         long long incl_ms) {
    std::string base = path.substr(path.rfind('/') + 1);
    return add(parent, base + ":" + std::to_string(line) + "(" + fn + ")", "python", path, calls,
               incl_ms);
  }
  void set_root_ms(int root, long long ms) { frames_[root - 1].incl = ms * kMs; }

  void write(const std::string& path) const {
    std::string sql = test::read_file(SONDE_SCHEMA_SQL);
    sql += "INSERT INTO meta VALUES ('schema_version', '" + std::to_string(kSchemaVersion) +
           "');"
           "INSERT INTO runs VALUES (1, 'u', 0, 'train', 'h', 'cpu', 2, 2, 'profile');"
           "INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns,"
           " ended_ns, end_reason) VALUES (1, 1, 10, 1, 'root', 'train', 0, 10000000000, "
           "'exit');";
    for (std::size_t t = 0; t < threads_.size(); ++t)
      sql +=
          "INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) "
          "VALUES (" +
          std::to_string(t + 1) + ", 1, " + std::to_string(t) + ", " + std::to_string(10 + t) +
          ", '" + threads_[t] + "', 0, 10000000000);";
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      long long children = 0;
      int depth = 0;
      for (const Frame& c : frames_)
        if (c.parent == int(i + 1)) children += c.incl;
      for (int p = f.parent; p; p = frames_[p - 1].parent) ++depth;
      std::string id = std::to_string(i + 1), routine = id;
      for (std::size_t j = 0; j < i; ++j)  // a routine is one row however often it is called
        if (frames_[j].name == f.name && frames_[j].kind == f.kind && frames_[j].file == f.file)
          routine = std::to_string(j + 1);
      if (routine == id)
        sql += "INSERT INTO routines (routine_id, name, kind, file) VALUES (" + id + ", '" +
               f.name + "', '" + f.kind + "', '" + f.file + "');";
      sql +=
          "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, "
          "calls, subrs, incl_ns, excl_ns) VALUES (" +
          id + ", " + std::to_string(f.thread) + ", " +
          (f.parent ? std::to_string(f.parent) : "NULL") + ", " + routine + ", " +
          std::to_string(depth) + ", 0, " + std::to_string(f.calls) + ", 0, " +
          std::to_string(f.incl) + ", " + std::to_string(f.incl - children) + ");";
    }
    test::exec_sql(path, sql);
  }

 private:
  struct Frame {
    int parent;
    std::string name, kind, file;
    long long calls, incl;
    int thread;
  };
  std::vector<Frame> frames_;
  std::vector<std::string> threads_;
};

const BreakdownRow& row(const Breakdown& b, const std::string& id) {
  return *std::find_if(b.rows.begin(), b.rows.end(),
                       [&](const BreakdownRow& r) { return r.id == id; });
}

constexpr const char* kTorch = "/usr/lib/python3/dist-packages/torch/";
std::string torch(const std::string& rel) { return kTorch + rel; }

class BreakdownTest : public ::testing::Test {
 protected:
  Breakdown compute(const std::vector<PhaseMapping>& mappings = {}) {
    std::string path = (dir_.path / ("b" + std::to_string(++files_) + ".db")).string();
    tree_.write(path);
    return compute_breakdown(ProfileFile::open(path), mappings);
  }
  test::TempDir dir_;
  TreeBuilder tree_;
  int files_ = 0;
};

TEST_F(BreakdownTest, ChainerUpdaterIsStructureNotUpdate) {
  // Trainer.run -> StandardUpdater.update -> update_core -> {iterator.__next__,
  // Optimizer.update(lossfun) -> {cleargrads, forward, backward, UpdateRule.update x 4}}.
  int root = tree_.thread("main");
  int run = tree_.py(root, "/w/train.py", 130, "run", 1, 1000);
  int upd = tree_.py(run, "/w/train.py", 118, "update", 10, 900);
  int core = tree_.py(upd, "/w/train.py", 122, "update_core", 10, 880);
  tree_.py(core, "/w/train.py", 108, "__next__", 10, 30);
  int opt = tree_.py(core, "/w/train.py", 96, "update", 10, 840);
  tree_.py(opt, "/w/train.py", 62, "cleargrads", 10, 10);
  tree_.py(opt, "/w/train.py", 66, "forward", 10, 300);
  tree_.py(opt, "/w/train.py", 18, "backward", 10, 400);
  int rule = tree_.py(opt, "/w/train.py", 82, "update", 40, 120);
  tree_.py(rule, "/w/train.py", 88, "update_core_cpu", 40, 100);
  tree_.set_root_ms(root, 1100);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 10);
  EXPECT_EQ(b.iterations_from, "t_f");  // the rule's update runs per parameter
  EXPECT_EQ(b.loop, "train.py:130(run)");
  EXPECT_EQ(b.body, "train.py:96(update)");
  EXPECT_EQ(row(b, "t_f").time_ns, 300 * kMs);
  EXPECT_EQ(row(b, "t_b").time_ns, 400 * kMs);
  EXPECT_EQ(row(b, "t_u").time_ns, 130 * kMs);  // cleargrads and the rule
  EXPECT_EQ(row(b, "t_io").time_ns, 30 * kMs);  // before the forward, every iteration
  // run's, updater.update's, update_core's and Optimizer.update's own time.
  EXPECT_EQ(b.other_ns, (100 + 20 + 10 + 10) * kMs);
  EXPECT_EQ(b.unmeasured_ns, 100 * kMs);
  EXPECT_EQ(b.outside_ns, 0);
}

TEST_F(BreakdownTest, TorchSetUpZeroGradClippingAndNamesOfOtherLibraries) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/t.py", 50, "main", 1, 2000);
  // Set-up: weight initialisation, the optimizer's construction (which runs torch.optim code),
  // one warm-up forward.
  int init = tree_.py(main, torch("nn/init.py"), 12, "_no_grad_uniform_", 2, 50);
  (void)init;
  int ctor = tree_.py(main, torch("optim/adadelta.py"), 56, "__init__", 1, 40);
  tree_.py(ctor, torch("optim/optimizer.py"), 133, "profile_hook_step", 1, 5);
  // len(order) before the step, every iteration: torch's own frame, not the user's loading.
  tree_.py(main, torch("_tensor.py"), 890, "__len__", 20, 5);
  tree_.py(main, torch("nn/modules/module.py"), 1188, "_call_impl", 21, 420);
  // The loop: zero_grad, forward (above, 20 of its 21 calls), backward, clipping, the step
  // through its wrappers; tqdm's and a stdlib Counter's update are no update.
  tree_.py(main, torch("optim/optimizer.py"), 246, "zero_grad", 20, 30);
  int bw = tree_.py(main, torch("_tensor.py"), 429, "backward", 20, 600);
  tree_.py(bw, torch("autograd/__init__.py"), 103, "backward", 20, 590);
  tree_.py(main, torch("nn/utils/clip_grad.py"), 10, "clip_grad_norm_", 20, 60);
  int wrap = tree_.py(main, torch("optim/optimizer.py"), 135, "wrapper", 20, 300);
  int use = tree_.py(wrap, torch("optim/optimizer.py"), 19, "_use_grad", 20, 290);
  tree_.py(use, torch("optim/adadelta.py"), 80, "step", 20, 280);
  tree_.py(main, "/usr/lib/python3/dist-packages/tqdm/std.py", 1190, "update", 20, 40);
  tree_.py(main, "/usr/lib/python3.11/collections/__init__.py", 670, "update", 20, 20);
  tree_.py(main, "/w/t.py", 90, "evaluate", 1, 200);
  tree_.set_root_ms(root, 2100);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 20);  // not 21 (the warm-up), not 21 (the optimizer's set-up)
  EXPECT_EQ(b.iterations_from, "t_u");
  EXPECT_EQ(row(b, "t_f").time_ns, 420 * kMs);
  EXPECT_EQ(row(b, "t_b").time_ns, 600 * kMs);
  EXPECT_EQ(row(b, "t_u").time_ns, (30 + 60 + 300) * kMs);
  EXPECT_EQ(row(b, "t_u").routines, (std::vector<std::string>{"optimizer.py:135(wrapper)",
                                                              "clip_grad.py:10(clip_grad_norm_)",
                                                              "optimizer.py:246(zero_grad)"}));
  EXPECT_EQ(b.other_ns, (2000 - 50 - 40 - 420 - 30 - 600 - 60 - 300 - 200) * kMs);
  EXPECT_EQ(b.outside_ns, (50 + 40 + 200) * kMs);  // init, construction, evaluation
  EXPECT_EQ(row(b, "t_io").time_ns, 0);            // set-up runs once, __len__ is torch's
}

TEST_F(BreakdownTest, StepWithAClosureRunsForwardAndBackward) {
  // Lightning's shape: optimizer.step(closure), the closure running the training step's
  // forward and backward, then the functional adam() doing the update.
  int root = tree_.thread("main");
  int fit = tree_.py(root, "/w/t.py", 5, "fit", 1, 1000);
  int wrap = tree_.py(fit, torch("optim/optimizer.py"), 135, "wrapper", 10, 900);
  int use = tree_.py(wrap, torch("optim/optimizer.py"), 19, "_use_grad", 10, 890);
  int step = tree_.py(use, torch("optim/adam.py"), 120, "step", 10, 880);
  int closure = tree_.py(step, "/w/t.py", 30, "closure", 10, 700);
  tree_.py(closure, torch("nn/modules/module.py"), 1188, "_call_impl", 10, 300);
  tree_.py(closure, torch("_tensor.py"), 429, "backward", 10, 350);
  tree_.py(step, torch("optim/adam.py"), 200, "adam", 10, 150);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 10);
  EXPECT_EQ(b.iterations_from, "t_f");
  EXPECT_EQ(row(b, "t_f").time_ns, 300 * kMs);
  EXPECT_EQ(row(b, "t_b").time_ns, 350 * kMs);
  EXPECT_EQ(row(b, "t_u").time_ns, 150 * kMs);
  // fit's, the wrappers', step's and the closure's own time.
  EXPECT_EQ(b.other_ns, (100 + 10 + 10 + 30 + 50) * kMs);
}

TEST_F(BreakdownTest, RegionsAtTheThreadsTopLevelAndThreadsWithoutALoop) {
  int root = tree_.thread("main");
  tree_.add(root, "load batch", "region", "", 8, 80);
  tree_.add(root, "fwd", "region", "", 8, 200);
  int bwd = tree_.add(root, "bwd", "region", "", 8, 300);
  tree_.add(bwd, "cudaMemcpy HtoD", "cuda", "", 8, 20);
  tree_.add(root, "sgd", "region", "", 8, 100);
  tree_.add(root, "checkpoint", "region", "", 1, 50);
  tree_.set_root_ms(root, 1000);
  int worker = tree_.thread("worker");
  tree_.py(worker, "/w/t.py", 10, "forward", 5, 100);  // a forward alone: no loop
  tree_.set_root_ms(worker, 200);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 8);
  EXPECT_EQ(b.loop, "<thread>");
  EXPECT_EQ(row(b, "t_io").time_ns, 80 * kMs);
  EXPECT_EQ(row(b, "t_f").time_ns, 200 * kMs);
  EXPECT_EQ(row(b, "t_b").time_ns, 280 * kMs);
  EXPECT_EQ(row(b, "t_h2d").time_ns, 20 * kMs);  // a copy inside backward is a copy
  EXPECT_EQ(row(b, "t_u").time_ns, 100 * kMs);
  EXPECT_EQ(b.outside_ns, 50 * kMs);
  EXPECT_EQ(b.unmeasured_ns, 270 * kMs);  // the training thread's root only
  EXPECT_EQ(b.threads, 1);
  EXPECT_EQ(b.left_out_threads, 1);
  EXPECT_EQ(b.left_out_ns, 100 * kMs);
}

TEST_F(BreakdownTest, AnUpdateInlineInTheLoopCannotBeTold) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/t.py", 1, "<module>", 1, 500);
  tree_.py(main, torch("nn/modules/module.py"), 1188, "_call_impl", 12, 100);
  tree_.py(main, torch("_tensor.py"), 429, "backward", 12, 200);
  tree_.py(main, torch("nn/modules/module.py"), 1956, "zero_grad", 12, 30);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 12);
  EXPECT_FALSE(row(b, "t_u").known);
  // zero_grad's time is in other with the update written inline: the rows still add up.
  EXPECT_EQ(row(b, "t_u").time_ns, 0);
  EXPECT_TRUE(row(b, "t_u").routines.empty());
  std::int64_t rows = b.other_ns + b.outside_ns + b.unmeasured_ns;
  for (const BreakdownRow& r : b.rows) rows += r.time_ns;
  EXPECT_EQ(rows, b.threads_ns);
  EXPECT_EQ(b.other_ns, (500 - 100 - 200 - 30 + 30) * kMs);
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("t_u cannot be told"), std::string::npos);
  Table t = breakdown_table(b);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(t.rows[kUpdate][2]));  // no time shown
}

// A numpy MLP's own adam_update is the update, as optimizer-update reads it (until 2026-12-07
// only `update` exactly was: t_u "cannot be told" and adam_update's time in other); its progress
// bar's update_progress is not.
TEST_F(BreakdownTest, AnUpdateByItsOptimizersNameIsTheUpdate) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/mlp.py", 1, "<module>", 1, 1000);
  int train = tree_.py(main, "/w/mlp.py", 48, "train", 1, 990);
  tree_.py(train, "/w/mlp.py", 14, "forward", 150, 200);
  tree_.py(train, "/w/mlp.py", 20, "backward", 150, 400);
  tree_.py(train, "/w/mlp.py", 30, "adam_update", 150, 300);
  tree_.py(train, "/w/mlp.py", 40, "update_progress", 150, 50);
  Breakdown b = compute();
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 150);
  EXPECT_TRUE(row(b, "t_u").known);
  EXPECT_EQ(row(b, "t_u").time_ns, 300 * kMs);
  EXPECT_EQ(b.other_ns, (50 + 40) * kMs);  // the progress bar and train's own time
  EXPECT_TRUE(b.notes.empty()) << b.notes[0];
}

TEST_F(BreakdownTest, NothingToTellFrom) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/t.py", 1, "<module>", 1, 500);
  tree_.py(main, "/usr/lib/python3.11/functools.py", 35, "update_wrapper", 1466, 10);
  tree_.py(main, "/usr/lib/python3.11/linecache.py", 80, "updatecache", 30, 10);
  Breakdown b = compute();
  EXPECT_FALSE(b.found);
  EXPECT_EQ(b.iterations, 0);
  EXPECT_EQ(b.reason.rfind("no forward, backward or update entry in any thread", 0), 0u)
      << b.reason;
  EXPECT_TRUE(breakdown_table(b).rows.empty());
}

TEST_F(BreakdownTest, UserMappingNamesTheDataLoading) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/t.py", 1, "main", 1, 1000);
  tree_.py(main, "/w/t.py", 20, "forward", 10, 100);
  tree_.py(main, "/w/t.py", 40, "fetch_next", 10, 70);  // after the forward: no guess
  tree_.py(main, "/w/t.py", 30, "backward", 10, 200);
  tree_.py(main, "/w/t.py", 60, "update", 10, 50);
  EXPECT_EQ(row(compute(), "t_io").time_ns, 0);
  Breakdown b = compute({parse_phase_mapping("t_io=fetch_*")});
  EXPECT_EQ(row(b, "t_io").time_ns, 70 * kMs);
  EXPECT_EQ(b.iterations, 10);
}

// DDP's reducer waits for its buckets' all-reduces at the end of the backward pass, inside the
// autograd engine after its last node: the own time of torch.autograd's backward frame, where
// PyTorch marks nothing (the view engine_waits). That is communication: a rank that waited for
// a slower one read it as its backward (t_b 13.7 ms/iter against its peer's 2.5).
TEST_F(BreakdownTest, TheDdpReducersWaitInBackwardIsCommunication) {
  int root = tree_.thread("main");
  int main = tree_.py(root, "/w/ddp.py", 20, "main", 1, 2000);
  tree_.py(main, torch("nn/modules/module.py"), 1188, "_call_impl", 20, 400);
  int bw = tree_.py(main, torch("_tensor.py"), 429, "backward", 20, 600);
  int engine = tree_.py(bw, torch("autograd/__init__.py"), 103, "backward", 20, 590);
  int hook = tree_.add(engine,
                       "autograd::engine::evaluate_function: torch::autograd::"
                       "AccumulateGrad",
                       "torch", "", 20, 100);
  int allreduce = tree_.add(hook, "c10d::allreduce_", "torch", "", 20, 10);
  int wrap = tree_.py(main, torch("optim/optimizer.py"), 135, "wrapper", 20, 300);
  tree_.py(wrap, torch("optim/sgd.py"), 130, "step", 20, 290);
  tree_.set_root_ms(root, 2000);
  std::string path = (dir_.path / "ddp.db").string();
  tree_.write(path);
  test::exec_sql(path,
                 "UPDATE routines SET library = 'c10d' WHERE name = 'c10d::allreduce_';"
                 "INSERT INTO comm_ops (node_id, op, kind, blocking, comm_size, bytes, "
                 "calls, time_ns) VALUES (" +
                     std::to_string(allreduce) +
                     ", 'c10d::allreduce_', 'collective', 0, 2, 9640, 20, 10000000);");
  Breakdown b = compute_breakdown(ProfileFile::open(path), {});
  ASSERT_TRUE(b.found) << b.reason;
  EXPECT_EQ(b.iterations, 20);
  // The engine frame's own 490 ms (590 less the node) and the all-reduces' posting, 10 ms.
  EXPECT_EQ(row(b, "t_comm").time_ns, (490 + 10) * kMs);
  EXPECT_EQ(row(b, "t_b").time_ns, (600 - 490 - 10) * kMs);
  EXPECT_EQ(row(b, "t_comm").routines.front(), "__init__.py:103(backward)");
  // Without a collective beneath it, the engine's own time is the backward's.
  test::exec_sql(path, "DELETE FROM comm_ops;");
  Breakdown plain = compute_breakdown(ProfileFile::open(path), {});
  EXPECT_EQ(row(plain, "t_b").time_ns, (600 - 10) * kMs);
}

}  // namespace
}  // namespace sonde::analyzers
