#include "store/store.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/call_sites.hpp"
#include "core/op_signatures.hpp"
#include "frames.hpp"
#include "store/schema_version.hpp"
#include "temp_dir.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;
using Rows = std::vector<std::vector<std::string>>;

// A native call site: a local function, named only through the program's .symtab.
__attribute__((noinline)) int store_call_site(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

// Reads a profile the way the analyzers do: through SQLite's C API, every value as text.
class Reader {
 public:
  explicit Reader(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  ~Reader() { sqlite3_close(db_); }
  Rows rows(const std::string& sql) {
    Rows out;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return out;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        auto* text = sqlite3_column_text(st, i);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    return out;
  }
  std::string one(const std::string& sql) {
    Rows r = rows(sql);
    EXPECT_EQ(r.size(), 1u) << sql;
    return r.empty() || r[0].empty() ? "" : r[0][0];
  }
  int64_t count(const std::string& table) {
    return std::stoll(one("SELECT count(*) FROM " + table));
  }
  double number(const std::string& sql) { return std::stod(one(sql)); }

 private:
  sqlite3* db_ = nullptr;
};

// A change made to a profile behind the store's back (another tool, an older sonde).
bool change_file(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
            sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

// A profile this store made, changed behind its back, then joined by another store.
testing::AssertionResult joined_after_change(const std::string& path, const std::string& sql) {
  std::string error;
  if (!Store().prepare(path, error)) return testing::AssertionFailure() << error;
  if (!change_file(path, sql)) return testing::AssertionFailure() << "cannot change " << path;
  if (!Store().prepare(path, error)) return testing::AssertionFailure() << error;
  return testing::AssertionSuccess();
}

bool make_plain_database(const std::string& path) {
  sqlite3* db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
            sqlite3_exec(db, "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (7)", nullptr,
                         nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

TEST(StorePrepare, CreatesASondeProfile) {
  test::TempDir dir;
  std::string path = dir.file("new.db");
  Store store;
  std::string error;
  ASSERT_TRUE(store.prepare(path, error)) << error;
  Reader r(path);
  EXPECT_EQ(r.one("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(r.one("SELECT value FROM meta WHERE key = 'created_by'"), "sonde " SONDE_VERSION);
  for (const char* view : {"hotspots", "callpaths", "gemm_shapes"}) {
    EXPECT_EQ(r.rows(std::string("SELECT * FROM ") + view).size(), 0u) << view;
  }
  for (const char* table : {"runs", "processes", "threads", "routines", "nodes", "shapes"}) {
    EXPECT_EQ(r.count(table), 0) << table;
  }
}

TEST(StorePrepare, AcceptsAnExistingProfileWithoutTouchingIt) {
  test::TempDir dir;
  std::string path = dir.file("p.db");
  ASSERT_TRUE(joined_after_change(path, "INSERT INTO meta VALUES ('marker', 'kept')"));
  Reader r(path);
  EXPECT_EQ(r.one("SELECT value FROM meta WHERE key = 'marker'"), "kept");
  EXPECT_EQ(r.count("meta"), 4);
}

TEST(StorePrepare, RefusesATextFileAndLeavesItAlone) {
  test::TempDir dir;
  std::string content = "these are my notes, not a database\n";
  for (int i = 0; i < 8; ++i) content += content;  // a few KiB, past SQLite's header
  std::string path = dir.write("notes.txt", content);
  Store store;
  std::string error;
  EXPECT_FALSE(store.prepare(path, error));
  EXPECT_NE(error.find("not a"), std::string::npos) << error;
  EXPECT_NE(error.find("database"), std::string::npos) << error;
  EXPECT_EQ(test::read_all(path), content);
}

// For a file that is not SQLite, BEGIN IMMEDIATE is what fails first: its message must still
// say which file.
TEST(StorePrepare, TextFileRefusalNamesTheFile) {
  test::TempDir dir;
  std::string path = dir.write("notes.txt", std::string(4096, 'n'));
  std::string error;
  EXPECT_FALSE(Store().prepare(path, error));
  EXPECT_NE(error.find(path), std::string::npos) << error;
}

TEST(StorePrepare, RefusesAnotherSQLiteDatabase) {
  test::TempDir dir;
  std::string path = dir.file("other.db");
  ASSERT_TRUE(make_plain_database(path));
  Store store;
  std::string error;
  EXPECT_FALSE(store.prepare(path, error));
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("not a sonde profile"), std::string::npos) << error;
  Reader r(path);
  EXPECT_EQ(r.one("SELECT x FROM foo"), "7");
  EXPECT_EQ(r.one("SELECT count(*) FROM sqlite_master WHERE name = 'meta'"), "0");
}

// A file of this schema version made by an earlier sonde, before a table was added to it (and
// before the schema's hash was kept in meta): joining it adds the table, so a flush that writes
// there does not fail, and the hash.
TEST(StorePrepare, AddsTablesAnEarlierSondeDidNotMake) {
  test::TempDir dir;
  std::string path = dir.file("older.db");
  ASSERT_TRUE(joined_after_change(path,
                                  "DROP VIEW gpu_kernel_metrics; DROP TABLE gpu_metrics; "
                                  "DELETE FROM meta WHERE key = 'schema_sql'"));
  Reader r(path);
  EXPECT_EQ(r.one("SELECT count(*) FROM sqlite_master WHERE name = 'gpu_metrics'"), "1");
  EXPECT_EQ(r.one("SELECT value FROM meta WHERE key = 'schema_sql'").size(), 16u);
  EXPECT_EQ(r.count("meta"), 3);
}

// The same file with the hash of this build's schema: joining it creates nothing (the dropped
// table stays dropped), which is what saves a joining process the schema's statements.
TEST(StorePrepare, AFileOfThisSchemaIsJoinedWithoutItsStatements) {
  test::TempDir dir;
  std::string path = dir.file("same.db");
  ASSERT_TRUE(joined_after_change(path, "DROP VIEW gpu_kernel_metrics"));
  Reader r(path);
  EXPECT_EQ(r.one("SELECT count(*) FROM sqlite_master WHERE name = 'gpu_kernel_metrics'"), "0");
}

TEST(StorePrepare, RefusesAnotherSchemaVersion) {
  test::TempDir dir;
  std::string path = dir.file("future.db");
  std::string error;
  ASSERT_TRUE(Store().prepare(path, error)) << error;
  // An older file: its tables lack this version's columns (shapes.threads).
  ASSERT_TRUE(change_file(path, "UPDATE meta SET value = '" + std::to_string(kSchemaVersion - 1) +
                                    "' WHERE key = 'schema_version'"));
  EXPECT_FALSE(Store().prepare(path, error));
  EXPECT_NE(error.find(fmt::format("holds schema version {}, this sonde writes {}",
                                   kSchemaVersion - 1, kSchemaVersion)),
            std::string::npos)
      << error;
}

TEST(StorePrepare, RefusesAPathThatCannotBeCreated) {
  test::TempDir dir;
  std::string error;
  EXPECT_FALSE(Store().prepare(dir.file("no/such/dir/p.db"), error));
  EXPECT_FALSE(error.empty());
}

// root -> train [1100, 2100] -> model.forward [1200, 1900] -> cblas_sgemm [1300, 1500]
//      -> cblas_sgemm [2200, 2300], called from native code
class StoreWrite : public testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("profile.db");
    std::string error;
    ASSERT_TRUE(store_.prepare(path_, error)) << error;
    train_ = registry_.intern({"train", "region", ""});
    forward_ = registry_.intern({"model.forward", "python", "", "model.py", 12});
    sgemm_ = registry_.intern({"cblas_sgemm", "blas", "libopenblas.so.0", "", 0, DType::kF32});
    run_ = RunInfo{"0123456789abcdef0123456789abcdef",
                   "python train.py",
                   "host1",
                   "cpu",
                   "profile",
                   500,
                   8,
                   4};
    process_.pid = 321;
    process_.ppid = 1;
    process_.origin = "root";
    process_.command = "python train.py";
    process_.started_ns = 600;

    enter_at(t_, train_, 1100);
    enter_at(t_, forward_, 1200);
    enter_at(t_, sgemm_, 1300);
    CallCost big{65536, 14336, GemmShape{64, 32, 16, 1, 'N', 'T', DType::kF32}, {}};
    leave_at(t_, 1500, &big, python_site_);
    leave_at(t_, 1900);
    leave_at(t_, 2100);
    enter_at(t_, sgemm_, 2200);
    CallCost small{1024, 768, GemmShape{8, 8, 8, 1, 'N', 'N', DType::kF32}, {}};
    leave_at(t_, 2300, &small, native_site());
  }

  // A return address inside store_call_site (symbolize steps back one byte).
  static const void* native_site() { return reinterpret_cast<const char*>(&store_call_site) + 2; }

  FlushData flush(uint64_t now, const char* end_reason = nullptr) {
    FlushData d{&run_, &process_, {}, notes_, info_, int64_t(now), end_reason};
    d.threads.push_back(take_snapshot(t_, Clock{}, now));
    call_sites_.name(d.threads.back(), registry_);
    return d;
  }

  // Another process of the run (a child, `pid`) writing one thread's calls into the same file.
  void write_child(ThreadState& t, RoutineRegistry& reg, pid_t pid, uint64_t now) {
    Store child_store;
    std::string error;
    ASSERT_TRUE(child_store.prepare(path_, error)) << error;
    ProcessInfo child = process_;
    child.pid = pid;
    child.origin = "child";
    FlushData d{&run_, &child, {}, notes_, info_, int64_t(now), "exit"};
    d.threads.push_back(take_snapshot(t, Clock{}, now));
    ASSERT_TRUE(child_store.write(d, reg, error)) << error;
  }

  // A child that called each of `routines` once, in turn, from its thread's root.
  void write_child_calling(RoutineRegistry& reg, const std::vector<RoutineId>& routines,
                           pid_t pid) {
    ThreadState t{1, 4243, 3000, 16, 0};
    uint64_t now = 3000;
    for (RoutineId id : routines) {
      enter_at(t, id, now += 10);
      leave_at(t, now += 10);
    }
    write_child(t, reg, pid, now + 10);
  }

  bool write(const FlushData& d) {
    std::string error;
    bool ok = store_.write(d, registry_, error);
    EXPECT_TRUE(ok) << error;
    return ok;
  }

  // `text` run on the file between two flushes, as another program would.
  void sql(const char* text) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, text, nullptr, nullptr, nullptr), SQLITE_OK) << text;
    sqlite3_close(db);
  }

  test::TempDir dir_;
  std::string path_;
  Store store_;
  RoutineRegistry registry_;
  CallSites call_sites_;
  RoutineId train_ = 0, forward_ = 0, sgemm_ = 0;
  RunInfo run_;
  ProcessInfo process_;
  ThreadState t_{0, 4242, 1000, 16, 0};
  std::vector<Note> notes_{{"warning", "deepbind", "libfoo.so was loaded with RTLD_DEEPBIND"}};
  std::vector<std::pair<std::string, std::string>> info_{{"blas.library", "openblas"},
                                                         {"env.OMP_NUM_THREADS", "4"}};
  const void* python_site_ = reinterpret_cast<const void*>(0x1234);
};

TEST_F(StoreWrite, WritesTheRunProcessAndThread) {
  ASSERT_TRUE(write(flush(2500)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT uuid, started_ns, command, host, cpu_model, cores, affinity_cores, "
                   "mode FROM runs"),
            (Rows{{run_.uuid, "500", "python train.py", "host1", "cpu", "8", "4", "profile"}}));
  EXPECT_EQ(
      r.rows("SELECT pid, ppid, origin, parent_process_id, command, started_ns, ended_ns, "
             "last_flush_ns, flushes, end_reason FROM processes"),
      (Rows{{"321", "1", "root", "NULL", "python train.py", "600", "NULL", "2500", "1", "NULL"}}));
  EXPECT_EQ(r.rows("SELECT seq, tid, started_ns, ended_ns FROM threads"),
            (Rows{{"0", "4242", "1000", "NULL"}}));
  EXPECT_EQ(r.rows("SELECT severity, topic, message FROM notes"),
            (Rows{{"warning", "deepbind", "libfoo.so was loaded with RTLD_DEEPBIND"}}));
  EXPECT_EQ(r.rows("SELECT key, value FROM run_info ORDER BY key"),
            (Rows{{"blas.library", "openblas"}, {"env.OMP_NUM_THREADS", "4"}}));
  EXPECT_EQ(r.one("SELECT count(*) FROM run_info WHERE process_id IS NULL"), "0");
}

TEST_F(StoreWrite, WritesTheCallTreeWithParentLinks) {
  ASSERT_TRUE(write(flush(2500)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT r.name, r.kind, r.library, r.file, r.line FROM routines r "
                   "ORDER BY routine_id"),
            (Rows{{"<thread>", "root", "", "", "0"},
                  {"train", "region", "", "", "0"},
                  {"model.forward", "python", "", "model.py", "12"},
                  {"cblas_sgemm", "blas", "libopenblas.so.0", "", "0"}}));
  EXPECT_EQ(
      r.rows("SELECT r.name, coalesce(pr.name, '-'), n.depth, n.recursive, n.calls, n.subrs, "
             "n.incl_ns, n.excl_ns, CAST(n.flops AS INTEGER), CAST(n.bytes AS INTEGER) "
             "FROM nodes n JOIN routines r USING (routine_id) "
             "LEFT JOIN nodes p ON p.node_id = n.parent_id "
             "LEFT JOIN routines pr ON pr.routine_id = p.routine_id ORDER BY n.node_id"),
      (Rows{{"<thread>", "-", "0", "0", "1", "2", "1500", "400", "0", "0"},
            {"train", "<thread>", "1", "0", "1", "1", "1000", "300", "0", "0"},
            {"model.forward", "train", "2", "0", "1", "1", "700", "500", "0", "0"},
            {"cblas_sgemm", "model.forward", "3", "0", "1", "0", "200", "200", "65536", "14336"},
            {"cblas_sgemm", "<thread>", "1", "0", "1", "0", "100", "100", "1024", "768"}}));
  // Every node belongs to the thread, and only the root has no parent.
  EXPECT_EQ(r.one("SELECT count(*) FROM nodes WHERE thread_id = (SELECT thread_id FROM threads)"),
            "5");
  EXPECT_EQ(r.one("SELECT count(*) FROM nodes WHERE parent_id IS NULL"), "1");
}

TEST_F(StoreWrite, ShapesNameTheirCallSite) {
  ASSERT_TRUE(write(flush(2500)));
  Reader r(path_);
  Rows shapes = r.rows(
      "SELECT call_site, m, n, k, trans_a, trans_b, dtype, batch, calls, "
      "time_ns, CAST(flops AS INTEGER), CAST(bytes AS INTEGER) FROM shapes "
      "ORDER BY shape_id");
  ASSERT_EQ(shapes.size(), 2u);
  // Under a Python frame, the call site is that frame.
  EXPECT_EQ(shapes[0], (std::vector<std::string>{"model.forward", "64", "32", "16", "N", "T", "f32",
                                                 "1", "1", "200", "65536", "14336"}));
  // Otherwise the native caller, named from the program's own symbol table.
  EXPECT_NE(shapes[1][0].find("store_call_site"), std::string::npos) << shapes[1][0];
  EXPECT_NE(shapes[1][0].find("[sonde_libprof_tests]"), std::string::npos) << shapes[1][0];
  EXPECT_EQ(
      std::vector<std::string>(shapes[1].begin() + 1, shapes[1].end()),
      (std::vector<std::string>{"8", "8", "8", "N", "N", "f32", "1", "1", "100", "1024", "768"}));
}

TEST_F(StoreWrite, ViewsReadTheProfile) {
  ASSERT_TRUE(write(flush(2500)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT routine, kind, calls, CAST(round(incl_s * 1e9) AS INTEGER), "
                   "CAST(round(excl_s * 1e9) AS INTEGER), round(excl_pct, 6) FROM hotspots "
                   "ORDER BY routine"),
            (Rows{{"<thread>", "root", "1", "1500", "400", "26.666667"},
                  {"cblas_sgemm", "blas", "2", "300", "300", "20.0"},
                  {"model.forward", "python", "1", "700", "500", "33.333333"},
                  {"train", "region", "1", "1000", "300", "20.0"}}));
  EXPECT_EQ(r.rows("SELECT path, calls, CAST(round(incl_s * 1e9) AS INTEGER), "
                   "CAST(round(excl_s * 1e9) AS INTEGER) FROM callpaths ORDER BY path"),
            (Rows{{"cblas_sgemm", "1", "100", "100"},
                  {"train", "1", "1000", "300"},
                  {"train;model.forward", "1", "700", "500"},
                  {"train;model.forward;cblas_sgemm", "1", "200", "200"}}));
  Rows gemm = r.rows(
      "SELECT routine, call_site, m, n, k, dtype, calls, "
      "CAST(round(time_s * 1e9) AS INTEGER), gflops, pct_peak FROM gemm_shapes "
      "ORDER BY m DESC");
  ASSERT_EQ(gemm.size(), 2u);
  EXPECT_EQ(gemm[0], (std::vector<std::string>{"cblas_sgemm", "model.forward", "64", "32", "16",
                                               "f32", "1", "200", "327.68", "NULL"}));
  EXPECT_EQ(gemm[1][6], "1");
  EXPECT_DOUBLE_EQ(std::stod(gemm[1][8]), 1024.0 / 100.0);
}

// A file this process claimed gets the blank profile without views, and its first flush adds
// their rows as CREATE VIEW would have (Store::add_views): the same rows, readable by a
// connection that was open before, and left alone by the next flush.
TEST_F(StoreWrite, AClaimedFileGetsTheViewsAtItsFirstFlush) {
  std::string claimed = dir_.file("claimed.db");
  std::ofstream{claimed};  // empty, as the O_EXCL open leaves it
  Store store;
  std::string error;
  ASSERT_TRUE(store.prepare(claimed, error, OutputOrigin::kClaimedEmpty)) << error;
  const std::string kViews =
      "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master WHERE type = 'view' "
      "ORDER BY name";
  Reader before(claimed);
  EXPECT_EQ(before.rows(kViews).size(), 0u);
  ASSERT_TRUE(store.write(flush(2500), registry_, error)) << error;
  Rows made = Reader(path_).rows(kViews);  // made by the schema's statements
  ASSERT_GT(made.size(), 30u);
  EXPECT_EQ(Reader(claimed).rows(kViews), made);
  EXPECT_EQ(Reader(claimed).one("PRAGMA quick_check"), "ok");
  EXPECT_EQ(
      before.rows("SELECT routine, calls FROM hotspots ORDER BY routine"),
      (Rows{{"<thread>", "1"}, {"cblas_sgemm", "2"}, {"model.forward", "1"}, {"train", "1"}}));
  ASSERT_TRUE(store.write(flush(2600), registry_, error)) << error;
  EXPECT_EQ(Reader(claimed).rows(kViews), made);
}

TEST_F(StoreWrite, ASecondFlushUpdatesRowsInsteadOfAddingThem) {
  ASSERT_TRUE(write(flush(2500)));
  // More of the same, one new call path, a new note and a changed fact.
  enter_at(t_, train_, 2600);
  enter_at(t_, forward_, 2650);
  enter_at(t_, sgemm_, 2700);
  CallCost big{65536, 14336, GemmShape{64, 32, 16, 1, 'N', 'T', DType::kF32}, {}};
  leave_at(t_, 2750, &big, python_site_);
  leave_at(t_, 2800);
  leave_at(t_, 2900);
  RoutineId loss = registry_.intern({"loss", "region", ""});
  enter_at(t_, loss, 3000);
  leave_at(t_, 3100);
  notes_.push_back({"info", "no-calls", "second note"});
  info_[1].second = "8";
  ASSERT_TRUE(write(flush(3200, "exit")));

  Reader r(path_);
  EXPECT_EQ(r.count("runs"), 1);
  EXPECT_EQ(r.count("processes"), 1);
  EXPECT_EQ(r.count("threads"), 1);
  EXPECT_EQ(r.count("routines"), 5);
  EXPECT_EQ(r.count("nodes"), 6);
  EXPECT_EQ(r.count("shapes"), 2);
  EXPECT_EQ(r.count("notes"), 2);
  EXPECT_EQ(r.count("run_info"), 2);
  EXPECT_EQ(r.rows("SELECT last_flush_ns, flushes, ended_ns, end_reason FROM processes"),
            (Rows{{"3200", "2", "3200", "exit"}}));
  EXPECT_EQ(r.one("SELECT value FROM run_info WHERE key = 'env.OMP_NUM_THREADS'"), "8");
  EXPECT_EQ(r.rows("SELECT path, calls, CAST(round(incl_s * 1e9) AS INTEGER) FROM callpaths "
                   "ORDER BY path"),
            (Rows{{"cblas_sgemm", "1", "100"},
                  {"loss", "1", "100"},
                  {"train", "2", "1300"},
                  {"train;model.forward", "2", "850"},
                  {"train;model.forward;cblas_sgemm", "2", "250"}}));
  EXPECT_EQ(r.rows("SELECT calls, time_ns, CAST(flops AS INTEGER) FROM shapes WHERE m = 64"),
            (Rows{{"2", "250", "131072"}}));
  EXPECT_EQ(r.one("SELECT incl_ns FROM nodes WHERE parent_id IS NULL"), "2200");
}

// A flush rewrites only the nodes that moved since the last: a row marked in the file between
// two flushes keeps its mark where its node did not move, and is rewritten where it did.
TEST_F(StoreWrite, AFlushRewritesOnlyTheNodesThatMoved) {
  ASSERT_TRUE(write(flush(2500)));
  sql("UPDATE nodes SET subrs = 777");
  enter_at(t_, forward_, 2600);  // a new call under the root: the root and it move
  leave_at(t_, 2700);
  ASSERT_TRUE(write(flush(2800)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT path, subrs FROM callpaths ORDER BY path"),
            (Rows{{"cblas_sgemm", "777"},
                  {"model.forward", "0"},
                  {"train", "777"},
                  {"train;model.forward", "777"},
                  {"train;model.forward;cblas_sgemm", "777"}}));
  EXPECT_EQ(r.one("SELECT subrs FROM nodes WHERE parent_id IS NULL"), "3");
}

// A flush that fails midway through the call tree (a full disk, no memory: here a trigger
// refuses the UPDATE of one node) leaves the next ones to write the routine sums whole: the
// sums of the routines it had reached stayed in the store's table, later flushes added onto
// them and compared them with what the file held, and thread_routine_sums read 20,780 calls
// where the nodes held 169,450 (a review's find).
TEST_F(StoreWrite, AFlushThatFailsMidTreeLeavesTheRoutineSumsWhole) {
  ASSERT_TRUE(write(flush(2500)));
  sql("CREATE TRIGGER refuse BEFORE UPDATE ON nodes WHEN NEW.routine_id = (SELECT routine_id "
      "FROM routines WHERE name = 'cblas_sgemm') BEGIN SELECT RAISE(ABORT, 'refused'); END");
  enter_at(t_, train_, 2600);
  enter_at(t_, forward_, 2610);
  enter_at(t_, sgemm_, 2620);
  leave_at(t_, 2630);
  leave_at(t_, 2640);
  leave_at(t_, 2650);
  std::string error;
  EXPECT_FALSE(store_.write(flush(2700), registry_, error));
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
  sql("DROP TRIGGER refuse");
  ASSERT_TRUE(write(flush(2800)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT r.name, s.calls, s.incl_ns FROM thread_routine_sums s JOIN routines r "
                   "USING (routine_id) WHERE s.root = 0 ORDER BY r.name"),
            r.rows("SELECT r.name, SUM(n.calls), SUM(n.incl_ns) FROM nodes n JOIN routines r "
                   "USING (routine_id) WHERE n.parent_id IS NOT NULL GROUP BY r.name "
                   "ORDER BY r.name"));
  EXPECT_EQ(r.one("SELECT s.calls FROM thread_routine_sums s JOIN routines r USING "
                  "(routine_id) WHERE r.name = 'train'"),
            "2");
}

// An operator's rows of input shapes (--record-shapes) are rewritten only where they moved, as
// the nodes are: every flush upserted every row ever seen, and with new shapes at a steady rate
// the flusher's CPU grew tenfold in a minute (38,000 rows, a red team's).
TEST_F(StoreWrite, AFlushRewritesOnlyTheOperatorShapesThatMoved) {
  uint32_t a = op_signatures().intern("[[8, 8]]", "float");
  uint32_t b = op_signatures().intern("[[16, 8]]", "float");
  t_.record_op_shape(1, a, 100);
  ASSERT_TRUE(write(flush(2500)));
  sql("UPDATE op_shapes SET time_ns = 777");
  t_.record_op_shape(1, b, 50);  // a new shape: its row alone is written
  ASSERT_TRUE(write(flush(2600)));
  {
    Reader r(path_);
    EXPECT_EQ(r.rows("SELECT input_shapes, calls, time_ns FROM op_shapes ORDER BY input_shapes"),
              (Rows{{"[[16, 8]]", "1", "50"}, {"[[8, 8]]", "1", "777"}}));
  }
  t_.record_op_shape(1, a, 100);  // the first one moves: rewritten
  ASSERT_TRUE(write(flush(2700)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT input_shapes, calls, time_ns FROM op_shapes ORDER BY input_shapes"),
            (Rows{{"[[16, 8]]", "1", "50"}, {"[[8, 8]]", "2", "200"}}));
}

// Each flush refines the clock's ns per tick, so a node that did not run since the last flush
// can come out 1 ns apart in its exclusive time alone: its row moves with the sums that
// thread_routine_sums keeps (which the hot-spot report reads), not left a nanosecond behind.
TEST_F(StoreWrite, ANodeWhoseExclusiveTimeAloneMovedIsRewritten) {
  ASSERT_TRUE(write(flush(2500)));
  FlushData d = flush(2500);
  for (NodeRow& n : d.threads[0].nodes) {
    if (n.routine == forward_) n.excl_ns += 1;
  }
  ASSERT_TRUE(write(d));
  Reader r(path_);
  EXPECT_EQ(r.one("SELECT n.excl_ns FROM nodes n JOIN routines r USING (routine_id) "
                  "WHERE r.name = 'model.forward'"),
            r.one("SELECT s.excl_ns FROM thread_routine_sums s JOIN routines r "
                  "USING (routine_id) WHERE r.name = 'model.forward'"));
  EXPECT_EQ(r.one("SELECT n.excl_ns FROM nodes n JOIN routines r USING (routine_id) "
                  "WHERE r.name = 'model.forward'"),
            "501");
}

// New rows go many to a statement with the ids they were given (store_nodes.cpp): 280 new nodes
// after a first flush are four full statements and a partial one, each leaf under its own parent.
TEST_F(StoreWrite, ManyNewNodesKeepTheirParentsAndIds) {
  ASSERT_TRUE(write(flush(2500)));
  RoutineId leaf = registry_.intern({"leaf", "region", ""});
  uint64_t at = 3000;
  for (int i = 0; i < 140; ++i) {
    std::string name = fmt::format("r{}", i);
    enter_at(t_, registry_.intern({name.c_str(), "region", ""}), at++);
    enter_at(t_, leaf, at++);
    leave_at(t_, at++);
    leave_at(t_, at++);
  }
  ASSERT_TRUE(write(flush(at)));
  Reader r(path_);
  EXPECT_EQ(r.count("nodes"), 285);
  EXPECT_EQ(r.one("SELECT max(node_id) FROM nodes"), "285");
  // Each leaf's parent is an r<i>, each r<i> has one leaf, and every parent precedes its child.
  EXPECT_EQ(r.one("SELECT count(DISTINCT p.node_id) FROM nodes n JOIN routines nr "
                  "ON nr.routine_id = n.routine_id JOIN nodes p ON p.node_id = n.parent_id "
                  "JOIN routines pr ON pr.routine_id = p.routine_id "
                  "WHERE nr.name = 'leaf' AND pr.name LIKE 'r%' "
                  "AND n.depth = 2 AND p.depth = 1 AND p.node_id < n.node_id"),
            "140");
  EXPECT_EQ(
      r.one("SELECT count(*) FROM nodes n LEFT JOIN nodes p ON p.node_id = n.parent_id "
            "WHERE n.parent_id IS NOT NULL AND (p.node_id IS NULL OR p.node_id >= n.node_id)"),
      "0");
  EXPECT_EQ(r.rows("SELECT calls FROM callpaths WHERE path = 'r139;leaf'"), (Rows{{"1"}}));
}

TEST_F(StoreWrite, AnotherProcessOfTheSameRunJoinsIt) {
  ASSERT_TRUE(write(flush(2500)));
  Store exec_store;
  std::string error;
  ASSERT_TRUE(exec_store.prepare(path_, error)) << error;
  ProcessInfo child = process_;
  child.pid = 322;
  child.ppid = 321;
  child.origin = "child";
  child.parent_process_id = store_.process_id();
  FlushData d{&run_, &child, {}, notes_, info_, 2600, "exit"};
  d.threads.push_back(take_snapshot(t_, Clock{}, 2600));
  call_sites_.name(d.threads.back(), registry_);
  ASSERT_TRUE(exec_store.write(d, registry_, error)) << error;

  Reader r(path_);
  EXPECT_EQ(r.count("runs"), 1);
  EXPECT_EQ(r.count("routines"), 4);  // shared by the processes of the file
  EXPECT_EQ(r.count("threads"), 2);
  EXPECT_EQ(r.count("nodes"), 10);
  EXPECT_EQ(r.count("notes"), 2);  // per process
  EXPECT_EQ(r.rows("SELECT pid, origin, coalesce(parent_process_id, 0) FROM processes "
                   "ORDER BY process_id"),
            (Rows{{"321", "root", "0"}, {"322", "child", std::to_string(store_.process_id())}}));
  EXPECT_EQ(r.rows("SELECT calls FROM hotspots WHERE routine = 'cblas_sgemm'"), (Rows{{"4"}}));
}

// A child whose routines came in another order after the first ones: the leading rows it shares
// with the file are taken by position, the rest by name, and its calls land on the right rows.
TEST_F(StoreWrite, AJoiningProcessWithOtherRoutinesKeepsTheirNames) {
  ASSERT_TRUE(write(flush(2500)));
  RoutineRegistry reg2;
  RoutineId train2 = reg2.intern({"train", "region", ""});
  RoutineId only2 = reg2.intern({"only_in_the_child", "region", ""});
  RoutineId sgemm2 = reg2.intern({"cblas_sgemm", "blas", "libopenblas.so.0"});
  ThreadState t2{1, 4243, 3000, 16, 0};
  enter_at(t2, train2, 3000);
  enter_at(t2, only2, 3100);
  enter_at(t2, sgemm2, 3200);
  leave_at(t2, 3300);
  leave_at(t2, 3400);
  leave_at(t2, 3500);
  write_child(t2, reg2, 322, 3600);

  Reader r(path_);
  EXPECT_EQ(r.count("routines"), 5);  // <thread>, train, model.forward, cblas_sgemm, the new one
  EXPECT_EQ(
      r.rows("SELECT r.name, n.depth FROM nodes n JOIN routines r USING (routine_id) "
             "JOIN threads t USING (thread_id) JOIN processes p USING (process_id) "
             "WHERE p.pid = 322 ORDER BY n.depth"),
      (Rows{{"<thread>", "0"}, {"train", "1"}, {"only_in_the_child", "2"}, {"cblas_sgemm", "3"}}));
}

// A routine's row is written by the first flush that names it: 130 called by a child go 64 to a
// statement, 'train' (the first process's row) is found by its identity, and the ones the child
// registered and never called have no row. Every call lands on its own routine's row.
TEST_F(StoreWrite, RoutinesAFlushNamesGoInBulkAndKnownOnesAreFoundByIdentity) {
  ASSERT_TRUE(write(flush(2500)));
  RoutineRegistry reg2;
  std::vector<RoutineId> ids;
  std::vector<std::string> names;
  for (int i = 0; i < 130; ++i) {
    names.push_back(i == 100 ? std::string("train") : "r" + std::to_string(i));
    ids.push_back(reg2.intern({names.back().c_str(), "region", ""}));
  }
  for (int i = 0; i < 10; ++i) reg2.intern({fmt::format("idle{}", i).c_str(), "blas", "libx"});
  write_child_calling(reg2, ids, 323);

  Reader r(path_);
  EXPECT_EQ(r.count("routines"), 4 + 129);  // '<thread>' and 'train' are the first process's
  EXPECT_EQ(r.one("SELECT count(*) FROM routines WHERE name = 'train'"), "1");
  EXPECT_EQ(r.one("SELECT count(*) FROM routines WHERE name LIKE 'idle%'"), "0");
  Rows expected{{"<thread>"}};
  for (const std::string& n : names) expected.push_back({n});
  EXPECT_EQ(r.rows("SELECT r.name FROM nodes n JOIN routines r USING (routine_id) "
                   "JOIN threads t USING (thread_id) JOIN processes p USING (process_id) "
                   "WHERE p.pid = 323 ORDER BY n.node_id"),
            expected);
}

// A routine registered in every process (the wrappers' 299) and called by none has no row; one
// the child calls later gets it then, beside what other processes wrote in between.
TEST_F(StoreWrite, ARoutineGetsItsRowWhenFirstCalled) {
  RoutineId idle = registry_.intern({"cblas_dgemm", "blas", "libopenblas.so.0"});
  ASSERT_TRUE(write(flush(2500)));
  EXPECT_EQ(Reader(path_).one("SELECT count(*) FROM routines WHERE name = 'cblas_dgemm'"), "0");
  // Another process writes a routine of its own meanwhile.
  RoutineRegistry reg2;
  write_child_calling(reg2, {reg2.intern({"other", "region", ""})}, 325);

  enter_at(t_, idle, 3300);
  leave_at(t_, 3400);
  ASSERT_TRUE(write(flush(3500)));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT name FROM routines ORDER BY routine_id"), (Rows{{"<thread>"},
                                                                           {"train"},
                                                                           {"model.forward"},
                                                                           {"cblas_sgemm"},
                                                                           {"other"},
                                                                           {"cblas_dgemm"}}));
  EXPECT_EQ(r.rows("SELECT calls FROM hotspots WHERE routine = 'cblas_dgemm'"), (Rows{{"1"}}));
}

