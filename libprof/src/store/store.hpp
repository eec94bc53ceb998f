// Writes snapshots into the SQLite profile. One connection per flush, opened and closed inside
// it, so no SQLite state is ever carried across fork and a crash leaves at worst a hot journal
// that the next reader rolls back.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/routine_registry.hpp"
#include "core/snapshot.hpp"
#include "gpu/gpu_backend.hpp"
#include "store/peaks.hpp"
#include "store/sqlite_db.hpp"

namespace sonde {

// The name a DType is stored under (shapes.dtype, routines.dtype); "" for kNone.
const char* dtype_name(DType dtype);

class NodeStatements;

struct RunInfo {
  std::string uuid, command, host, cpu_model, mode;
  int64_t started_ns = 0;
  int cores = 0, affinity_cores = 0;
};

struct ProcessInfo {
  pid_t pid = 0, ppid = 0;
  std::string origin;             // root, fork, exec, child
  int64_t parent_process_id = 0;  // 0: unknown
  std::string command;
  int64_t started_ns = 0;
  std::string host;
  int rank = -1, world_size = -1, local_rank = -1;  // -1: not a ranked process, or unknown
};

struct Note {
  std::string severity, topic, message;
  // Where the message is a count ("246 calls deeper than ..."), the words every version of it
  // holds, whatever the count ("calls deeper than"): written, it replaces the process's notes of
  // the topic that hold them, so a count that grows from flush to flush is one note of its
  // latest value. Empty: not a count.
  std::string count_of;
};

struct FlushData {
  const RunInfo* run;
  const ProcessInfo* process;
  std::vector<ThreadSnapshot> threads;  // their shapes' call sites named (core/call_sites.hpp)
  std::vector<Note> notes;
  std::vector<std::pair<std::string, std::string>> info;  // run_info for this process
  int64_t now_ns = 0;
  const char* end_reason = nullptr;         // set on the last flush of a process image
  std::vector<std::string> counter_events;  // column order of the nodes' counters
  std::vector<Peak> peaks;                  // written once per process
  std::vector<GpuRow> gpu;                  // finished GPU activity since the last flush
};

// A profile file this process made, readable and writable by its owner whatever the umask: a
// `umask 0277` (files read-only by default) made it 0400, and every flush into it failed with
// "attempt to write a readonly database" (a red-team find; root writes regardless). The group's
// and others' bits stay as the umask left them.
void keep_owner_read_write(int fd);

// The blank profile (tables, indexes, meta rows) whole in a file of no name in `dir` (O_TMPFILE):
// its descriptor, or -1 where the file system cannot hold one or the write fails.
int open_blank_profile(const std::string& dir);
// That file given the name `path`, only where no file has it (linkat): 0, or the errno (EEXIST:
// the name is another's). A process killed before leaves no file, never a torn one.
int link_blank_profile(int fd, const std::string& path);

// How a process came by its output file (Runtime::output_path).
enum class OutputOrigin : uint8_t {
  kFound,         // there already, or another process's: checked, the schema made if missing
  kClaimedEmpty,  // made empty by this process (O_EXCL): the blank profile is written into it
  kLinkedBlank,   // made by linking in the blank profile (link_blank_profile): nothing to do
};

class Store {
 public:
  // Makes the file a profile where it is not one yet and checks that it is one otherwise, as
  // `origin` says it came. Returns false with a reason the user can act on.
  bool prepare(const std::string& path, std::string& error,
               OutputOrigin origin = OutputOrigin::kFound);
  bool write(const FlushData& data, RoutineRegistry& registry, std::string& error);
  // A thread's final state is written and the state freed: its address may be reused.
  void forget_thread(const ThreadState* t) { threads_.erase(t); }
  // The node_id of each of `t`'s nodes written so far (0: not written); empty if none.
  const HugeVector<int64_t>& node_ids(const ThreadState* t) const {
    static const auto* kNone = new HugeVector<int64_t>;  // never destroyed: flushes at exit
    auto it = threads_.find(t);
    return it != threads_.end() ? it->second.nodes : *kNone;
  }
  // Fork child: the parent's rows are not this process's.
  void forget_process();
  // The writes that follow stop waiting for the other writers of the run (and fail) once
  // `flag` is not 0; nullptr: they wait as long as the others make progress.
  void give_up_when(const std::atomic<int>* flag) { give_up_ = flag; }
  // The other writers' progress, as the writes that follow see it while they wait
  // (Database::report_progress_to).
  void report_progress_to(std::atomic<std::uint32_t>* count) { progress_ = count; }
  int64_t process_id() const { return process_id_; }
  // The last write failed for want of a descriptor that no raised limit could give, and was
  // not the last flush, whose write a child makes (store/writer_child.hpp): the runtime says
  // nothing of it, as the last flush writes what it held.
  bool waits_for_descriptors() const { return waits_for_descriptors_; }

