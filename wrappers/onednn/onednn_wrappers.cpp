// Expands onednn_routines.def into the interposed oneDNN entry point and the routines it reports
// (one per primitive kind and direction), and describes the oneDNN in use for the run's metadata.
// libsonde is not linked against libdnnl: every oneDNN function called here is looked up at its
// first use, so programs without oneDNN load sonde as before.
#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstddef>
#include <string>

#include "../intercept.hpp"
#include "onednn_models.hpp"
#include "sonde/process_hooks.hpp"

namespace {

using sonde::onednn::Dir;

// Kinds 0..kKinds-1 are the public ones of oneDNN 2.x; higher (internal) kinds are reported as
// dnnl:primitive.
constexpr size_t kKinds = size_t(dnnl_softmax_v2) + 1;
constexpr size_t kDirs = size_t(Dir::kCount);
std::array<std::array<sonde::RoutineId, kDirs>, kKinds> g_kind_ids{};
sonde::RoutineId g_other_id = 0;  // dnnl:primitive

// The query functions, resolved once. The cost model reads dnnl_memory_desc_t as a struct, which
// it is only in oneDNN 2.x (3.0 made it opaque): with another major version the calls are still
// counted and timed, as dnnl:primitive, without a cost.
struct Api {
  SONDE_REAL_FUNCTION(get_pd, dnnl_primitive_get_primitive_desc);
  SONDE_REAL_FUNCTION(query, dnnl_primitive_desc_query);
  SONDE_REAL_FUNCTION(query_md, dnnl_primitive_desc_query_md);
  SONDE_REAL_FUNCTION(version_of, dnnl_version);
  const dnnl_version_t* version = nullptr;
  bool usable = false;
  // The OpenMP runtime's omp_get_max_threads as libdnnl sees it (its own lookup scope), when
  // libdnnl is built on OpenMP; sequential builds run on the calling thread.
  int (*omp_max_threads)() = nullptr;
  bool sequential = false;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    if (r.version_of) r.version = r.version_of();
    r.usable = r.get_pd && r.query && r.query_md && r.version && r.version->major == 2;
    if (r.version && r.version->cpu_runtime == DNNL_RUNTIME_OMP)
      r.omp_max_threads = reinterpret_cast<int (*)()>(
          sonde::symbol_beside(reinterpret_cast<const void*>(r.get_pd), "omp_get_max_threads"));
    r.sequential = r.version && r.version->cpu_runtime == DNNL_RUNTIME_SEQ;
    return r;
  }();
  return a;
}

}  // namespace