// The facts a wrapper's table states go into routines.dtype and role, NULL where it states none,
// on the bulk insert; a routine the file has already ('train') keeps its row.
TEST_F(StoreWrite, RoutinesCarryTheFactsTheirTablesState) {
  RoutineId launch =
      registry_.intern({"cudaLaunchKernel", "cuda", "cudart", "", 0, DType::kNone, "launch"});
  enter_at(t_, launch, 2400);
  leave_at(t_, 2450);
  ASSERT_TRUE(write(flush(2500)));
  RoutineRegistry reg2;
  std::vector<RoutineId> called = {
      reg2.intern({"cudaDeviceSynchronize", "cuda", "cudart", "", 0, DType::kNone, "sync"}),
      reg2.intern({"train", "region", ""}),
      reg2.intern({"cblas_zgemm", "blas", "libopenblas.so.0", "", 0, DType::kC128})};
  write_child_calling(reg2, called, 324);

  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT name, dtype, role FROM routines ORDER BY routine_id"),
            (Rows{{"<thread>", "NULL", "NULL"},
                  {"train", "NULL", "NULL"},
                  {"model.forward", "NULL", "NULL"},
                  {"cblas_sgemm", "f32", "NULL"},
                  {"cudaLaunchKernel", "NULL", "launch"},
                  {"cudaDeviceSynchronize", "NULL", "sync"},
                  {"cblas_zgemm", "c128", "NULL"}}));
}