 private:
  // One row of thread_routine_sums: a routine's nodes in one thread, summed.
  struct RoutineSums {
    int64_t calls = 0, subrs = 0, incl_ns = 0, excl_ns = 0;
    double flops = 0, bytes = 0;
    bool operator==(const RoutineSums&) const = default;
  };
  struct ThreadIds {
    int64_t thread_id = 0;
    HugeVector<int64_t> nodes;  // core/huge_pages.hpp, as the snapshot's rows
    std::vector<int64_t> shapes;
    // Per node, the calls and times last written: a node whose three are unchanged has nothing
    // new (its other figures only move with its calls or its time), so a flush rewrites only
    // what moved. The exclusive time is in the key although it moves with the inclusive: each
    // flush refines the clock's ns per tick, and one may round differently while the other
    // does not (a row left 1 ns behind the sums thread_routine_sums keeps, seen by CI).
    struct Written {
      uint64_t calls;
      int64_t incl_ns, excl_ns;
      bool operator==(const Written&) const = default;
    };
    HugeVector<Written> written;
    // Per comm and op-shape record (CommRow/OpShapeRow index), its calls and time last
    // written: a flush rewrote every row ever seen, and with --record-shapes and new shapes at
    // a steady rate the flusher's CPU grew tenfold in a minute (38,000 rows, a red team's).
    struct RowWritten {
      uint64_t calls = 0;
      int64_t time_ns = 0;
      bool operator==(const RowWritten&) const = default;
    };
    std::vector<RowWritten> comms_written, op_shapes_written;
    // Per registry routine the thread called (the root's apart), the sums last written to
    // thread_routine_sums.
    std::unordered_map<RoutineId, RoutineSums> sums;
    RoutineSums root_sums;
  };
  struct ThreadStatements;

  bool prepare_transaction(const std::string& path, std::string& error);
  bool add_views(Database& db, std::string& error);
  // One flush, one transaction; a function per group of tables, each false with `error` set.
  bool write_transaction(const FlushData& data, RoutineRegistry& registry, std::string& error);
  bool write_run(Database& db, const RunInfo& run, bool root, std::string& error);
  bool write_process(Database& db, const ProcessInfo& process, std::string& error);
  // store_routines.cpp
  bool write_routines(Database& db, RoutineRegistry& registry, const FlushData& data,
                      std::string& error);
  std::vector<RoutineId> unwritten_routines(const FlushData& data) const;
  bool find_file_routines(Database& db, std::vector<RoutineId>& missing, int64_t& last,
                          std::string& error);
  bool insert_new_routines(Database& db, std::vector<RoutineId>& missing, int64_t last,
                           std::string& error);
  bool insert_routines_one_by_one(Database& db, const std::vector<RoutineId>& missing,
                                  std::string& error);
  bool write_counter_names(Database& db, const FlushData& data, std::string& error);
  bool write_threads(Database& db, const FlushData& data, std::string& error);
  bool write_comm(Database& db, const FlushData& data, std::string& error);
  bool write_thread_row(Database& db, ThreadStatements& st, const ThreadSnapshot& t, ThreadIds& ids,
                        std::string& error);
  // store_nodes.cpp
  bool write_nodes(Database& db, NodeStatements& st, const ThreadSnapshot& t, ThreadIds& ids,
                   std::string& error);
  // The thread's nodes summed per routine (sums_ at touched_, `root` its root node's), as
  // write_nodes adds them up, into thread_routine_sums: the rows that changed.
  bool write_routine_sums(Database& db, NodeStatements& st, const ThreadSnapshot& t, ThreadIds& ids,
                          const RoutineSums& root, std::string& error);
  bool write_node_counters(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                           const ThreadIds& ids, std::string& error);
  bool write_node_timing(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                         const ThreadIds& ids, std::string& error);
  bool write_shapes(Database& db, ThreadStatements& st, const ThreadSnapshot& t, ThreadIds& ids,
                    std::string& error);
  bool write_events_and_lines(Database& db, ThreadStatements& st, const ThreadSnapshot& t,
                              const ThreadIds& ids, std::string& error);
  // store_samples.cpp
  bool write_samples(Database& db, const ThreadSnapshot& t, const ThreadIds& ids,
                     std::string& error);
  bool write_gpu(Database& db, const FlushData& data, std::string& error);
  bool write_notes_and_info(Database& db, const FlushData& data, std::string& error);
  bool write_process_state(Database& db, const FlushData& data, std::string& error);
  std::string path_;
  const std::atomic<int>* give_up_ = nullptr;
  std::atomic<std::uint32_t>* progress_ = nullptr;
  bool waits_for_descriptors_ = false;
  int64_t run_id_ = 0;
  int64_t process_id_ = 0;
  // Registry id -> routines.routine_id, 0 while not written: a routine's row is written by the
  // first flush whose data names it (a node or a line), not for every routine registered.
  std::vector<int64_t> routine_ids_;
  std::vector<const Routine*> routines_;  // the registry's, for their rows
  // The file's rows other processes wrote, by identity (store_routines.cpp routine_key), read up
  // to routine_id file_routines_read_ and kept: a routine this process needs later may be one.
  std::unordered_map<std::string, int64_t> file_routines_;
  int64_t file_routines_read_ = 0;
  std::unordered_map<const ThreadState*, ThreadIds> threads_;
  std::vector<int64_t> counter_ids_;  // counters.counter_id per column
  int64_t next_node_id_ = 0;          // within a flush's transaction; 0 until its first new node
  // write_nodes' sums by registry routine, zero but for the routines in touched_ (the last
  // write's, zeroed by the next).
  std::vector<RoutineSums> sums_;
  std::vector<RoutineId> touched_;
  bool views_there_ = false;  // a flush of this process committed with the views in place
};

}  // namespace sonde
