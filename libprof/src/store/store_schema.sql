-- sonde profile schema, version 4 (store/schema_version.hpp), part 1: the tables. Part 2,
-- store_views.sql, holds the views over them, the public contract; the build joins the two into
-- one script (kSchemaSql). Documented in docs/schema.md. Times are integer nanoseconds in tables
-- and seconds in views.
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
  run_id        INTEGER PRIMARY KEY,
  uuid          TEXT NOT NULL UNIQUE,
  started_ns    INTEGER NOT NULL,          -- CLOCK_REALTIME of the root process's start
  command       TEXT NOT NULL,
  host          TEXT,
  cpu_model     TEXT,
  cores         INTEGER,                   -- online CPUs
  affinity_cores INTEGER,                  -- CPUs this process may run on
  mode          TEXT NOT NULL              -- 'profile' or 'trace'
);

-- Free-form facts about a run that are not worth a column: blas.library, blas.threads,
-- fpu.ftz, fpu.daz, env.OMP_NUM_THREADS, peak.* (calibrated), ... One row per key and process.
CREATE TABLE IF NOT EXISTS run_info (
  run_id     INTEGER NOT NULL REFERENCES runs(run_id),
  process_id INTEGER REFERENCES processes(process_id),
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  UNIQUE (run_id, process_id, key)
);

-- Warnings the measurement raised: DEEPBIND libraries, nothing intercepted, dropped trace events.
CREATE TABLE IF NOT EXISTS notes (
  note_id    INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(run_id),
  process_id INTEGER REFERENCES processes(process_id),
  severity   TEXT NOT NULL,                -- 'info', 'warning'
  topic      TEXT NOT NULL,                -- short key, e.g. 'deepbind', 'no-calls'
  message    TEXT NOT NULL,
  UNIQUE (run_id, process_id, topic, message)
);

CREATE TABLE IF NOT EXISTS processes (
  process_id   INTEGER PRIMARY KEY,
  run_id       INTEGER NOT NULL REFERENCES runs(run_id),
  pid          INTEGER NOT NULL,
  ppid         INTEGER NOT NULL,
  origin       TEXT NOT NULL,              -- 'root', 'fork', 'exec' (same pid, new image), 'child'
  parent_process_id INTEGER REFERENCES processes(process_id),
  command      TEXT NOT NULL,
  started_ns   INTEGER NOT NULL,
  ended_ns     INTEGER,                    -- NULL while running or after a crash
  last_flush_ns INTEGER,
  flushes      INTEGER NOT NULL DEFAULT 0,
  end_reason   TEXT,                       -- 'exit', 'signal N', 'exec', NULL if never ended cleanly
  -- A ranked run (MPI, SLURM, torch.distributed): NULL otherwise. host is per process because the
  -- ranks of one merged file come from many hosts.
  host         TEXT,
  rank         INTEGER,
  world_size   INTEGER,
  local_rank   INTEGER
);

-- A thread is registered at its first measured call (the loading thread at start-up), so a
-- library's worker that never makes one is never recorded, and started_ns is that moment.
CREATE TABLE IF NOT EXISTS threads (
  thread_id   INTEGER PRIMARY KEY,
  process_id  INTEGER NOT NULL REFERENCES processes(process_id),
  seq         INTEGER NOT NULL,            -- 0 = the thread that loaded sonde, then registration order
  tid         INTEGER NOT NULL,
  name        TEXT,
  started_ns  INTEGER NOT NULL,
  ended_ns    INTEGER,
  ftz         INTEGER,                     -- MXCSR flush-to-zero seen on this thread (0/1)
  daz         INTEGER,                     -- MXCSR denormals-are-zero seen on this thread (0/1)
  cpu_ns      INTEGER,                     -- CPU time from its registration to its end or the last flush
  UNIQUE (process_id, seq)
);