TEST_F(StoreWrite, RecursionIsMarkedAndNotCountedTwiceInHotspots) {
  // train -> train: the inner node is recursive, so hotspots counts only the outer incl.
  enter_at(t_, train_, 3000);
  enter_at(t_, train_, 3100);
  leave_at(t_, 3200);
  leave_at(t_, 3300);
  ASSERT_TRUE(write(flush(3400)));
  Reader r(path_);
  EXPECT_EQ(r.one("SELECT count(*) FROM nodes WHERE recursive = 1"), "1");
  EXPECT_EQ(r.one("SELECT depth FROM nodes WHERE recursive = 1"), "2");
  // Outer train: 1000 + 300; the inner 100 is inside it already.
  EXPECT_EQ(r.one("SELECT CAST(round(incl_s * 1e9) AS INTEGER) FROM hotspots "
                  "WHERE routine = 'train'"),
            "1300");
}

// The store decides no attribution: the recursion flag and the call site it writes are the
// snapshot's, whatever the tree looks like.
TEST_F(StoreWrite, WritesTheAttributionItIsGiven) {
  FlushData d = flush(2500);
  ThreadSnapshot& t = d.threads.back();
  ASSERT_EQ(t.nodes.size(), 5u);
  t.nodes[4].recursive = true;  // root -> cblas_sgemm, not nested in itself
  ASSERT_EQ(t.shapes.size(), 2u);
  t.shapes[0].call_site = "given.py:3(site)";
  ASSERT_TRUE(write(d));
  Reader r(path_);
  EXPECT_EQ(r.rows("SELECT n.depth, n.recursive FROM nodes n JOIN routines USING (routine_id) "
                   "WHERE name = 'cblas_sgemm' ORDER BY n.depth"),
            (Rows{{"1", "1"}, {"3", "0"}}));
  EXPECT_EQ(r.one("SELECT call_site FROM shapes WHERE m = 64"), "given.py:3(site)");
}

