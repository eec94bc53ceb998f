#include "store/store.hpp"

#include <fmt/format.h>

#include "schema_sql.hpp"  // generated from store_schema.sql
#include "store/schema_version.hpp"
#include "store/sqlite_db.hpp"

namespace sonde {

namespace {

constexpr const char* kFileSizeLimit = " (the file size limit, ulimit -f, was reached)";

// A failed step aborts the flush with SQLite's own message.
#define SONDE_STEP(stmt, what)                                                      \
  do {                                                                              \
    int rc_ = (stmt).step();                                                        \
    if (rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) {                                  \
      error = fmt::format("{}: {}", what, db.message());                            \
      return false;                                                                 \
    }                                                                               \
  } while (0)

bool check_prepared(std::initializer_list<const Statement*> all, Database& db,
                    std::string& error) {
  for (const Statement* s : all) {
    if (!s->ok()) {
      error = fmt::format("preparing statements: {}", db.message());
      return false;
    }
  }
  return true;
}

}  // namespace

bool Store::prepare(const std::string& path, std::string& error) {
  path_ = path;
  FileSizeSignalGuard no_sigxfsz;
  if (prepare_transaction(path, error)) return true;
  if (error.rfind(path, 0) != 0) error = fmt::format("{}: {}", path, error);
  if (no_sigxfsz.limit_reached()) error += kFileSizeLimit;
  return false;
}

bool Store::prepare_transaction(const std::string& path, std::string& error) {
  Database db;
  if (!db.open(path, true, error) || !db.exec("BEGIN IMMEDIATE", error)) {
    error = fmt::format("{}: {}", path, error);
    return false;
  }
  {
    Statement probe(db.handle(), "SELECT value FROM meta WHERE key = 'schema_version'");
    if (probe.ok()) {
      if (probe.step() == SQLITE_ROW) {
        int64_t v = probe.column_int(0);
        probe.reset();
        if (v != kSchemaVersion) {
          error = fmt::format("{} holds schema version {}, this sonde writes {}", path, v,
                              kSchemaVersion);
          db.exec("ROLLBACK", error);
          return false;
        }
        // Tables added to this version since the file was made (gpu_metrics, line_costs):
        // every statement of the schema is CREATE ... IF NOT EXISTS, so what is there stays.
        return db.exec(kSchemaSql, error) && db.exec("COMMIT", error);
      }
    } else {
      // No meta table: refuse a database that has tables of its own.
      Statement tables(db.handle(), "SELECT count(*) FROM sqlite_master");
      if (!tables.ok() || tables.step() != SQLITE_ROW) {
        error = fmt::format("{} is not a SQLite database: {}", path, db.message());
        return false;
      }
      int64_t n = tables.column_int(0);
      tables.reset();
      if (n > 0) {
        error = fmt::format("{} is a SQLite database but not a sonde profile", path);
        std::string ignored;
        db.exec("ROLLBACK", ignored);
        return false;
      }
    }
  }
  if (!db.exec(kSchemaSql, error)) return false;
  std::string meta = fmt::format(
      "INSERT OR IGNORE INTO meta VALUES ('schema_version', '{}'), ('created_by', 'sonde {}')",
      kSchemaVersion, SONDE_VERSION);
  if (!db.exec(meta.c_str(), error)) return false;
  return db.exec("COMMIT", error);
}

void Store::forget_process() {
  process_id_ = 0;
  threads_.clear();
}

bool Store::write(const FlushData& data, RoutineRegistry& registry, std::string& error) {
  // A failed flush rolls its transaction back, so the row ids it learned must be forgotten too.
  int64_t run_id = run_id_, process_id = process_id_;
  size_t routines = routine_ids_.size();
  auto threads = threads_;
  auto counters = counter_ids_;
  {
    FileSizeSignalGuard no_sigxfsz;
    if (write_transaction(data, registry, error)) return true;
    if (no_sigxfsz.limit_reached()) error += kFileSizeLimit;
  }
  run_id_ = run_id;
  process_id_ = process_id;
  routine_ids_.resize(routines);
  threads_ = std::move(threads);
  counter_ids_ = std::move(counters);
  return false;
}

bool Store::write_transaction(const FlushData& data, RoutineRegistry& registry,
                              std::string& error) {
  Database db;
  if (!db.open(path_, false, error)) return false;
  if (!db.exec("BEGIN IMMEDIATE", error)) return false;
  return write_run(db, *data.run, error) && write_process(db, *data.process, error) &&
         write_routines(db, registry, error) && write_counter_names(db, data, error) &&
         write_threads(db, data, error) && write_comm(db, data, error) &&
         write_gpu(db, data, error) && write_notes_and_info(db, data, error) &&
         write_process_state(db, data, error) && db.exec("COMMIT", error);
}

bool Store::write_run(Database& db, const RunInfo& r, std::string& error) {
  if (run_id_ != 0) return true;
  sqlite3* h = db.handle();
  Statement find(h, "SELECT run_id FROM runs WHERE uuid = ?");
  if (!check_prepared({&find}, db, error)) return false;
  find.bind(1, r.uuid);
  if (find.step() == SQLITE_ROW) {  // another process of the run came first
    run_id_ = find.column_int(0);
    find.reset();
    return true;
  }
  Statement ins(h,
                "INSERT INTO runs (uuid, started_ns, command, host, cpu_model, cores, "
                "affinity_cores, mode) VALUES (?,?,?,?,?,?,?,?)");
  if (!check_prepared({&ins}, db, error)) return false;
  ins.bind(1, r.uuid).bind(2, r.started_ns).bind(3, r.command).bind(4, r.host);
  ins.bind(5, r.cpu_model).bind(6, int64_t(r.cores)).bind(7, int64_t(r.affinity_cores));
  ins.bind(8, r.mode);
  SONDE_STEP(ins, "recording the run");
  run_id_ = sqlite3_last_insert_rowid(h);
  return true;
}

bool Store::write_process(Database& db, const ProcessInfo& p, std::string& error) {
  if (process_id_ != 0) return true;
  sqlite3* h = db.handle();
  Statement ins(h,
                "INSERT INTO processes (run_id, pid, ppid, origin, parent_process_id, "
                "command, started_ns) VALUES (?,?,?,?,?,?,?)");
  if (!check_prepared({&ins}, db, error)) return false;
  ins.bind(1, run_id_).bind(2, int64_t(p.pid)).bind(3, int64_t(p.ppid)).bind(4, p.origin);
  if (p.parent_process_id > 0) ins.bind(5, p.parent_process_id); else ins.bind_null(5);
  ins.bind(6, p.command).bind(7, p.started_ns);
  SONDE_STEP(ins, "recording the process");
  process_id_ = sqlite3_last_insert_rowid(h);
  threads_.clear();
  return true;
}

bool Store::write_routines(Database& db, RoutineRegistry& registry, std::string& error) {
  // The table is shared by all processes of the file, so look up before inserting.
  std::vector<const Routine*> added = registry.since(routines_.size());
  routines_.insert(routines_.end(), added.begin(), added.end());
  if (routine_ids_.size() >= routines_.size()) return true;
  // One statement for a new routine; the lookup only when another process inserted it.
  sqlite3* h = db.handle();
  Statement ins(h,
                "INSERT INTO routines (name, kind, library, file, line) VALUES (?,?,?,?,?) "
                "ON CONFLICT DO NOTHING RETURNING routine_id");
  Statement find(h,
                 "SELECT routine_id FROM routines WHERE name=? AND kind=? AND library=? "
                 "AND file=? AND line=?");
  if (!check_prepared({&ins, &find}, db, error)) return false;
  for (size_t i = routine_ids_.size(); i < routines_.size(); ++i) {
    const Routine& r = *routines_[i];
    for (Statement* s : {&ins, &find}) {
      s->bind(1, r.name).bind(2, r.kind).bind(3, r.library).bind(4, r.file);
      s->bind(5, int64_t(r.line));
    }
    Statement* source = &ins;
    int rc = ins.step();
    if (rc == SQLITE_DONE) {
      source = &find;
      rc = find.step();
    }
    if (rc != SQLITE_ROW) {
      error = fmt::format("recording routines: {}", db.message());
      return false;
    }
    routine_ids_.push_back(source->column_int(0));
    source->reset();
    if (source == &ins) find.reset();
  }
  return true;
}

bool Store::write_counter_names(Database& db, const FlushData& data, std::string& error) {
  if (counter_ids_.size() == data.counter_events.size()) return true;
  counter_ids_.clear();
  Statement ins(db.handle(), "INSERT INTO counters (name, source) VALUES (?, 'papi') "
                             "ON CONFLICT (name) DO UPDATE SET source = source RETURNING counter_id");
  if (!check_prepared({&ins}, db, error)) return false;
  for (const std::string& name : data.counter_events) {
    ins.bind(1, name);
    if (ins.step() != SQLITE_ROW) {
      error = fmt::format("recording counters: {}", db.message());
      return false;
    }
    counter_ids_.push_back(ins.column_int(0));
    ins.reset();
  }
  return true;
}

// The statements of a thread's rows, prepared once per flush for all its threads.
struct Store::ThreadStatements {
  explicit ThreadStatements(sqlite3* h)
      : ins_thread(h,
                   "INSERT INTO threads (process_id, seq, tid, started_ns, ended_ns, ftz, daz, "
                   "name) VALUES (?,?,?,?,?,?,?,NULLIF(?, ''))"),
        upd_thread(h,
                   "UPDATE threads SET started_ns=?, ended_ns=?, ftz=?, daz=?, "
                   "name=COALESCE(NULLIF(?, ''), name) WHERE thread_id=?"),
        ins_node(h,
                 "INSERT INTO nodes (thread_id, parent_id, routine_id, depth, recursive, calls, "
                 "subrs, incl_ns, excl_ns, flops, bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?)"),
        upd_node(h,
                 "UPDATE nodes SET calls=?, subrs=?, incl_ns=?, excl_ns=?, flops=?, bytes=? "
                 "WHERE node_id=?"),
        counter(h,
                "INSERT OR REPLACE INTO node_counters (node_id, counter_id, incl, excl) "
                "VALUES (?,?,?,?)"),
        ins_shape(h,
                  "INSERT INTO shapes (node_id, call_site, m, n, k, trans_a, trans_b, dtype, "
                  "batch, calls, time_ns, flops, bytes, threads) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        upd_shape(h,
                  "UPDATE shapes SET calls=?, time_ns=?, flops=?, bytes=? WHERE shape_id=?"),
        ins_event(h,
                  "INSERT INTO trace_events (thread_id, node_id, start_ns, end_ns) "
                  "VALUES (?,?,?,?)"),
        drops(h, "INSERT OR REPLACE INTO trace_drops (thread_id, dropped) VALUES (?,?)"),
        line(h,
             "INSERT OR REPLACE INTO line_costs (thread_id, routine_id, line, hits, time_ns) "
             "VALUES (?,?,?,?,?)"),
        timing(h,
               "INSERT OR REPLACE INTO node_timing (node_id, warm_calls, sampled_calls, "
               "timed_calls, incl_se_ns) VALUES (?,?,?,?,?)") {}
  bool ok(Database& db, std::string& error) const {
    return check_prepared({&ins_thread, &upd_thread, &ins_node, &upd_node, &counter, &ins_shape,
                           &upd_shape, &ins_event, &drops, &line, &timing},
                          db, error);
  }
  Statement ins_thread, upd_thread, ins_node, upd_node, counter, ins_shape, upd_shape, ins_event,
      drops, line, timing;
};

bool Store::write_threads(Database& db, const FlushData& data, std::string& error) {
  ThreadStatements st(db.handle());
  if (!st.ok(db, error)) return false;
  for (const ThreadSnapshot& t : data.threads) {
    ThreadIds& ids = threads_[t.state];
    if (!write_thread_row(db, st, t, ids, error) || !write_nodes(db, st, t, ids, error) ||
        !write_node_counters(db, st, t, ids, error) || !write_node_timing(db, st, t, ids, error) ||
        !write_shapes(db, st, t, ids, error) ||
        !write_events_and_lines(db, st, t, ids, error) || !write_samples(db, t, ids, error)) {
      return false;
    }
  }
  return true;
}

bool Store::write_thread_row(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                             ThreadIds& ids, std::string& error) {
  if (ids.thread_id == 0) {
    Statement& ins = st.ins_thread;
    ins.bind(1, process_id_).bind(2, int64_t(t.seq)).bind(3, int64_t(t.tid));
    ins.bind(4, t.started_ns);
    if (t.ended_ns) ins.bind(5, *t.ended_ns); else ins.bind_null(5);
    ins.bind(6, int64_t(t.ftz)).bind(7, int64_t(t.daz)).bind(8, t.name);
    SONDE_STEP(ins, "recording a thread");
    ids.thread_id = sqlite3_last_insert_rowid(db.handle());
    return true;
  }
  Statement& upd = st.upd_thread;
  upd.bind(1, t.started_ns);
  if (t.ended_ns) upd.bind(2, *t.ended_ns); else upd.bind_null(2);
  upd.bind(3, int64_t(t.ftz)).bind(4, int64_t(t.daz)).bind(5, t.name);
  upd.bind(6, ids.thread_id);
  SONDE_STEP(upd, "updating a thread");
  return true;
}

bool Store::write_nodes(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                        ThreadIds& ids, std::string& error) {
  ids.nodes.resize(t.nodes.size(), 0);
  for (const NodeRow& n : t.nodes) {
    // Inherited across fork and never run here. A generator first resumed under this path
    // has no call of its own but has time, and children that need it as their parent.
    if (n.calls == 0 && n.incl_ns == 0 && n.index != 0) continue;
    int64_t& id = ids.nodes[n.index];
    if (id != 0) {
      Statement& upd = st.upd_node;
      upd.bind(1, int64_t(n.calls)).bind(2, int64_t(n.subrs)).bind(3, n.incl_ns);
      upd.bind(4, n.excl_ns).bind(5, double(n.flops)).bind(6, double(n.bytes));
      upd.bind(7, id);
      SONDE_STEP(upd, "updating the call tree");
      continue;
    }
    Statement& ins = st.ins_node;
    ins.bind(1, ids.thread_id);
    if (n.index == 0 || ids.nodes[n.parent] == 0) {
      ins.bind_null(2);
    } else {
      ins.bind(2, ids.nodes[n.parent]);
    }
    ins.bind(3, routine_ids_.at(n.routine)).bind(4, int64_t(n.depth));
    ins.bind(5, int64_t(n.recursive)).bind(6, int64_t(n.calls)).bind(7, int64_t(n.subrs));
    ins.bind(8, n.incl_ns).bind(9, n.excl_ns).bind(10, double(n.flops));
    ins.bind(11, double(n.bytes));
    SONDE_STEP(ins, "writing the call tree");
    id = sqlite3_last_insert_rowid(db.handle());
  }
  return true;
}

bool Store::write_node_counters(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                                const ThreadIds& ids, std::string& error) {
  size_t counted = std::min<size_t>(counter_ids_.size(), t.counters);
  if (counted == 0) return true;
  for (const NodeRow& n : t.nodes) {
    if (ids.nodes[n.index] == 0) continue;
    const uint64_t *incl = t.counter_incl(n.index), *excl = t.counter_excl(n.index);
    for (size_t c = 0; c < counted; ++c) {
      st.counter.bind(1, ids.nodes[n.index]).bind(2, counter_ids_[c]);
      st.counter.bind(3, double(incl[c])).bind(4, double(excl[c]));
      SONDE_STEP(st.counter, "writing counters");
    }
  }
  return true;
}

bool Store::write_node_timing(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                              const ThreadIds& ids, std::string& error) {
  for (const NodeRow& n : t.nodes) {
    if (n.timed == 0 || ids.nodes[n.index] == 0) continue;
    st.timing.bind(1, ids.nodes[n.index]).bind(2, int64_t(n.calls - n.sampled));
    st.timing.bind(3, int64_t(n.sampled)).bind(4, int64_t(n.timed)).bind(5, n.incl_se_ns);
    SONDE_STEP(st.timing, "writing adaptive timing");
  }
  return true;
}

bool Store::write_shapes(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                         ThreadIds& ids, std::string& error) {
  static const char* const kDtypes[] = {"", "f32", "f64", "c64", "c128", "f16", "bf16"};
  static_assert(std::size(kDtypes) == size_t(DType::kBF16) + 1, "one name per DType");
  ids.shapes.resize(t.shapes.size(), 0);
  for (const ShapeRow& s : t.shapes) {
    int64_t& id = ids.shapes[s.index];
    if (id != 0) {
      Statement& upd = st.upd_shape;
      upd.bind(1, int64_t(s.calls)).bind(2, s.time_ns).bind(3, double(s.flops));
      upd.bind(4, double(s.bytes)).bind(5, id);
      SONDE_STEP(upd, "updating shapes");
      continue;
    }
    if (s.calls == 0 || ids.nodes[s.node] == 0) continue;
    char ta[2] = {s.shape.trans_a, 0}, tb[2] = {s.shape.trans_b, 0};
    Statement& ins = st.ins_shape;
    ins.bind(1, ids.nodes[s.node]).bind(2, s.call_site).bind(3, s.shape.m).bind(4, s.shape.n);
    ins.bind(5, s.shape.k).bind(6, std::string_view(ta)).bind(7, std::string_view(tb));
    ins.bind(8, std::string_view(kDtypes[int(s.shape.dtype)]));
    ins.bind(9, s.shape.batch).bind(10, int64_t(s.calls)).bind(11, s.time_ns);
    ins.bind(12, double(s.flops)).bind(13, double(s.bytes));
    if (s.shape.threads > 0) ins.bind(14, int64_t(s.shape.threads));
    else ins.bind_null(14);
    SONDE_STEP(ins, "writing shapes");
    id = sqlite3_last_insert_rowid(db.handle());
  }
  return true;
}

bool Store::write_events_and_lines(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                                   const ThreadIds& ids, std::string& error) {
  for (const TraceRow& e : t.events) {
    if (ids.nodes[e.node] == 0) continue;
    st.ins_event.bind(1, ids.thread_id).bind(2, ids.nodes[e.node]).bind(3, e.start_ns);
    st.ins_event.bind(4, e.end_ns);
    SONDE_STEP(st.ins_event, "writing trace events");
  }
  for (const LineRow& l : t.lines) {
    if (l.hits == 0) continue;
    st.line.bind(1, ids.thread_id).bind(2, routine_ids_.at(l.routine)).bind(3, int64_t(l.line));
    st.line.bind(4, int64_t(l.hits)).bind(5, l.time_ns);
    SONDE_STEP(st.line, "writing line costs");
  }
  if (t.dropped_events > 0) {
    st.drops.bind(1, ids.thread_id).bind(2, int64_t(t.dropped_events));
    SONDE_STEP(st.drops, "counting dropped events");
  }
  return true;
}

bool Store::write_gpu(Database& db, const FlushData& data, std::string& error) {
  if (data.gpu.empty()) return true;
  sqlite3* h = db.handle();
  Statement gpu(h,
                "INSERT INTO gpu_activity (process_id, node_id, kind, name, device, stream, "
                "start_ns, end_ns, bytes, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
                "registers, shared_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  Statement metric(h, "INSERT INTO gpu_metrics (activity_id, metric, value) VALUES (?,?,?)");
  if (!check_prepared({&gpu, &metric}, db, error)) return false;
  for (const GpuRow& g : data.gpu) {
    // The launching call path: written above in this same transaction, or resolved to its
    // row when the launching thread's state was freed.
    int64_t node_id = g.node_id;
    if (g.thread != nullptr) {
      const std::vector<int64_t>& ids = node_ids(g.thread);
      node_id = g.node < ids.size() ? ids[g.node] : 0;
    }
    gpu.bind(1, process_id_);
    if (node_id != 0) gpu.bind(2, node_id); else gpu.bind_null(2);
    gpu.bind(3, std::string_view(g.kind)).bind(4, g.name).bind(5, g.device).bind(6, g.stream);
    gpu.bind(7, g.start_ns).bind(8, g.end_ns);
    if (g.bytes >= 0) gpu.bind(9, g.bytes); else gpu.bind_null(9);
    bool kernel = g.registers >= 0;
    for (int i = 0; i < 3; ++i) {
      if (kernel) gpu.bind(10 + i, int64_t(g.grid[i])); else gpu.bind_null(10 + i);
      if (kernel) gpu.bind(13 + i, int64_t(g.block[i])); else gpu.bind_null(13 + i);
    }
    if (kernel) gpu.bind(16, int64_t(g.registers)).bind(17, int64_t(g.shared_bytes));
    else gpu.bind_null(16).bind_null(17);
    SONDE_STEP(gpu, "writing GPU activity");
    int64_t activity_id = sqlite3_last_insert_rowid(h);
    for (const auto& [name, value] : g.metrics) {
      metric.bind(1, activity_id).bind(2, name).bind(3, value);
      SONDE_STEP(metric, "writing GPU metrics");
    }
  }
  return true;
}

bool Store::write_notes_and_info(Database& db, const FlushData& data, std::string& error) {
  sqlite3* h = db.handle();
  Statement note(h,
                 "INSERT OR IGNORE INTO notes (run_id, process_id, severity, topic, message) "
                 "VALUES (?,?,?,?,?)");
  Statement info(h,
                 "INSERT OR REPLACE INTO run_info (run_id, process_id, key, value) "
                 "VALUES (?,?,?,?)");
  if (!check_prepared({&note, &info}, db, error)) return false;
  for (const Note& n : data.notes) {
    note.bind(1, run_id_).bind(2, process_id_).bind(3, n.severity).bind(4, n.topic);
    note.bind(5, n.message);
    SONDE_STEP(note, "writing notes");
  }
  for (const auto& [key, value] : data.info) {
    info.bind(1, run_id_).bind(2, process_id_).bind(3, key).bind(4, value);
    SONDE_STEP(info, "writing run information");
  }
  if (data.peaks.empty()) return true;
  Statement peak(h, "INSERT OR REPLACE INTO peaks (run_id, resource, threads, value, source) "
                    "VALUES (?,?,?,?,?)");
  if (!check_prepared({&peak}, db, error)) return false;
  for (const Peak& p : data.peaks) {
    peak.bind(1, run_id_).bind(2, p.resource).bind(3, int64_t(p.threads)).bind(4, p.value);
    peak.bind(5, p.source);
    SONDE_STEP(peak, "writing peaks");
  }
  return true;
}

static const char* comm_kind_name(CommKind k) {
  switch (k) {
    case CommKind::kP2P:
      return "p2p";
    case CommKind::kCollective:
      return "collective";
    case CommKind::kWait:
      return "wait";
    case CommKind::kSetup:
      return "setup";
    case CommKind::kRma:
      return "rma";
    case CommKind::kNone:
      break;
  }
  return "none";
}

// comm_ops names the operation by its node's routine; the snapshot holds running totals.
bool Store::write_comm(Database& db, const FlushData& data, std::string& error) {
  sqlite3* h = db.handle();
  Statement op(h,
               "INSERT INTO comm_ops (node_id, op, kind, blocking, comm_size, bytes, calls, "
               "time_ns) SELECT n.node_id, r.name, ?, ?, ?, ?, ?, ? FROM nodes n JOIN routines r "
               "USING (routine_id) WHERE n.node_id = ? ON CONFLICT (node_id, op, comm_size, bytes) "
               "DO UPDATE SET calls = excluded.calls, time_ns = excluded.time_ns");
  Statement overlap(h,
                    "INSERT OR REPLACE INTO comm_overlap (thread_id, exposed_ns, overlapped_ns, "
                    "inflight_ns) VALUES (?,?,?,?)");
  if (!check_prepared({&op, &overlap}, db, error)) return false;
  for (const ThreadSnapshot& t : data.threads) {
    const ThreadIds& ids = threads_[t.state];
    for (const CommRow& c : t.comms) {
      if (c.calls == 0 || c.node >= ids.nodes.size() || ids.nodes[c.node] == 0) continue;
      op.bind(1, std::string_view(comm_kind_name(c.comm.kind)));
      op.bind(2, int64_t(c.comm.blocking)).bind(3, int64_t(c.comm.comm_size));
      op.bind(4, int64_t(c.bytes)).bind(5, int64_t(c.calls)).bind(6, c.time_ns);
      op.bind(7, ids.nodes[c.node]);
      SONDE_STEP(op, "recording communication");
    }
    if (t.comm_overlap && ids.thread_id != 0) {
      overlap.bind(1, ids.thread_id).bind(2, t.comm_overlap->exposed_ns);
      overlap.bind(3, t.comm_overlap->overlapped_ns).bind(4, t.comm_overlap->inflight_ns);
      SONDE_STEP(overlap, "recording communication overlap");
    }
  }
  return true;
}

bool Store::write_process_state(Database& db, const FlushData& data, std::string& error) {
  // The rank is known for certain only once MPI_Init returned: written at every flush.
  Statement proc(db.handle(),
                 "UPDATE processes SET last_flush_ns=?, flushes=flushes+1, ended_ns=?, "
                 "end_reason=?, host=?, rank=?, world_size=?, local_rank=? WHERE process_id=?");
  if (!check_prepared({&proc}, db, error)) return false;
  proc.bind(1, data.now_ns);
  if (data.end_reason) {
    proc.bind(2, data.now_ns).bind(3, std::string_view(data.end_reason));
  } else {
    proc.bind_null(2).bind_null(3);
  }
  const ProcessInfo& p = *data.process;
  proc.bind(4, p.host);
  auto bind_rank = [&](int column, int value) {
    if (p.rank >= 0 && value >= 0)
      proc.bind(column, int64_t(value));
    else
      proc.bind_null(column);
  };
  bind_rank(5, p.rank);
  bind_rank(6, p.world_size);
  bind_rank(7, p.local_rank);
  proc.bind(8, process_id_);
  SONDE_STEP(proc, "updating the process");
  return true;
}

}  // namespace sonde
