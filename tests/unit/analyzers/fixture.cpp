#include "fixture.hpp"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sonde::test {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void exec_sql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("open failed");
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("fixture SQL failed: " + msg);
}

void write_fixture(const fs::path& path, const FixtureOptions& options) {
  std::string sql = read_file(SONDE_SCHEMA_SQL);
  if (sql.empty()) throw std::runtime_error("schema not found at " SONDE_SCHEMA_SQL);
  sql += "INSERT INTO meta VALUES ('schema_version', '" + options.schema_version + "');\n";
  sql += R"sql(
INSERT INTO runs VALUES (1, 'uuid-1', 1000000000000, './train --steps 3', 'testhost',
                         'Test CPU 9000', 8, 8, 'profile');
INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, started_ns, ended_ns,
                       end_reason)
  VALUES (1, 1, 1000, 1, 'root', './train --steps 3', 1000000000000, 1000000000000 + 10500000000,
          'exit');
INSERT INTO run_info VALUES (1, 1, 'blas.library', 'OpenBLAS 0.3.21'),
                            (1, 1, 'blas.threads', '4'),
                            (1, 1, 'fpu.ftz', '0'),
                            (1, 1, 'fpu.daz', '0');
INSERT INTO notes VALUES (1, 1, 1, 'warning', 'deepbind',
                          'libfoo.so was opened with RTLD_DEEPBIND: its BLAS calls are not seen');
INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, ended_ns) VALUES
  (1, 1, 0, 1000, 'main',   1000000000000, 1000000000000 + 10000000000),
  (2, 1, 1, 1001, 'worker', 1000000000000, 1000000000000 + 5000000000),
  (3, 1, 2, 1002, NULL,     1000000000000, NULL);
INSERT INTO routines (routine_id, name, kind) VALUES
  (1, '<thread>', 'root'), (2, 'train', 'region'), (3, 'cblas_sgemm', 'blas'),
  (4, 'fib', 'python'), (5, 'load_data', 'native'), (6, 'noop', 'native');
-- node_id, thread, parent, routine, depth, recursive, calls, subrs, incl_ns, excl_ns, flops
INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs,
                   incl_ns, excl_ns, flops) VALUES
  (1,  1, NULL, 1, 0, 0, 1, 4, 10000000000, 1000000000, 0),
  (2,  1, 1,    2, 1, 0, 1, 5,  6000000000, 1000000000, 0),
  (3,  1, 2,    3, 2, 0, 4, 0,  4000000000, 4000000000, 8000000000),
  (4,  1, 2,    4, 2, 0, 1, 2,  1000000000,  400000000, 0),
  (5,  1, 4,    4, 3, 1, 2, 0,   600000000,  600000000, 0),
  (6,  1, 1,    5, 1, 0, 3, 0,  3000000000, 3000000000, 0),
  (7,  2, NULL, 1, 0, 0, 1, 2,  5000000000, 1990000000, 0),
  (8,  2, 7,    2, 1, 0, 1, 3,  3000000000, 1000000000, 0),
  (9,  2, 8,    3, 2, 0, 2, 0,  2000000000, 2000000000, 67108864),
  (10, 2, 7,    5, 1, 0, 1, 0,    10000000,   10000000, 0),
  (11, 3, NULL, 1, 0, 0, 1, 0,   500000000,  500000000, 0),
  (12, 2, 8,    6, 2, 0, 1, 0,           0,          0, 0);
INSERT INTO shapes (node_id, call_site, m, n, k, trans_a, trans_b, dtype, calls, time_ns, flops,
                    bytes, threads) VALUES
  (3, 'model.py:42', 1000, 1000, 1000, 'N', 'N', 'f32', 4, 4000000000, 8000000000, 48000000, 4),
  (9, 'worker.py:7', 512, 256, 128, 'N', 'T', 'f64', 2, 2000000000, 67108864, 3407872, 4);
INSERT INTO peaks (run_id, resource, threads, value, source)
  VALUES (1, 'gemm.f32', 4, 100.0, 'calibrate');
)sql";
  if (options.trace_events) {
    sql += R"sql(
INSERT INTO trace_events VALUES
  (1, 2, 1000000000000 + 1000, 1000000000000 + 1000 + 6000000000),
  (1, 3, 1000000000000 + 2000, 1000000000000 + 2000 + 1000000000),
  (2, 8, 1000000000000 + 500,  1000000000000 + 500 + 3000000000);
UPDATE runs SET mode = 'trace';
)sql";
  }
  exec_sql(path, sql);
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path = fs::temp_directory_path() /
         ("sonde-analyzers-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(path);
  fs::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path, ec);
}

std::string sonde_binary() {
  const char* env = std::getenv("SONDE_CLI");
  return env && *env ? env : SONDE_CLI_PATH;
}

CliResult run_sonde(const std::string& args, const std::string& env) {
  TempDir dir;
  fs::path out = dir.path / "stdout";
  fs::path err = dir.path / "stderr";
  std::string cmd = env + " '" + sonde_binary() + "' " + args + " >'" + out.string() + "' 2>'" +
                    err.string() + "' </dev/null";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace sonde::test
