#include "metrics/breakdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

#include "metrics/breakdown_gpu.hpp"
#include "profile/call_tree.hpp"
#include "profile/line_costs.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

constexpr unsigned bit(int phase) { return 1u << phase; }
constexpr unsigned kFb = bit(kForward) | bit(kBackward);
constexpr unsigned kFbu = kFb | bit(kUpdate);

// A frame with its role and the phases of the entries strictly beneath it.
struct Frame {
  const CallNode* node = nullptr;
  const Frame* parent = nullptr;
  Role role;
  unsigned below = 0;        // phases of any role beneath
  unsigned below_entry = 0;  // phases of iteration entries (forward, backward, update) beneath
  // Calls of the outermost forward entries beneath (count_entries's forward count of a frame
  // that is no phase itself), summed as the tree is annotated: asked of every frame a loop
  // walks, counted there it was a walk per frame (the 1M-node view bench, +13 %).
  std::int64_t forward_calls = 0;
  std::vector<Frame> kids;

  // Chainer's Optimizer.update(lossfun) or a step(closure) runs forward and backward itself: it
  // is part of the iteration's structure, not one phase. A backward that runs forwards again is
  // still the backward: activation checkpointing recomputes them inside it, the cost it trades
  // for memory (torch.utils.checkpoint on 4 blocks read t_f 0.50 ms/iter against t_b 0.45, its
  // backward calls 0.84 ms/iter inclusive, the recompute in t_f and the engine's time in other).
  bool container() const {
    unsigned entries = below_entry & kFbu;
    if (role.phase == kBackward && !(entries & bit(kUpdate))) return false;
    return std::popcount(entries) >= 2;
  }
  int phase() const { return container() ? -1 : role.phase; }
};

// The nodes beneath which (themselves included) torch.optim's step runs: an update entry of
// torch's own files.
bool collect_torch_steps(const CallNode& n, const std::vector<PhaseMapping>& mappings,
                         std::unordered_set<const CallNode*>& out) {
  bool steps = false;
  if (n.kind == kinds::kPython &&
      std::string_view(n.file).find("torch/optim/") != std::string_view::npos) {
    Role r = role_of(n, mappings);
    steps = r.phase == kUpdate && r.counts;
  }
  for (const CallNode& c : n.children)
    if (!is_import_frame(c)) steps |= collect_torch_steps(c, mappings, out);
  if (steps) out.insert(&n);
  return steps;
}

// Nothing an import runs is part of an iteration (the class bodies of torch.optim, enum's
// helpers): frames beneath an import have no role. A function of the program named update
// whose caller also runs torch.optim's step (beside it, or in it) is not the update's entry: a
// red-team script's ConfusionMeter.update (top-5 and calibration, 0.367 s) was t_u and an
// optimizer-update candidate, and the ImageNet example's AverageMeter.update counted too. Only
// there: a hand-written update in a loop of its own stays one where an LBFGS calibration runs
// elsewhere in the thread (the whole thread was asked first, and its training loop was lost).
void annotate(Frame& f, const CallNode& n, const Frame* parent,
              const std::vector<PhaseMapping>& mappings,
              const std::unordered_set<const CallNode*>& stepping,
              std::set<std::int64_t>& not_updates, bool under_import = false) {
  f.node = &n;
  f.parent = parent;
  bool import = under_import || is_import_frame(n);
  if (!import) f.role = role_of(n, mappings);
  // Its caller is the program's frame above it: past a decorator's (@torch.no_grad()'s
  // decorate_context), whose frame runs no step. A decorated ConfusionMeter.update read as t_u
  // and an update candidate, the same meter undecorated as other (a red-team find).
  // (Walked up only for such a method: for every node, it walked each deep stack of packages'
  // frames again, the view bench's +8 %.)
  if (f.role.by_name && f.role.phase == kUpdate && !f.role.user) {
    const Frame* caller = parent;
    while (caller != nullptr && caller->node->kind == kinds::kPython &&
           !is_user_frame(*caller->node))
      caller = caller->parent;
    if (caller && stepping.count(caller->node)) {
      f.role = {};
      not_updates.insert(n.routine_id);
    }
  }
  f.kids.resize(n.children.size());
  for (std::size_t i = 0; i < n.children.size(); ++i) {
    Frame& k = f.kids[i];
    annotate(k, n.children[i], &f, mappings, stepping, not_updates, import);
    if (import) continue;
    f.below |= k.below | (k.role.phase >= 0 ? bit(k.role.phase) : 0);
    f.below_entry |= k.below_entry | (k.role.counts ? bit(k.role.phase) : 0);
    if (k.role.anywhere || is_import_frame(*k.node)) continue;
    if (k.phase() < 0)
      f.forward_calls += k.forward_calls;
    else if (k.phase() == kForward && k.role.counts)
      f.forward_calls += k.node->calls;
  }
}

// torch.optim's Optimizer.__init__, run once per optimizer whatever its class.
bool is_optimizer_construction(const CallNode& n) {
  return n.kind == kinds::kPython && n.file.ends_with("torch/optim/optimizer.py") &&
         n.name.ends_with("(__init__)");
}

