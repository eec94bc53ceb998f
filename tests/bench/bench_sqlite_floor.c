/* 4b. SQLite's own cost for the rows bench_flush's first flush writes: the floor that flush
 * is held against. Inserts the same call tree (a root, `paths/fanout` groups under it, `fanout`
 * leaves under each) into the `nodes` table of a profile sonde made (so the schema, its two
 * indexes and its page size are the real ones), 64 rows to a statement in one transaction, as
 * libprof/src/store/store_nodes.cpp does, with nothing of sonde's around it, and prints the
 * thread's CPU time and the wall time of that transaction.
 *
 *   bench_sqlite_floor PROFILE [--paths N] [--fanout F] */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

enum { kColumns = 12, kRowsPerInsert = 64 };

/* Row i of the tree (0: the root; then each group node followed by its `fanout` leaves). */
struct Tree {
  sqlite3_int64 root, group;
  long long fanout;
};

static void bind_row(sqlite3_stmt* s, int first, struct Tree* t, sqlite3_int64 id, long long i) {
  sqlite3_int64 parent = 0, depth = 0;
  if (i > 0 && (i - 1) % (t->fanout + 1) == 0) {
    t->group = id;
    parent = t->root;
    depth = 1;
  } else if (i > 0) {
    parent = t->group;
    depth = 2;
  }
  sqlite3_bind_null(s, first);
  sqlite3_bind_int64(s, first + 1, 1);
  if (parent != 0)
    sqlite3_bind_int64(s, first + 2, parent);
  else
    sqlite3_bind_null(s, first + 2);
  sqlite3_bind_int64(s, first + 3, 1 + depth);
  sqlite3_bind_int64(s, first + 4, depth);
  sqlite3_bind_int64(s, first + 5, 0);
  sqlite3_bind_int64(s, first + 6, 1);
  sqlite3_bind_int64(s, first + 7, depth == 1 ? t->fanout : 0);
  sqlite3_bind_int64(s, first + 8, 1000 + i);
  sqlite3_bind_int64(s, first + 9, 500 + i);
  sqlite3_bind_double(s, first + 10, 0.0);
  sqlite3_bind_double(s, first + 11, 0.0);
}

static int fail(sqlite3* db, const char* what) {
  fprintf(stderr, "bench_sqlite_floor: %s: %s\n", what, sqlite3_errmsg(db));
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: bench_sqlite_floor PROFILE [--paths N] [--fanout F]\n");
    return 2;
  }
  long long paths = bench_arg(argc, argv, "--paths", 99000);
  long long fanout = bench_arg(argc, argv, "--fanout", 990);
  if (fanout <= 0 || paths % fanout != 0) {
    fprintf(stderr, "bench_sqlite_floor: --paths must be a multiple of --fanout (> 0)\n");
    return 2;
  }
  sqlite3* db = NULL;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
    return fail(db, "opening the profile");
  if (sqlite3_exec(db, "PRAGMA synchronous=OFF", NULL, NULL, NULL) != SQLITE_OK)
    return fail(db, "PRAGMA synchronous");

  /* One statement of 64 rows, as the flush prepares it; node_id left to SQLite (NULL). */
  char sql[8192];
  size_t len = (size_t)snprintf(sql, sizeof sql,
                                "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, "
                                "depth, recursive, calls, subrs, incl_ns, excl_ns, flops, bytes) "
                                "VALUES ");
  for (int r = 0; r < kRowsPerInsert; ++r)
    len += (size_t)snprintf(sql + len, sizeof sql - len, "%s(?,?,?,?,?,?,?,?,?,?,?,?)",
                            r == 0 ? "" : ",");

  double t0 = bench_now_s(), c0 = bench_cpu_s();
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return fail(db, "BEGIN");
  sqlite3_int64 next = 1;
  sqlite3_stmt* max = NULL;
  if (sqlite3_prepare_v2(db, "SELECT coalesce(max(node_id), 0) + 1 FROM nodes", -1, &max, NULL) !=
          SQLITE_OK ||
      sqlite3_step(max) != SQLITE_ROW)
    return fail(db, "reading the largest node id");
  next = sqlite3_column_int64(max, 0);
  sqlite3_finalize(max);
  sqlite3_stmt* many = NULL;
  if (sqlite3_prepare_v2(db, sql, (int)len, &many, NULL) != SQLITE_OK)
    return fail(db, "preparing the insert");

  /* Rows in creation order: the root, then each group followed by its leaves; what a batch
   * of 64 leaves over goes a statement each, as the flush does. */
  char one_sql[512];
  snprintf(one_sql, sizeof one_sql, "%.*s", (int)(strstr(sql, "),") - sql + 1), sql);
  sqlite3_stmt* one = NULL;
  if (sqlite3_prepare_v2(db, one_sql, -1, &one, NULL) != SQLITE_OK)
    return fail(db, "preparing the last inserts");
  long long groups = paths / fanout, rows = 1 + groups + paths, written = 0;
  long long whole = rows - rows % kRowsPerInsert;
  struct Tree tree = {next, 0, fanout};
  for (long long i = 0; i < whole; ++i) {
    bind_row(many, 1 + (int)(i % kRowsPerInsert) * kColumns, &tree, next + i, i);
    if ((i + 1) % kRowsPerInsert == 0) {
      if (sqlite3_step(many) != SQLITE_DONE) return fail(db, "inserting");
      sqlite3_reset(many);
      written += kRowsPerInsert;
    }
  }
  for (long long i = whole; i < rows; ++i) {
    bind_row(one, 1, &tree, next + i, i);
    if (sqlite3_step(one) != SQLITE_DONE) return fail(db, "inserting");
    sqlite3_reset(one);
    ++written;
  }
  sqlite3_finalize(many);
  sqlite3_finalize(one);
  if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) return fail(db, "COMMIT");
  double t1 = bench_now_s(), c1 = bench_cpu_s();
  sqlite3_close(db);
  printf("rows %lld\n", written);
  printf("insert_s %.4f\n", t1 - t0);
  printf("insert_cpu_s %.4f\n", c1 - c0);
  return 0;
}