-- Routines are shared by every process of the file: a region, a BLAS entry point, a Python
-- function (file and line set), a GPU kernel.
CREATE TABLE IF NOT EXISTS routines (
  routine_id INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  kind       TEXT NOT NULL,                -- 'root', 'region', 'blas', 'python', 'native', ...
  library    TEXT NOT NULL DEFAULT '',
  file       TEXT NOT NULL DEFAULT '',
  line       INTEGER NOT NULL DEFAULT 0,
  -- Facts the wrapper's table states (schema version 9; NULL where it states none, and in the
  -- routines view a reader makes over an older file): dtype, the element type of a routine made
  -- for one ('f32' for cblas_sgemm, as shapes.dtype); role, what a CUDA API call does ('launch',
  -- 'copy' between host and device, 'sync', 'other').
  dtype      TEXT,
  role       TEXT,
  UNIQUE (name, kind, library, file, line)
);

-- The calling-context tree: one node per distinct call path per thread. The root of each
-- thread's tree is a node of the routine '<thread>' (kind 'root') that spans the thread's life.
CREATE TABLE IF NOT EXISTS nodes (
  node_id    INTEGER PRIMARY KEY,
  thread_id  INTEGER NOT NULL REFERENCES threads(thread_id),
  parent_id  INTEGER REFERENCES nodes(node_id),
  routine_id INTEGER NOT NULL REFERENCES routines(routine_id),
  depth      INTEGER NOT NULL,             -- 0 for the thread root
  recursive  INTEGER NOT NULL DEFAULT 0,   -- 1 when an ancestor is the same routine
  calls      INTEGER NOT NULL,
  subrs      INTEGER NOT NULL,             -- calls made to direct children
  incl_ns    INTEGER NOT NULL,
  excl_ns    INTEGER NOT NULL,             -- measured on its own, not derived from children
  flops      REAL NOT NULL DEFAULT 0,      -- from the wrapper's cost model, summed over calls
  bytes      REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent_id);
CREATE INDEX IF NOT EXISTS nodes_thread ON nodes(thread_id);