// A frame of torch's optimizers' files (torch/optim/, torch/distributed/optim/): the few frames
// built_by_torch_alone looks beneath, never a model's.
bool torch_optim_frame(const CallNode& n) {
  std::string_view file(n.file);
  return n.kind == kinds::kPython && file.find("/torch/") != std::string_view::npos &&
         file.find("/optim/") != std::string_view::npos;
}

// An optimizer's construction as the program asked for it: Optimizer.__init__, or a frame of
// torch's optimizers through which only such frames reach one. One ZeroRedundancyOptimizer(Adam)
// builds itself and the Adam inside it: two Optimizer.__init__ read "2 optimizers" and half of its
// 40 iterations (a red-team find); a spawn's _wrap above a GAN's two is not one.
// So is an optimizer's own __init__ (a frame calling Optimizer.__init__ itself): what it
// builds inside is part of it (SAM's base optimizer, built in SAM.__init__, read as a second
// optimizer and half of 192 iterations).
bool built_by_torch_alone(const Frame& f) {
  if (is_optimizer_construction(*f.node)) return true;
  bool own_init = std::any_of(f.kids.begin(), f.kids.end(),
                              [](const Frame& k) { return is_optimizer_construction(*k.node); });
  if (own_init) return true;
  if (!torch_optim_frame(*f.node)) return false;
  return std::any_of(f.kids.begin(), f.kids.end(),
                     [](const Frame& k) { return built_by_torch_alone(k); });
}