// GPU activity rows point at the launching call path: by (thread, node index) while the thread's
// state lives, by the node_id it was written to once the state is gone, or nowhere.
TEST_F(StoreWrite, GpuActivityKeepsTheLaunchingCallPath) {
  ASSERT_TRUE(write(flush(2500)));
  const auto& ids = store_.node_ids(&t_);
  ASSERT_GE(ids.size(), 3u);  // root, train, model.forward
  FlushData d = flush(2600);
  GpuRow kernel;
  kernel.thread = &t_;
  kernel.node = 2;  // model.forward under train
  kernel.kind = "kernel";
  kernel.name = "matmul(float*, int)";
  kernel.start_ns = 2000;
  kernel.end_ns = 2050;
  kernel.grid[0] = 128, kernel.grid[1] = 2, kernel.grid[2] = 1;
  kernel.block[0] = 256, kernel.block[1] = 1, kernel.block[2] = 1;
  kernel.registers = 32;
  kernel.shared_bytes = 1024;
  GpuRow copy;
  copy.node_id = ids[1];  // train, resolved when its thread's state was freed
  copy.kind = "memcpy";
  copy.name = "memcpy HtoD";
  copy.start_ns = 2100;
  copy.end_ns = 2110;
  copy.bytes = 4096;
  GpuRow unseen = kernel;  // a launch sonde did not see
  unseen.thread = nullptr;
  unseen.start_ns = 2200;
  unseen.end_ns = 2210;
  d.gpu = {kernel, copy, unseen};
  ASSERT_TRUE(write(d));
  Reader r(path_);
  EXPECT_EQ(
      r.rows("SELECT g.kind, g.name, COALESCE(rt.name, 'NULL'), g.bytes, g.grid_y, "
             "g.block_x, g.registers, g.shared_bytes, g.end_ns - g.start_ns "
             "FROM gpu_activity g LEFT JOIN nodes n USING (node_id) "
             "LEFT JOIN routines rt ON rt.routine_id = n.routine_id ORDER BY g.start_ns"),
      (Rows{{"kernel", "matmul(float*, int)", "model.forward", "NULL", "2", "256", "32", "1024",
             "50"},
            {"memcpy", "memcpy HtoD", "train", "4096", "NULL", "NULL", "NULL", "NULL", "10"},
            {"kernel", "matmul(float*, int)", "NULL", "NULL", "2", "256", "32", "1024", "10"}}));
  EXPECT_EQ(r.rows("SELECT kernel, COALESCE(call_path, 'NULL'), calls, time_s * 1e9, grid, block "
                   "FROM gpu_kernels ORDER BY call_path"),
            (Rows{{"matmul(float*, int)", "NULL", "1", "10.0", "256", "256"},
                  {"matmul(float*, int)", "train;model.forward", "1", "50.0", "256", "256"}}));
}

}  // namespace
}  // namespace sonde