namespace sonde::onednn {

// What the choose step found, handed on to the cost model.
struct Choice {
  RoutineId id;
  const_dnnl_primitive_desc_t pd;
  dnnl_primitive_kind_t kind;
  Dir dir;
};

inline Choice choose(const_dnnl_primitive_t primitive) {
  Choice c{g_other_id, nullptr, dnnl_undefined_primitive, Dir::kNone};
  const Api& a = api();
  if (!a.usable || primitive == nullptr || a.get_pd(primitive, &c.pd) != dnnl_success ||
      a.query(c.pd, dnnl_query_primitive_kind, 0, &c.kind) != dnnl_success ||
      size_t(c.kind) >= kKinds) {
    c.pd = nullptr;
    return c;
  }
  const auto& ids = g_kind_ids[size_t(c.kind)];
  if (ids[size_t(Dir::kNone)] == 0) {  // the kind has directions: ask which
    dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
    if (a.query(c.pd, dnnl_query_prop_kind, 0, &prop) == dnnl_success) c.dir = direction(prop);
  }
  RoutineId id = ids[size_t(c.dir)];
  if (id != 0) c.id = id;
  return c;
}

// The first present descriptor of `q` at index 0, else of its diff counterpart.
inline const dnnl_memory_desc_t* tensor(const Api& a, const_dnnl_primitive_desc_t pd,
                                        dnnl_query_t q, dnnl_query_t diff_q) {
  const dnnl_memory_desc_t* md = a.query_md(pd, q, 0);
  return present(md) ? md : a.query_md(pd, diff_q, 0);
}

// Sum of every descriptor `q` names (concat, sum and rnn have several), index by index.
inline uint64_t all_bytes(const Api& a, const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
  constexpr int kMaxIndex = 64;
  uint64_t b = 0;
  for (int i = 0; i < kMaxIndex; ++i) {
    const dnnl_memory_desc_t* md = a.query_md(pd, q, i);
    if (!present(md)) break;
    b += bytes_of(md);
  }
  return b;
}

inline CallCost measure(const Choice& c) {
  if (c.pd == nullptr) return CallCost{};
  const Api& a = api();
  Tensors t;
  t.src = tensor(a, c.pd, dnnl_query_src_md, dnnl_query_diff_src_md);
  t.weights = tensor(a, c.pd, dnnl_query_weights_md, dnnl_query_diff_weights_md);
  t.dst = tensor(a, c.pd, dnnl_query_dst_md, dnnl_query_diff_dst_md);
  for (dnnl_query_t q : {dnnl_query_src_md, dnnl_query_diff_src_md, dnnl_query_weights_md,
                         dnnl_query_diff_weights_md, dnnl_query_dst_md, dnnl_query_diff_dst_md}) {
    t.bytes += all_bytes(a, c.pd, q);
  }
  CallCost result = cost(c.kind, c.dir, t);
  // The threads oneDNN runs the primitive with: OpenMP's setting on the calling thread (what
  // torch.set_num_threads sets); unknown (0) for the TBB and threadpool runtimes.
  int threads = a.sequential ? 1 : a.omp_max_threads ? a.omp_max_threads() : 0;
  result.shape.threads = threads > 0 && threads <= 65535 ? uint16_t(threads) : 0;
  return result;
}

}  // namespace sonde::onednn

namespace {

namespace onednn = sonde::onednn;

#define SONDE_TABLE "onednn/onednn_routines.def"  // relative to wrapper_table.inc
#define SONDE_DNNL(NAME, ...) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_DNNL
#undef SONDE_TABLE

void describe_onednn(sonde::InfoEmit emit, void* ctx) {
  const sonde::RealSymbol& execute = g_real[size_t(Entry::dnnl_primitive_execute)];
  if (!execute.resolved()) return;  // the program never ran a oneDNN primitive
  emit("onednn.library", sonde::object_path_of(execute.any()).c_str(), ctx);
  const Api& a = api();
  if (a.version == nullptr) return;
  std::string v = std::to_string(a.version->major) + "." + std::to_string(a.version->minor) + "." +
                  std::to_string(a.version->patch);
  emit("onednn.version", v.c_str(), ctx);
  if (!a.usable) {
    sonde::add_note("onednn-version",
                    "oneDNN is not version 2.x: its primitives are recorded as dnnl:primitive, "
                    "timed but without FLOPs, bytes or shapes");
  }
}

__attribute__((constructor(200))) void register_onednn() {
  sonde::RoutineBatch batch;
  constexpr const char* kKind = sonde::kinds::kOnednn;
  constexpr const char* kLibrary = "dnnl";
  g_other_id = sonde::register_routine({"dnnl:primitive", kKind, kLibrary});
#define SONDE_DNNL_ROUTINE(KIND, DIR, NAME) \
  g_kind_ids[size_t(KIND)][size_t(Dir::DIR)] = sonde::register_routine({NAME, kKind, kLibrary});
#include "onednn_routines.def"
#undef SONDE_DNNL_ROUTINE
  sonde::register_info_provider(describe_onednn);
}

}  // namespace

// Nested primitives and the BLAS a primitive may call are part of the primitive: kSuppress.
#define SONDE_DNNL(NAME, RET, PARAMS, ARGS, CHOOSE, MODEL) \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kSuppress, NAME, RET, PARAMS, ARGS, CHOOSE, MODEL)
#include "onednn_routines.def"
#undef SONDE_DNNL