// A file's stem, lower-cased: "adamw" of .../torch/optim/adamw.py, as an optimizer class's name
// lower-cased reads (AdamW, SGD, RMSprop).
std::string file_stem(std::string_view file) {
  std::string_view base = file.substr(file.rfind('/') + 1);
  std::string out(base.substr(0, base.find('.')));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimizers stepping only inside another's step: a Lookahead's base, built by the program and
// stepped in the Lookahead's step (timm's Lookahead(AdamW(...)) read "2 optimizers" and 96
// iterations of 192). By class, from torch's ranges (Optimizer.step#Adam.step): the share of a
// class's steps made inside another optimizer's step wrapper, of the optimizers built of its
// file (`built`: adam.py's constructions). A GAN with Lookahead(Adam) and a plain Adam has half
// its Adam steps nested: one of its two Adams is wrapped. ZeroRedundancyOptimizer's inner Adam,
// built inside it (not counted in `built`), takes nothing away. Walked with a stack of its own.
std::int64_t stepped_inside_another(const Frame& root,
                                    const std::map<std::string, std::int64_t>& built) {
  constexpr std::string_view kRange = "Optimizer.step#";
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> steps;  // class: outer, nested
  std::vector<std::pair<const Frame*, int>> todo{{&root, 0}};          // wrappers above
  while (!todo.empty()) {
    auto [f, wrappers] = todo.back();
    todo.pop_back();
    const CallNode& n = *f->node;
    if (n.kind == kinds::kRegion && n.name.starts_with(kRange) && wrappers > 0) {
      std::string_view rest = std::string_view(n.name).substr(kRange.size());
      std::string cls(rest.substr(0, rest.find('.')));
      for (char& c : cls) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      (wrappers > 1 ? steps[cls].second : steps[cls].first) += n.calls;
    }
    int below = wrappers + (torch_step_wrapper(n) ? 1 : 0);
    for (const Frame& k : f->kids) todo.emplace_back(&k, below);
  }
  std::int64_t wrapped = 0;
  for (const auto& [cls, calls] : steps) {
    auto it = built.find(cls);
    if (it == built.end() || calls.second == 0) continue;
    double nested =
        static_cast<double>(calls.second) / static_cast<double>(calls.first + calls.second);
    wrapped += std::llround(static_cast<double>(it->second) * nested);
  }
  return wrapped;
}

// Optimizers built outside the iterations (not in a frame run every iteration): a GAN's two.
// One built every iteration is the same optimizer again, not another; so is one built in each
// call of the body that holds the loop (a learning-rate sweep calling train(lr) 3 times, each
// building its SGD, read "3 optimizers" and a third of its 150 iterations).
// `by_file`: the constructions per file stem of the frame that made them (adam.py's __init__,
// a Lookahead's own), for stepped_inside_another.
std::int64_t optimizers_built(const Frame& f, const Frame* body, std::int64_t per_iteration,
                              std::map<std::string, std::int64_t>& by_file) {
  if (built_by_torch_alone(f)) {
    std::int64_t n = f.node->calls < per_iteration ? f.node->calls : 0;
    by_file[file_stem(f.node->file.str())] += n;
    return n;
  }
  std::int64_t n = 0;
  for (const Frame& k : f.kids)
    if (!(&f == body && k.node->calls >= per_iteration) && !is_import_frame(*k.node))
      n += optimizers_built(k, body, per_iteration, by_file);
  std::int64_t calls = f.node->calls;
  if (&f == body && calls > 1 && n >= calls && n % calls == 0) {
    n /= calls;
    for (auto& [stem, built] : by_file) built /= calls;
  }
  return n;
}

// The deepest frames whose subtree holds every phase of `want`.
void find_bodies(const Frame& f, unsigned want, std::vector<const Frame*>& out) {
  if ((f.below_entry & want) != want) return;
  std::size_t before = out.size();
  for (const Frame& k : f.kids) find_bodies(k, want, out);
  if (out.size() == before) out.push_back(&f);
}

// Calls of the outermost entries at or beneath `k`, per phase: a model's submodules and an
// optimizer's per-parameter steps are inside their entry and do not count again.
void count_entries(const Frame& k, std::array<std::int64_t, kPhaseCount>& calls) {
  if (k.role.anywhere || is_import_frame(*k.node)) return;
  if (int p = k.phase(); p >= 0) {
    if (k.role.counts) calls[p] += k.node->calls;
    return;
  }
  for (const Frame& c : k.kids) count_entries(c, calls);
}

// The fewest calls among the forward, backward and update entries: one of each per iteration,
// whatever else runs several times (a loss module beside the model, per-layer steps).
std::int64_t fewest(const std::array<std::int64_t, kPhaseCount>& calls, int& counted) {
  std::int64_t n = std::numeric_limits<std::int64_t>::max();
  counted = -1;
  for (int p : {kUpdate, kForward, kBackward}) {  // ties: the update names the count
    if (calls[p] > 0 && calls[p] < n) {
      n = calls[p];
      counted = p;
    }
  }
  return counted < 0 ? 0 : n;
}

struct Accumulator {
  Breakdown& out;
  std::array<std::map<std::string, std::int64_t>, kPhaseCount> opened;
  std::vector<const Frame*> loading;  // guessed data loading (guessed_loading)
  LoopNodes nodes;                    // for the device time the nodes launched
  // The view engine_waits: frames running the autograd engine whose own time is the DDP
  // reducer's wait for its all-reduces: communication, in t_comm, whatever phase is around.
  std::unordered_set<std::int64_t> engine_waits;
  // Set per training thread: its loop's iterations, and the evaluations found in them.
  std::int64_t iterations = 0;
  std::int64_t evaluation_ns = 0;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> evaluations;  // calls, ns

  void open(int phase, const CallNode& n) { opened[phase][n.name] += n.incl_ns; }

  // A frame of the program's that reaches the model's forward and neither a backward nor an
  // update, and runs in only some iterations (fewer calls than they are), or runs the model in
  // only some of its calls, or loads batches of its own: an evaluation, from a callback every N
  // steps (a Trainer's on_step_end running validation every 24 steps). Its forward and its
  // loader's batches read as the training's t_f and t_io (4.35 s of validation beside 0.50 s
  // of training forward, and a data-loading candidate that made the run slower: a red-team
  // find); like one called from the loop's own frame, it is outside the iterations. A
  // compute_loss(model, x, y) run every iteration, the backward in its caller, is none.
  bool evaluation(const Frame& f) const {
    if (iterations <= 0 || f.node->kind != kinds::kPython || !is_user_frame(*f.node) ||
        f.phase() >= 0 || !(f.below_entry & bit(kForward)) ||
        (f.below_entry & (bit(kBackward) | bit(kUpdate))))
      return false;
    return f.node->calls < iterations || (f.below & bit(kIo)) || f.forward_calls < f.node->calls;
  }

  void mark(const CallNode& n, int phase) {
    nodes.phase[n.node_id] = phase;
    for (std::int64_t id : n.rare.get().merged_node_ids) nodes.phase[id] = phase;
  }
  void mark_subtree(const Frame& f, int phase) {
    mark(*f.node, phase);
    for (const Frame& k : f.kids) mark_subtree(k, phase);
  }

  // Outermost entry wins: everything beneath it is its phase, except copies and collectives.
  void walk(const Frame& f, int current) {
    const CallNode& n = *f.node;
    if (f.role.anywhere) {
      out.rows[f.role.phase].time_ns += n.incl_ns;
      open(f.role.phase, n);
      mark_subtree(f, f.role.phase);
      return;
    }
    if (is_import_frame(n) && current < 0) {
      out.other_ns += n.incl_ns;
      mark_subtree(f, LoopNodes::kOther);
      return;
    }
    static const SharedText python(kinds::kPython);  // interned: a pointer's comparison
    if (n.kind == python && n.file.ends_with("torch/utils/data/dataloader.py") &&
        (n.name.ends_with("(__next__)") || n.name.ends_with("(__iter__)"))) {
      const Frame* up = f.parent;
      while (up != nullptr && !(up->node->kind == kinds::kPython && is_user_frame(*up->node)))
        up = up->parent;
      out.loader_callers.insert(up == nullptr ? std::string("<thread>") : up->node->name.str());
    }
    if (current < 0 && evaluation(f)) {
      evaluation_ns += n.incl_ns;
      auto& [calls, ns] = evaluations[n.name];
      calls += n.calls;
      ns += n.incl_ns;
      return;
    }
    out.loop_flops += n.flops;
    out.loop_calls[n.routine_id] += n.calls;
    if (current < 0 && f.phase() >= 0) {
      current = f.phase();
      open(current, n);
    } else if (current < 0 && std::find(loading.begin(), loading.end(), &f) != loading.end()) {
      current = kIo;
      open(current, n);
    }
    if (current >= 0 && engine_waits.count(n.node_id) != 0) {
      out.rows[kComm].time_ns += n.excl_ns;
      opened[kComm][n.name] += n.excl_ns;
      mark(n, kComm);
    } else {
      (current >= 0 ? out.rows[current].time_ns : out.other_ns) += n.excl_ns;
      mark(n, current >= 0 ? current : LoopNodes::kOther);
    }
    for (const Frame& k : f.kids) walk(k, current);
  }
};

bool on_path(const Frame* f, const Frame* descendant) {
  for (const Frame* d = descendant; d != nullptr; d = d->parent)
    if (d == f) return true;
  return false;
}

struct ThreadLoop {
  const Frame* body = nullptr;
  const Frame* loop = nullptr;
  std::int64_t iterations = 0;
  int counted = -1;
  std::size_t bodies = 0;
  std::int64_t optimizers = 1;        // whose steps are one iteration's update
  std::vector<const Frame*> feeders;  // generators feeding the loop (feeders())
  bool without_update = false;        // forward and backward repeat, no update entry
};

bool is_feeder(const Frame& k, const ThreadLoop& t) {
  return std::find(t.feeders.begin(), t.feeders.end(), &k) != t.feeders.end();
}

// The iterations from the entries' calls; with several optimizers (a GAN's generator and
// discriminator), each steps once per iteration, so the update's calls are divided by them.
std::int64_t iterations_of(std::array<std::int64_t, kPhaseCount> calls, std::int64_t optimizers,
                           int& counted) {
  if (optimizers > 1 && calls[kUpdate] % optimizers == 0) calls[kUpdate] /= optimizers;
  return fewest(calls, counted);
}

// Frames of the loop frame that belong to its iterations: those run every iteration, the path
// to the body, data loading, and wrappers of data loading only (tqdm around a DataLoader).
bool in_iterations(const Frame& k, const ThreadLoop& t) {
  if (on_path(&k, t.body) || k.node->calls >= t.iterations || is_feeder(k, t)) return true;
  if (k.role.phase == kIo || k.role.phase == kH2d) return true;
  return k.phase() < 0 && (k.below & (bit(kIo) | bit(kH2d))) && !(k.below_entry & kFbu);
}

// A generator the loop resumes for its batches (`for x, y in batches():`, called from the loop
// frame or on the way to the body) is one call however many batches it yields, and the time of
// every resumption is its own: it is the data loading, unless a loader beneath says so itself
// or it runs the training. One made every iteration or more often is drained within one
// (`for p in model.parameters():` in an update written out by hand, pytorch/examples'
// regression; Chainer's link.params): it feeds the loop nothing.
//
// A feeder is first resumed before the first iteration has run all its phases, and node ids are
// given in creation order: a generator whose node came after (a `sum(... for p in
// model.parameters())` once the loop is done, an evaluation loop's batches) is work after the
// training, not its loading. So is, by this rule, the feeder of a loop after a warm-up step
// that ran all three phases before it (their nodes came first): its time is then `outside`.
void first_entries(const Frame& k, std::array<std::int64_t, kPhaseCount>& first) {
  if (k.role.anywhere || is_import_frame(*k.node)) return;
  if (int p = k.phase(); p >= 0) {
    if (k.role.counts && k.node->node_id > 0 && (first[p] == 0 || k.node->node_id < first[p]))
      first[p] = k.node->node_id;
    return;
  }
  for (const Frame& c : k.kids) first_entries(c, first);
}

// A walk over a model's parts: torch.nn.Module's own generators (parameters(), modules(),
// named_buffers(), ...), or a generator expression over one alone (`sum(p.numel() for p in
// m.parameters())`). Made before the loop (an optimizer built from m.parameters()), they came
// out as the loop's data loading, named in t_io's "from" (a red-team find).
bool walks_a_model(const Frame& k) {
  auto module_iteration = [](const Frame& f) {
    return f.node->generator &&
           std::string_view(f.node->file).find("torch/nn/modules/") != std::string_view::npos;
  };
  if (module_iteration(k)) return true;
  return !k.kids.empty() && std::all_of(k.kids.begin(), k.kids.end(), module_iteration);
}

std::vector<const Frame*> feeders(const ThreadLoop& t) {
  std::vector<const Frame*> out;
  for (const Frame* f = t.body; f != nullptr; f = f->parent) {
    for (const Frame& k : f->kids)
      if (k.node->generator && k.node->calls < t.iterations && k.role.phase < 0 &&
          !(k.below_entry & kFbu) && !(k.below & (bit(kIo) | bit(kH2d))) && !walks_a_model(k))
        out.push_back(&k);
    if (f == t.loop) break;
  }
  std::array<std::int64_t, kPhaseCount> first{};
  for (const Frame& k : t.body->kids) first_entries(k, first);
  std::int64_t began = 0;  // the node that completed the first iteration's set of phases
  for (int p : {kForward, kBackward, kUpdate}) began = std::max(began, first[p]);
  std::vector<const Frame*> before;
  for (const Frame* k : out)
    if (k->node->node_id > 0 && k->node->node_id < began) before.push_back(k);
  return began > 0 ? before : out;  // no ids (a tree built by hand): as before
}

ThreadLoop find_loop(const Frame& root) {
  ThreadLoop t;
  std::vector<const Frame*> bodies;
  find_bodies(root, kFbu, bodies);
  t.without_update = bodies.empty();
  if (bodies.empty()) find_bodies(root, kFb, bodies);
  if (bodies.empty()) return t;
  t.bodies = bodies.size();
  t.body = *std::max_element(bodies.begin(), bodies.end(), [](const Frame* a, const Frame* b) {
    return a->node->incl_ns < b->node->incl_ns;
  });
  std::array<std::int64_t, kPhaseCount> calls{};
  for (const Frame& k : t.body->kids) count_entries(k, calls);
  t.iterations = fewest(calls, t.counted);
  if (t.counted < 0) return {};
  if (t.counted == kUpdate) {
    std::map<std::string, std::int64_t> by_file;
    std::int64_t built = optimizers_built(root, t.body, t.iterations, by_file);
    // One built is one optimizer: the walk for wrapped ones only where two or more were.
    t.optimizers =
        built > 1 ? std::max<std::int64_t>(1, built - stepped_inside_another(root, by_file)) : 1;
    t.iterations = iterations_of(calls, t.optimizers, t.counted);
  }
  // A body run once per iteration (train_step, a "step" region, Chainer's updater) is called
  // from the frame holding the loop; a body called fewer times holds the loop itself.
  const Frame* top = t.body;
  if (t.iterations > 1 && t.body->node->calls >= t.iterations) {
    while (top->parent && top->parent->parent && top->parent->node->calls >= t.iterations)
      top = top->parent;
    t.loop = top->parent ? top->parent : top;
    t.feeders = feeders(t);
  } else {
    // The body holds the loop: count again over the frames run every iteration only, so that
    // set-up (a warm-up forward, an optimizer's construction) is not an iteration.
    t.loop = t.body;
    t.feeders = feeders(t);
    calls = {};
    for (const Frame& k : t.body->kids)
      if (in_iterations(k, t)) count_entries(k, calls);
    int counted = -1;
    if (std::int64_t n = iterations_of(calls, t.optimizers, counted); n > 0) {
      t.iterations = n;
      t.counted = counted;
    }
  }
  return t;
}

// Calls of the data-loading entries (a DataLoader's __next__, a "data" region) among the frames
// of the loop's iterations: one a batch, and one more at each epoch's end (StopIteration).
std::int64_t loading_calls(const ThreadLoop& t) {
  std::int64_t n = 0;
  for (const Frame& k : t.loop->kids)
    if (in_iterations(k, t) && k.role.phase == kIo) n += k.node->calls;
  return n;
}

// The outermost forward entries beneath `f`, by the frame that calls them.
void forward_callers(const Frame& f, std::map<const Frame*, std::int64_t>& incl) {
  if (f.role.anywhere || is_import_frame(*f.node)) return;
  if (f.phase() == kForward && f.role.counts && f.parent) {
    incl[f.parent] += f.node->incl_ns;
    return;
  }
  if (f.phase() >= 0) return;
  for (const Frame& k : f.kids) forward_callers(k, incl);
}

// An evaluation or inference loop (model.eval(), torch.no_grad(), batches from a DataLoader, no
// backward, no optimizer): the frame calling the model most, where it calls it more than once,
// is the body; the iterations are the model's calls (below), over the model calls a batch where
// data-loading entries count the batches. Tried only where no thread trains (a red-team
// evaluation loop read "cannot tell", its loading 37 % of the time and no advice).
ThreadLoop find_forward_loop(const Frame& root) {
  std::map<const Frame*, std::int64_t> incl;
  forward_callers(root, incl);
  ThreadLoop t;
  std::int64_t most = -1;
  for (const auto& [caller, ns] : incl) {
    std::array<std::int64_t, kPhaseCount> calls{};
    for (const Frame& k : caller->kids) count_entries(k, calls);
    if (calls[kForward] * std::max<std::int64_t>(1, caller->node->calls) < 2 || ns <= most)
      continue;
    most = ns;
    t.body = caller;
  }
  if (!t.body) return t;
  t.bodies = 1;
  t.counted = kForward;
  std::array<std::int64_t, kPhaseCount> calls{};
  for (const Frame& k : t.body->kids) count_entries(k, calls);
  t.iterations = calls[kForward];
  // The model's own forwards beneath the forward entries: a loss module called beside the model
  // is the same entry (one call path), each its own forward beneath it; the most-called one is
  // a batch each (a criterion beside the model read as twice the batches).
  std::int64_t model_calls = 0;
  for (const Frame& k : t.body->kids)
    if (k.phase() == kForward && k.role.counts)
      for (const Frame& c : k.kids) model_calls = std::max(model_calls, c.node->calls);
  const Frame* top = t.body;
  std::int64_t per_call = t.body->node->calls > 0 ? t.iterations / t.body->node->calls : 0;
  if (t.body->node->calls > 1 && per_call <= 2) {
    // A predict(batch) called once a batch (with its criterion: two calls): the loop is above.
    // One calling the model many times a call (evaluate(loader) for validation, then for the
    // test set) holds the loop itself (it read as 2 iterations of 64 batches).
    while (top->parent && top->parent->parent && top->parent->node->calls >= t.body->node->calls)
      top = top->parent;
    t.loop = top->parent ? top->parent : top;
    t.iterations = t.body->node->calls;
  } else {
    t.loop = t.body;
    if (model_calls > 0 && model_calls < t.iterations) t.iterations = model_calls;
  }
  t.feeders = feeders(t);  // a generator of batches is the loading (e.g. `for x in batches():`)
  if (std::int64_t batches = loading_calls(t); batches > 0 && t.iterations > batches) {
    std::int64_t per_batch = (t.iterations + batches / 2) / batches;
    if (per_batch > 1) t.iterations /= per_batch;
  }
  return t;
}

// A collection window that opened inside the loop (SONDE_STEPS, SONDE_DELAY) recorded none of
// the frames open then: the rest of that pass's iterations sit at the thread's root, beside the
// loop frame's next call (a red-team run: 11 backward passes measured, "8 iterations", the
// other 3 "outside the loop"). Where the file says the window opened late, the phase entries
// directly under the root are iterations of the loop too; their count is the loop's phase's.
bool window_opened_late(const ProfileFile& file) {
  if (!file.has_table("notes")) return false;
  auto st = file.prepare("SELECT 1 FROM notes WHERE topic = 'window' LIMIT 1");
  return st.step();
}

std::vector<const Frame*> cut_off_entries(const Frame& root, const ThreadLoop& t) {
  std::vector<const Frame*> out;
  if (!t.loop->parent) return out;  // the root holds the loop: its entries are counted already
  for (const Frame& k : root.kids)
    if (k.phase() >= 0 && !on_path(&k, t.loop)) out.push_back(&k);
  return out;
}

// No data-loading entry (DataLoader, a "data" region) in the iterations: the user frames run
// every iteration before the forward, on the way from the loop frame to the body, are taken as
// loading the batch (mlp_numpy's sampler.next, an updater's iterator).
// A function named for the learning rate's schedule (nanoGPT's get_lr(it), a warmup()): it
// runs every iteration before the forward but loads nothing (it read as "taken as loading the
// batch", a red-team find).
bool schedules_the_rate(const CallNode& n) {
  for (const std::string& w : words_of(function_part(n.name)))
    if (w == "lr" || w == "learning" || w == "schedule" || w == "scheduler" || w == "warmup")
      return true;
  return false;
}

std::vector<const Frame*> guessed_loading(const ThreadLoop& t) {
  if (!t.feeders.empty()) return t.feeders;
  for (const Frame& k : t.loop->kids)
    if (in_iterations(k, t) && (k.role.phase == kIo || (k.below & bit(kIo)))) return {};
  std::vector<const Frame*> path;
  for (const Frame* f = t.body; f != t.loop; f = f->parent) path.push_back(f);
  path.push_back(t.loop);
  std::vector<const Frame*> out;
  for (const Frame* f : path) {
    for (const Frame& k : f->kids) {
      if (f == t.loop && !in_iterations(k, t)) continue;
      if (k.phase() == kForward || (k.below_entry & bit(kForward))) break;
      if (is_user_frame(*k.node) && k.role.phase < 0 && k.below == 0 &&
          k.node->calls >= t.iterations && !schedules_the_rate(*k.node))
        out.push_back(&k);
    }
  }
  return out;
}

std::string missing_reason(unsigned seen, const std::array<std::string, kPhaseCount>& example) {
  if ((seen & kFb) == 0 && (seen & bit(kUpdate)) == 0)
    return "no forward, backward or update entry in any thread (no PyTorch or Chainer entry "
           "point, no Python method named forward/backward/update, no region named so)";
  std::string found, missing;
  for (int p : {kForward, kBackward, kUpdate}) {
    std::string_view title = phase_classes()[p].title;
    if (seen & bit(p)) {
      found += fmt::format("{}{} ({})", found.empty() ? "" : ", ", title, example[p]);
    } else {
      missing += fmt::format("{}{}", missing.empty() ? "" : " or ", title);
    }
  }
  return fmt::format("found {}, but no {} entry, so no frame repeats forward and backward", found,
                     missing);
}

void collect_seen(const Frame& f, unsigned& seen, std::array<std::string, kPhaseCount>& example) {
  if (f.role.counts && !(seen & bit(f.role.phase))) {
    seen |= bit(f.role.phase);
    example[f.role.phase] = f.node->name;
  }
  for (const Frame& k : f.kids)
    if (!is_import_frame(*k.node)) collect_seen(k, seen, example);
}

}  // namespace