-- A thread's nodes summed per routine, its root apart (root = 1), as the writer keeps them in
-- each flush's transaction: the per-routine views read these few rows instead of grouping every
-- node. incl_ns leaves out recursive nodes (their time is inside their outer call's). A thread
-- without rows here (an older writer, rows written by hand) is summed from its nodes by the
-- view thread_routine_totals, which is the definition either way.
CREATE TABLE IF NOT EXISTS thread_routine_sums (
  thread_id  INTEGER NOT NULL REFERENCES threads(thread_id),
  routine_id INTEGER NOT NULL REFERENCES routines(routine_id),
  root       INTEGER NOT NULL,
  calls      INTEGER NOT NULL,
  subrs      INTEGER NOT NULL,
  incl_ns    INTEGER NOT NULL,
  excl_ns    INTEGER NOT NULL,
  flops      REAL NOT NULL,
  bytes      REAL NOT NULL,
  PRIMARY KEY (thread_id, routine_id, root)
) WITHOUT ROWID;

-- Hardware / software counter deltas per node (PAPI, CUPTI).
CREATE TABLE IF NOT EXISTS counters (
  counter_id INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  source     TEXT NOT NULL                 -- 'papi', 'cupti'
);
CREATE TABLE IF NOT EXISTS node_counters (
  node_id    INTEGER NOT NULL REFERENCES nodes(node_id),
  counter_id INTEGER NOT NULL REFERENCES counters(counter_id),
  incl       REAL NOT NULL,
  excl       REAL NOT NULL,
  PRIMARY KEY (node_id, counter_id)
);

-- Shapes of GEMM-like calls, per call-path node and native call site.
CREATE TABLE IF NOT EXISTS shapes (
  shape_id   INTEGER PRIMARY KEY,
  node_id    INTEGER NOT NULL REFERENCES nodes(node_id),
  call_site  TEXT NOT NULL,                -- nearest Python frame, else the native caller
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  trans_a    TEXT NOT NULL,                -- 'N', 'T', 'C'
  trans_b    TEXT NOT NULL,
  dtype      TEXT NOT NULL,                -- 'f32', 'f64', 'c64', 'c128'
  batch      INTEGER NOT NULL DEFAULT 1,
  calls      INTEGER NOT NULL,
  time_ns    INTEGER NOT NULL,
  flops      REAL NOT NULL,
  bytes      REAL NOT NULL,
  threads    INTEGER                       -- threads the library ran the calls with; NULL: unknown
);
CREATE INDEX IF NOT EXISTS shapes_node ON shapes(node_id);

-- One row per call path, communication operation, communicator size and message size.
CREATE TABLE IF NOT EXISTS comm_ops (
  node_id    INTEGER NOT NULL REFERENCES nodes(node_id),
  op         TEXT NOT NULL,      -- 'MPI_Allreduce', 'MPI_Isend', 'MPI_Wait', 'ncclAllReduce', ...
  kind       TEXT NOT NULL,      -- 'p2p', 'collective', 'wait', 'setup', 'rma' (one-sided)
  blocking   INTEGER NOT NULL,   -- 1 blocking call, 0 start of a nonblocking operation
  comm_size  INTEGER NOT NULL,
  bytes      INTEGER NOT NULL,   -- per call: count x datatype size (this rank's send side, or recv for recv-only ops)
  calls      INTEGER NOT NULL,
  time_ns    INTEGER NOT NULL,
  UNIQUE (node_id, op, comm_size, bytes)
);

-- `--record-shapes` (SONDE_TORCH_SHAPES=1): a top-level operator's calls per call path and input
-- signature, the shapes and dtypes of its inputs as torch.profiler's record_shapes gives them
-- ('[[64, 1, 28, 28], [32, 1, 3, 3], [32]]', 'float, float, float'). Empty without the option.
CREATE TABLE IF NOT EXISTS op_shapes (
  node_id      INTEGER NOT NULL REFERENCES nodes(node_id),
  input_shapes TEXT NOT NULL,
  input_dtypes TEXT NOT NULL,
  calls        INTEGER NOT NULL,
  time_ns      INTEGER NOT NULL,   -- inclusive, as the operator's node
  PRIMARY KEY (node_id, input_shapes, input_dtypes)
);

-- Per thread: exposed = time inside blocking calls and waits; overlapped = time during which at
-- least one nonblocking operation was in flight while the thread was outside communication calls.
CREATE TABLE IF NOT EXISTS comm_overlap (
  thread_id     INTEGER PRIMARY KEY REFERENCES threads(thread_id),
  exposed_ns    INTEGER NOT NULL,
  overlapped_ns INTEGER NOT NULL,
  inflight_ns   INTEGER NOT NULL
);

-- Per-line costs of the functions named by `python3 -m sonde --lines`, like line_profiler:
-- a line's time runs from its first instruction to the next line event of the same frame, so it
-- includes the calls the line makes.
CREATE TABLE IF NOT EXISTS line_costs (
  thread_id  INTEGER NOT NULL REFERENCES threads(thread_id),
  routine_id INTEGER NOT NULL REFERENCES routines(routine_id),
  line       INTEGER NOT NULL,
  hits       INTEGER NOT NULL,
  time_ns    INTEGER NOT NULL,
  PRIMARY KEY (thread_id, routine_id, line)
);

-- Peak rates for % of peak: from `sonde calibrate` or given by hand.
CREATE TABLE IF NOT EXISTS peaks (
  run_id   INTEGER NOT NULL REFERENCES runs(run_id),
  resource TEXT NOT NULL,                  -- 'gemm.f32', 'gemm.f64', 'mem.bw'
  threads  INTEGER NOT NULL,               -- 0 = all (the run's cores), else that many
  value    REAL NOT NULL,                  -- GFLOP/s or GB/s
  source   TEXT NOT NULL,                  -- 'calibrated', 'manual', 'forced' (failed the checks)
  spread_pct REAL,                         -- the calibration's repeat-to-repeat spread, %; NULL: unknown
  PRIMARY KEY (run_id, resource, threads)
);

-- GPU activity (CUPTI), correlated to the launching call-path node.
CREATE TABLE IF NOT EXISTS gpu_activity (
  activity_id INTEGER PRIMARY KEY,
  process_id  INTEGER NOT NULL REFERENCES processes(process_id),
  node_id     INTEGER REFERENCES nodes(node_id),
  kind        TEXT NOT NULL,               -- 'kernel', 'memcpy', 'memset'
  name        TEXT NOT NULL,
  device      INTEGER, stream INTEGER,
  -- NULL, both: a kernel CUPTI could not time (replayed by SONDE_GPU_METRICS' range profiler);
  -- its duration is its gpu__time_duration.sum in gpu_metrics (gpu_activity_ns reads either)
  start_ns    INTEGER, end_ns INTEGER,
  bytes       INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers INTEGER, shared_bytes INTEGER,
  -- Work a CUDA graph ran (a replay): the call path where its graph node was created, captured
  -- from a launch during a stream capture or added with cudaGraphAdd*Node; node_id stays the
  -- replaying call (cudaGraphLaunch). NULL for work launched directly, or an unknown origin.
  origin_node_id INTEGER REFERENCES nodes(node_id)
);

-- Per-kernel hardware metrics (SONDE_GPU_METRICS, CUPTI's range profiler): one row per kernel
-- launch and metric, values as CUPTI evaluates them (counts, or % for pct_of_peak metrics).
CREATE TABLE IF NOT EXISTS gpu_metrics (
  activity_id INTEGER NOT NULL REFERENCES gpu_activity(activity_id),
  metric      TEXT NOT NULL,
  value       REAL NOT NULL,
  PRIMARY KEY (activity_id, metric)
);

-- Trace mode: one row per completed call, written from bounded per-thread buffers.
CREATE TABLE IF NOT EXISTS trace_events (
  thread_id  INTEGER NOT NULL REFERENCES threads(thread_id),
  node_id    INTEGER NOT NULL REFERENCES nodes(node_id),
  start_ns   INTEGER NOT NULL,             -- CLOCK_REALTIME-based
  end_ns     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS trace_events_thread ON trace_events(thread_id, start_ns);
CREATE TABLE IF NOT EXISTS trace_drops (
  thread_id  INTEGER PRIMARY KEY REFERENCES threads(thread_id),
  dropped    INTEGER NOT NULL
);

-- The sampler's counts (SONDE_SAMPLE_HZ, `sonde run --sample N`): samples of a thread's CPU time
-- taken by a timer, each counted on the node of the shadow stack the thread was in, with the
-- native frames below that node unwound at the sample. Never added into a node's exact figures.
CREATE TABLE IF NOT EXISTS samples (
  node_id    INTEGER NOT NULL REFERENCES nodes(node_id),
  frames     TEXT NOT NULL,   -- native frames below the node, outermost first, ';'-joined;
                              -- '' when the sample fell in the node's own frame (or sonde's)
  leaf       TEXT NOT NULL,   -- the innermost of them ('' with frames '')
  count      INTEGER NOT NULL,
  PRIMARY KEY (node_id, frames)
);

-- Adaptive timing (SONDE_ADAPTIVE, `sonde run --adaptive`): one row per call path whose times
-- are scaled from a random sample of its calls. Its nodes row keeps exact calls, flops and bytes;
-- its incl_ns and excl_ns are the warm-up's exact times plus the sampled calls' times scaled by
-- sampled_calls / timed_calls, incl_ns within about incl_se_ns (one standard error). Paths
-- timed in full have no row.
CREATE TABLE IF NOT EXISTS node_timing (
  node_id       INTEGER PRIMARY KEY REFERENCES nodes(node_id),
  warm_calls    INTEGER NOT NULL,   -- timed in full before sampling began
  sampled_calls INTEGER NOT NULL,   -- calls after the warm-up, timed or not
  timed_calls   INTEGER NOT NULL,   -- of those, the ones whose clock was read
  incl_se_ns    INTEGER NOT NULL    -- standard error of the node's incl_ns
);