Breakdown compute_breakdown(const ProfileFile& file, const std::vector<PhaseMapping>& mappings) {
  LoadedProfile profile(file);
  return compute_breakdown(profile, mappings);
}

const Breakdown& LoadedProfile::breakdown() {
  if (!breakdown_) breakdown_ = std::make_shared<const Breakdown>(compute_breakdown(*this, {}));
  return *breakdown_;
}

Breakdown compute_breakdown(LoadedProfile& profile, const std::vector<PhaseMapping>& mappings) {
  Breakdown b;
  for (const PhaseClass& c : phase_classes())
    b.rows.push_back({std::string(c.id), std::string(c.title), 0, true, {}});
  b.run_ns = profile.metrics().run_ns();
  Accumulator acc{b, {}, {}, {}, {}};
  for (auto st = profile.file().prepare("SELECT node_id FROM engine_waits"); st.step();)
    acc.engine_waits.insert(st.int64(0));
  const std::vector<ThreadTree>& trees = profile.forest().busy;
  unsigned seen = 0;
  std::array<std::string, kPhaseCount> example;
  std::int64_t largest_body = -1, iterations_by_update = 0, cut_off_iterations = 0;
  bool any_without_update = false;
  bool late_window = window_opened_late(profile.file());
  // Each thread's rank, where the file holds several (sonde merge's, or a run's ranks).
  std::unordered_map<std::int64_t, std::int64_t> rank_of;
  if (auto st = profile.file().prepare("SELECT COUNT(DISTINCT rank) FROM process_ranks");
      st.step() && st.int64(0) > 1)
    for (auto rs = profile.file().prepare(
             "SELECT t.thread_id, pr.rank FROM threads t JOIN process_ranks pr USING (process_id)");
         rs.step();)
      rank_of[rs.int64(0)] = rs.int64(1);
  // Each thread's tree and loop first: where no thread trains, an evaluation or inference loop
  // is looked for instead (find_forward_loop).
  std::deque<Frame> roots;  // stable addresses: the loops point into them
  std::vector<ThreadLoop> loops;
  bool training = false;
  for (const ThreadTree& tree : trees) {
    Frame& root = roots.emplace_back();
    loops.emplace_back();
    if (tree.root.children.empty()) continue;  // an idle library thread measured nothing
    std::unordered_set<const CallNode*> stepping;
    collect_torch_steps(tree.root, mappings, stepping);
    annotate(root, tree.root, nullptr, mappings, stepping, b.not_updates);
    collect_seen(root, seen, example);
    loops.back() = find_loop(root);
    training |= loops.back().loop != nullptr;
  }
  // Forward entries alone: an update or a backward seen somewhere is a training program whose
  // loop sonde cannot find, not an evaluation.
  if (!training && !(seen & (bit(kBackward) | bit(kUpdate)))) {
    for (std::size_t i = 0; i < trees.size(); ++i)
      if (!trees[i].root.children.empty()) loops[i] = find_forward_loop(roots[i]);
    b.inference = std::any_of(loops.begin(), loops.end(),
                              [](const ThreadLoop& t) { return t.loop != nullptr; });
  }
  // The left-out threads' calls are asked only of a loop's candidates (say_outside_the_loop).
  bool any_loop =
      std::any_of(loops.begin(), loops.end(), [](const ThreadLoop& t) { return t.loop; });
  for (std::size_t i = 0; i < trees.size(); ++i) {
    const ThreadTree& tree = trees[i];
    if (tree.root.children.empty()) continue;
    const Frame& root = roots[i];
    const ThreadLoop& t = loops[i];
    std::int64_t measured = tree.root.incl_ns - tree.root.excl_ns;
    if (!t.loop) {
      ++b.left_out_threads;
      // Without their waits for work (thread_times.waited_s), which no figure counts: 24
      // DataLoader and pool threads read 207.9 s "measured" in a 27.7 s run (a red-team find).
      b.left_out_ns += std::max<std::int64_t>(0, measured - tree.waited_ns);
      if (tree.thread_name.starts_with("pt_autograd_"))
        acc.mark_subtree(root, LoopNodes::kAutograd);
      std::vector<const CallNode*> todo;
      if (any_loop) todo.push_back(&tree.root);
      while (!todo.empty()) {
        const CallNode* n = todo.back();
        todo.pop_back();
        if (n->routine_id != 0) b.left_out_calls[n->routine_id] += n->calls;
        for (const CallNode& k : n->children) todo.push_back(&k);
      }
      continue;
    }
    ++b.threads;
    any_without_update |= t.without_update;
    // Kept apart from t.iterations, which tells the loop frame's kids run every iteration.
    std::vector<const Frame*> cut_off;
    std::int64_t cut_off_here = 0;
    if (late_window) {
      cut_off = cut_off_entries(root, t);
      std::array<std::int64_t, kPhaseCount> calls{};
      for (const Frame* k : cut_off) count_entries(*k, calls);
      cut_off_here = calls[t.counted];
      if (t.counted == kUpdate && t.optimizers > 1) cut_off_here /= t.optimizers;
      cut_off_iterations += cut_off_here;
    }
    b.iterations += t.iterations + cut_off_here;
    if (auto r = rank_of.find(tree.thread_id); r != rank_of.end())
      b.rank_iterations[r->second] += t.iterations + cut_off_here;
    if (t.counted == kUpdate) iterations_by_update += t.iterations + cut_off_here;
    if (t.body->node->incl_ns > largest_body) {
      largest_body = t.body->node->incl_ns;
      b.loop = t.loop->node->name;
      b.body = t.body->node->name;
      b.iterations_from = std::string(phase_classes()[t.counted].id);
      if (t.bodies > 1)
        b.notes.push_back(
            fmt::format("{} loops found in one thread; the breakdown is of the "
                        "longest, in {}",
                        t.bodies, b.body));
    }
    if (t.optimizers > 1)
      b.notes.push_back(
          fmt::format("t_u: {} optimizers (torch.optim) built before the loop each "
                      "step once per iteration: iterations = optimizer steps / {}",
                      t.optimizers, t.optimizers));
    b.threads_ns += tree.root.incl_ns;
    b.unmeasured_ns += tree.root.excl_ns;
    std::int64_t in_loop = 0;
    if (t.loop->parent) {  // a thread root's own time is unmeasured, not the loop's
      b.other_ns += t.loop->node->excl_ns;
      in_loop += t.loop->node->excl_ns;
      acc.mark(*t.loop->node, LoopNodes::kOther);
    }
    acc.nodes.iterations[tree.thread_id] = t.iterations + cut_off_here;
    acc.loading = guessed_loading(t);
    acc.iterations = b.inference ? 0 : t.iterations;
    acc.evaluation_ns = 0;
    for (const Frame* k : t.feeders.empty() ? acc.loading : std::vector<const Frame*>{})
      b.notes.push_back(
          fmt::format("t_io: {} runs every iteration before the forward and is "
                      "taken as loading the batch (no DataLoader or data region)",
                      k->node->name));
    for (const Frame& k : t.loop->kids) {
      if (!in_iterations(k, t)) continue;
      acc.walk(k, -1);
      in_loop += k.node->incl_ns;
    }
    for (const Frame* k : cut_off) {
      acc.walk(*k, -1);
      in_loop += k->node->incl_ns;
    }
    in_loop -= acc.evaluation_ns;  // outside, as an evaluation called from the loop's frame
    b.outside_ns += measured - in_loop;
    {
      // Without the loop frame's own time: a module-level loop's frame holds the script's
      // set-up and teardown too (two 0.3 s sleeps read as loop time in sonde scaling, a
      // red-team find); the iterations' calls are its children.
      auto r = rank_of.find(tree.thread_id);
      std::int64_t& loop_ns = b.rank_loop_ns[r == rank_of.end() ? 0 : r->second];
      loop_ns = std::max(loop_ns, in_loop - (t.loop->parent ? t.loop->node->excl_ns : 0));
    }
  }
  if (b.threads == 0) {
    b.reason = missing_reason(seen, example);
    b.iterations = 0;
    return b;
  }
  b.found = true;
  if (b.rank_iterations.size() < 2) b.rank_iterations.clear();
  for (const auto& [name, figures] : acc.evaluations)
    b.notes.push_back(fmt::format(
        "{} ({} calls) reaches the model's forward with no backward or update, in only some "
        "iterations or with batches of its own: an evaluation ({:.3f} s), counted outside the "
        "iterations, not in t_f or t_io",
        name, figures.first, static_cast<double>(figures.second) / 1e9));
  if (cut_off_iterations > 0)
    b.notes.push_back(fmt::format(
        "{} of the iterations ran under a loop frame that was open when the collection window "
        "opened (not recorded): their phases sit at the thread's root and are counted here",
        cut_off_iterations));
  if (b.threads > 1 && iterations_by_update > 0 && iterations_by_update != b.iterations)
    b.iterations_from = "t_u, t_f";
  if (b.inference) {
    b.rows[kBackward].known = b.rows[kUpdate].known = false;
    b.notes.push_back(fmt::format(
        "no thread trains (no backward or update entry repeats): an evaluation or inference "
        "loop in {}, {} iterations of the model's forward; t_b and t_u do not apply",
        b.body, b.iterations));
  } else if (any_without_update) {
    b.rows[kUpdate].known = false;
    b.notes.push_back(
        "t_u cannot be told: no optimizer entry (Optimizer.step, an update method "
        "or region) repeats in the loop; an update written inline in the loop "
        "counts as other");
  }
  for (int p = 0; p < kPhaseCount; ++p) {
    std::vector<std::pair<std::string, std::int64_t>> rs(acc.opened[p].begin(),
                                                         acc.opened[p].end());
    std::stable_sort(rs.begin(), rs.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
    for (auto& [name, ns] : rs) b.rows[p].routines.push_back(name);
  }
  add_device_time(profile.file(), acc.nodes, b);
  for (int p : {kBackward, kUpdate}) {
    // What the update's entries found (zero_grad) is in other with the update written inline,
    // so that the rows still add up to the training threads' time.
    BreakdownRow& u = b.rows[p];
    if (u.known) continue;
    b.other_ns += u.time_ns;
    b.gpu_other_ns += u.gpu_ns;
    u.time_ns = u.gpu_ns = 0;
    u.routines.clear();
  }
  // Each thread running the loop says what it found: a pool's threads said it once each.
  std::vector<std::string> once;
  for (std::string& note : b.notes)
    if (std::find(once.begin(), once.end(), note) == once.end()) once.push_back(std::move(note));
  b.notes = std::move(once);
  return b;
}

}  // namespace sonde::analyzers
