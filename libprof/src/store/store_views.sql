-- sonde profile schema, part 2: the public views over store_schema.sql's tables (the build
-- runs them after it, as one script).
-- Public views. They never change meaning without a schema_version bump, and readers accept
-- only this version, so the views stored in a file are the ones every reader uses.
-- Denominators: docs/metrics.md.

-- The routines that wait for another thread, an event or a connection, as data: the standard
-- library's threading.Condition.wait (Event.wait, queue.get and put, a DataLoader worker's
-- queue feeder) and Thread.join's lock wait, selectors' select (asyncio's loop,
-- multiprocessing's connection poll, a pin_memory thread's queue) and socket.accept
-- (multiprocessing's resource sharer): own = 0, the whole call is a wait. own = 1: the
-- routine's own time is a wait, its callees are work: a thread pool's worker loop
-- (concurrent.futures' _worker, multiprocessing.pool's worker), which waits for its next task in
-- a queue written in C (SimpleQueue.get), a call of no Python frame; and the pool's handler
-- threads (_handle_tasks, _handle_results, and _wait_for_updates, ThreadPool's time.sleep):
-- a ThreadPool's two, waiting for its whole life, were 1.9 s of a red team's 4.8 s 100 %. The standard library's
-- files only (under lib/python3.*, not a site- or dist-packages module of the same name).
-- any_thread = 1: a wait in any thread, its process's first too, for work the 100 % counts
-- elsewhere: a join of a child process (multiprocessing's Process.join, whose os.waitpid or
-- connection wait is inside it; torch.multiprocessing.spawn's ProcessContext.join), whose
-- process is profiled itself; multiprocessing's resource tracker, a process of its own
-- whose loop's own time is its read of the pipe (own = 1); and Thread.join, whose thread is
-- measured itself (its lock wait; from 3.13 join's own time, the C join in no Python frame:
-- own = 1). A first thread joining the thread it trained in read its wait as the run's first
-- row, 39.5 %, the 100 % 1.65 times the wall time and every share 40 % low (a red-team find). A spawn program's report read the
-- tracker 30.3 %, the join's select 14.3 % and popen_fork's poll 14.3 %, its sgemm_ 0.6 %.
-- Reads, sleeps and a C call's other waits are not named here; a Barrier.wait is a
-- Condition.wait (an imbalance between worker threads is left out with it).
CREATE VIEW IF NOT EXISTS wait_routines AS
  SELECT routine_id,
         (file LIKE '%/concurrent/futures/thread.py' OR file LIKE '%/multiprocessing/pool.py'
          OR file LIKE '%/multiprocessing/resource\_tracker.py' ESCAPE '\'
          OR (file LIKE '%/threading.py' AND name LIKE '%(join)')) AS own,
         (file LIKE '%/multiprocessing/process.py' OR file LIKE '%/torch/multiprocessing/spawn.py'
          OR file LIKE '%/multiprocessing/resource\_tracker.py' ESCAPE '\'
          OR (file LIKE '%/threading.py'
              AND (name LIKE '%(join)' OR name LIKE '%(\_wait\_for\_tstate\_lock)' ESCAPE '\')))
           AS any_thread
  FROM routines
  WHERE kind = 'python'
    AND ((file LIKE '%/lib/python3%' AND file NOT LIKE '%-packages/%'
          AND ((file LIKE '%/threading.py'
                AND (name LIKE '%(wait)' OR name LIKE '%(\_wait\_for\_tstate\_lock)' ESCAPE '\'
                     OR name LIKE '%(join)'))
            OR (file LIKE '%/selectors.py' AND name LIKE '%(select)')
            OR (file LIKE '%/socket.py' AND name LIKE '%(accept)')
            OR (file LIKE '%/concurrent/futures/thread.py' AND name LIKE '%(\_worker)' ESCAPE '\')
            OR (file LIKE '%/multiprocessing/pool.py'
                AND (name LIKE '%(worker)' OR name LIKE '%(\_handle\_tasks)' ESCAPE '\'
                     OR name LIKE '%(\_handle\_results)' ESCAPE '\'
                     OR name LIKE '%(\_wait\_for\_updates)' ESCAPE '\'))
            OR (file LIKE '%/multiprocessing/process.py' AND name LIKE '%(join)')
            OR (file LIKE '%/multiprocessing/resource\_tracker.py' ESCAPE '\'
                AND name LIKE '%(main)')))
      OR (file LIKE '%/torch/multiprocessing/spawn.py' AND name LIKE '%(join)'));

-- The threads running a DataLoader worker's loop (torch.utils.data's _worker_loop): a worker
-- process's first thread, which waits for its next batch's indices between fetches.
-- (The routines are found first, and the nodes by their ids: the planner joined each node to its
-- routine and matched the patterns per node, 5 million times in a file of 200,000 threads.)
CREATE VIEW IF NOT EXISTS loader_worker_threads AS
  SELECT DISTINCT n.thread_id AS thread_id
  FROM nodes n
  WHERE n.routine_id IN (
    SELECT routine_id FROM routines r
    WHERE r.kind = 'python' AND r.name LIKE '%(\_worker\_loop)' ESCAPE '\'
      AND instr(r.file, 'torch/utils/data/_utils/worker.py') > 0);

-- The waits for work left out of the 100 %, in threads that are not their process's first or
-- run a DataLoader worker's loop (and in any thread, those of wait_routines.any_thread): each
-- outermost node of a whole-wait
-- routine (wait_routines.own 0), with its subtree, and each node of an own-time wait routine not
-- inside one, its own time alone. ns: the time each takes out.
-- Counted whole, a 3-epoch run with 2 DataLoader workers had 18 helper threads making 4.1 s of a
-- 7.1 s 100 % against 1.6 s of wall time, threading.wait and socket.accept its first and third
-- rows. The first thread's waits stay: a training loop's wait for its batches is the run's
-- time. A worker's is not: a red-team CNN's 2 workers x 4 epochs waiting for indices read
-- 12.4 s of a 22.7 s 100 % (selectors.select the first row, 54.6 %) against 8.6 s of wall
-- time, every real row shrunk 2.6 times. (No node is read where the file names no such routine: any_wait, the outer loop, is
-- then empty; a WHERE term that said so still scanned every node, 0.02 s per 1M.)
CREATE VIEW IF NOT EXISTS waits AS
  WITH RECURSIVE
    w AS (SELECT n.node_id AS node_id, n.thread_id AS thread_id, n.parent_id AS parent_id,
                 n.calls AS calls, n.incl_ns AS incl_ns, n.excl_ns AS excl_ns, wr.own AS own
          FROM (SELECT 1 WHERE EXISTS (SELECT 1 FROM wait_routines)) any_wait
               CROSS JOIN nodes n CROSS JOIN threads t USING (thread_id)
               CROSS JOIN wait_routines wr USING (routine_id)
          -- The wait routines' ids first (loader_worker_threads says why): 4.4 -> 1.3 s. The
          -- nodes scanned first, CROSS JOIN fixing the order: inside counted_nodes SQLite built
          -- an index of every node by routine to look the few routines' nodes up, 0.2 s a 100k.
          WHERE n.routine_id IN (SELECT routine_id FROM wait_routines)
            AND (t.seq > 0 OR wr.any_thread
                 OR t.thread_id IN (SELECT thread_id FROM loader_worker_threads))),
    below(node_id) AS (
      SELECT c.node_id FROM w JOIN nodes c ON c.parent_id = w.node_id WHERE NOT w.own
      UNION
      SELECT c.node_id FROM below JOIN nodes c ON c.parent_id = below.node_id)
  SELECT node_id, thread_id, parent_id, calls, own,
         CASE WHEN own THEN excl_ns ELSE incl_ns END AS ns
  FROM w
  WHERE node_id NOT IN (SELECT node_id FROM below);

-- Every node inside a whole wait (the waits' nodes and their subtrees): in no sum over threads.
CREATE VIEW IF NOT EXISTS waited_nodes AS
  WITH RECURSIVE sub(node_id) AS (
    SELECT node_id FROM waits WHERE NOT own
    UNION ALL
    SELECT c.node_id FROM sub JOIN nodes c ON c.parent_id = sub.node_id)
  SELECT node_id FROM sub;

-- Per node at or above a wait: the waits' time at or below it (ns), taken from its inclusive
-- time; an own-time wait's (own), taken from its exclusive time; and the calls of the whole
-- waits right below it (calls), taken from its subrs.
CREATE VIEW IF NOT EXISTS wait_cuts AS
  WITH RECURSIVE up(node_id, ns, own, direct) AS (
    SELECT CASE WHEN own THEN node_id ELSE parent_id END, ns, CASE WHEN own THEN ns ELSE 0 END,
           CASE WHEN own THEN 0 ELSE calls END
    FROM waits
    UNION ALL
    SELECT n.parent_id, up.ns, 0, 0 FROM up JOIN nodes n ON n.node_id = up.node_id
    WHERE n.parent_id IS NOT NULL)
  SELECT node_id, SUM(ns) AS ns, SUM(own) AS own, SUM(direct) AS calls FROM up GROUP BY node_id;

-- One row per thread: its time (time_s: the root's inclusive time, from the thread's
-- registration to its end or the last flush), the part no measured call covers
-- (unmeasured_s), its CPU time since its registration (cpu_s, before a collection window's
-- opening too; NULL where not read: a file before version 11, a thread that ended under a
-- seccomp filter), and what it is:
--   idle (busy and waiting 0): no measured call at all (e.g. a BLAS worker pool);
--   waiting: a thread that waits for work most of its life: not its process's first thread,
--     under 5 % of its life in measured calls and, where its CPU time is known, under half of
--     it on a CPU (gloo's and NCCL's threads, a library's pool: a DDP rank's gloo thread ran 6
--     operators in 0.95 s of life, and its wait was a third of the rank's 100 %; with DDP's
--     fp16_compress_hook the gloo threads summed on a CPU 6-12 % of their lives, over the
--     5 % this bound was until 2026-12-07, and their waits made a red team's 100 % 5 times
--     its training threads' time, every candidate but `unmeasured` under its threshold);
--   busy: any other thread with a measured call.
-- waited_s: its waits for work left out of the 100 % (the view waits: in a thread that is not
-- its process's first, the time in the standard library's waits for another thread, an event
-- or a connection). counted_s is what the thread adds to the 100 % of hotspots and callpaths: a
-- busy thread's life, a waiting thread's measured calls (its wait is no routine's cost, and its
-- root leaves every table), less waited_s; an idle thread's nothing. counted: busy or waiting,
-- the threads whose call paths the views and readers sum over threads. off_cpu: a busy thread,
-- not the first, on a CPU under 5 % of its counted time: waits sonde cannot name (a C call's,
-- time.sleep in a Python function), still in the 100 %.
CREATE VIEW IF NOT EXISTS thread_times AS
  WITH per AS (
    SELECT t.thread_id AS thread_id, t.process_id AS process_id, t.seq AS seq, t.tid AS tid,
           t.name AS name, SUM(r.incl_ns) AS life_ns, SUM(r.excl_ns) AS unmeasured_ns,
           t.cpu_ns AS cpu_ns,
           MAX(EXISTS (SELECT 1 FROM nodes c WHERE c.parent_id = r.node_id)) AS called
    FROM threads t JOIN nodes r ON r.thread_id = t.thread_id AND r.parent_id IS NULL
    GROUP BY t.thread_id),
  judged AS (
    SELECT per.*, (called AND seq > 0 AND life_ns > 0 AND 20 * (life_ns - unmeasured_ns) < life_ns
                   AND (cpu_ns IS NULL OR 2 * cpu_ns < life_ns)) AS waiting,
           COALESCE(w.ns, 0) AS waited_ns
    FROM per LEFT JOIN (SELECT thread_id, SUM(ns) AS ns FROM waits GROUP BY thread_id) w
         USING (thread_id)),
  counted AS (
    SELECT *, CASE WHEN waiting THEN life_ns - unmeasured_ns - waited_ns
                   WHEN called THEN life_ns - waited_ns ELSE 0 END AS counted_ns
    FROM judged)
  SELECT thread_id, process_id, seq, tid, name, life_ns / 1e9 AS time_s,
         unmeasured_ns / 1e9 AS unmeasured_s, called AND NOT waiting AS busy, waiting,
         cpu_ns / 1e9 AS cpu_s, counted_ns / 1e9 AS counted_s,
         called AND NOT waiting AND seq > 0 AND cpu_ns IS NOT NULL AND 20 * cpu_ns < counted_ns
           AS off_cpu,
         called AS counted, waited_ns / 1e9 AS waited_s
  FROM counted;

-- One row per process: its wall time, its busy, idle and waiting threads, thread_s (their
-- counted_s summed), waited_s (their waits for work, left out of thread_s), and its off_cpu
-- threads and their counted time.
CREATE VIEW IF NOT EXISTS process_times AS
  SELECT p.process_id AS process_id, p.pid AS pid,
         (COALESCE(p.ended_ns, p.last_flush_ns) - p.started_ns) / 1e9 AS wall_s,
         COALESCE(SUM(tt.busy), 0) AS busy_threads,
         COALESCE(SUM(1 - tt.busy - tt.waiting), 0) AS idle_threads,
         COALESCE(SUM(tt.counted_s), 0) AS thread_s,
         COALESCE(SUM(tt.waiting), 0) AS waiting_threads,
         COALESCE(SUM(tt.off_cpu), 0) AS off_cpu_threads,
         COALESCE(SUM(CASE WHEN tt.off_cpu THEN tt.counted_s END), 0) AS off_cpu_s,
         COALESCE(SUM(tt.waited_s), 0) AS waited_s
  FROM processes p LEFT JOIN thread_times tt USING (process_id)
  GROUP BY p.process_id;

-- The run's set-up, one row per outermost set-up frame: a module's import (`<import>`), the
-- interpreter's start-up and teardown (`<interpreter start-up>`, `<interpreter teardown>`),
-- communication set-up (comm_ops of kind 'setup': MPI_Init, MPI_Finalize, NCCL's communicator
-- creation) and torch.distributed's (init_process_group, new_group, destroy_process_group, as
-- c10d_waits takes them). ns: its inclusive time. A fork child's inherited frames (calls 0)
-- are its parent's. setup_time sums them: what the candidates' shares leave out of the busy
-- threads' time (a 2,048-step MLP's `import torch` and teardown, 0.75 s of its 1.29 s, had
-- every share of its loop read at 42 % of its size, and no rule fired).
CREATE VIEW IF NOT EXISTS setup_nodes AS
  -- (One scan of the nodes for the few routines named: joined from the routines, SQLite built
  -- an index of every node first, 0.4 s on a million.)
  WITH RECURSIVE marked(node_id) AS (
    SELECT node_id FROM nodes WHERE routine_id IN (
      SELECT routine_id FROM routines
      WHERE kind = 'python'
        AND (name IN ('<import>', '<interpreter start-up>', '<interpreter teardown>')
             OR (instr(file, 'torch/distributed/distributed_c10d.py') > 0
                 AND (name LIKE '%(init\_process\_group)' ESCAPE '\'
                      OR name LIKE '%(new\_group)' ESCAPE '\'
                      OR name LIKE '%(destroy\_process\_group)' ESCAPE '\'))))
    UNION
    SELECT node_id FROM comm_ops WHERE kind = 'setup'),
  up(mark, node_id) AS (
    SELECT m.node_id, n.parent_id FROM marked m JOIN nodes n USING (node_id)
    UNION ALL
    SELECT up.mark, n.parent_id FROM up JOIN nodes n ON n.node_id = up.node_id
    WHERE n.parent_id IS NOT NULL),
  nested(node_id) AS (SELECT DISTINCT up.mark FROM up JOIN marked m ON m.node_id = up.node_id)
  SELECT n.node_id AS node_id, n.thread_id AS thread_id, n.incl_ns AS ns
  FROM marked m JOIN nodes n USING (node_id)
  WHERE n.calls > 0 AND n.parent_id IS NOT NULL AND m.node_id NOT IN (SELECT node_id FROM nested);

-- One row: the set-up's time over the run (setup_s, setup_nodes summed). The busy threads'
-- time less it (run_totals.thread_s - setup_s) is what every candidate's share is of.
CREATE VIEW IF NOT EXISTS setup_time AS
  SELECT COALESCE(SUM(ns), 0) / 1e9 AS setup_s FROM setup_nodes;

-- One row for the file: the run's total is its wall time (first process start to last process
-- end); thread_s, the threads' counted time summed (the busy threads' lives, the waiting
-- threads' measured calls), is the 100 % of hotspots and callpaths.
CREATE VIEW IF NOT EXISTS run_totals AS
  SELECT (SELECT (MAX(COALESCE(ended_ns, last_flush_ns)) - MIN(started_ns)) / 1e9
          FROM processes) AS wall_s,
         COALESCE(SUM(thread_s), 0) AS thread_s,
         COALESCE(SUM(busy_threads), 0) AS busy_threads,
         COALESCE(SUM(idle_threads), 0) AS idle_threads,
         COUNT(*) AS processes,
         COALESCE(SUM(waiting_threads), 0) AS waiting_threads,
         COALESCE(SUM(off_cpu_threads), 0) AS off_cpu_threads,
         COALESCE(SUM(off_cpu_s), 0) AS off_cpu_s,
         COALESCE(SUM(waited_s), 0) AS waited_s
  FROM process_times;

-- One row per thread, routine and root (1: the thread's root node): its nodes summed, incl_ns
-- over the non-recursive ones. The writer keeps these sums in thread_routine_sums; a thread
-- that has none there is summed from its nodes here, by this definition.
-- (The roots, one node a thread, are taken apart from the grouping: two sort keys where three
-- cost twice as much on a million nodes; the other nodes are read by thread, of the threads
-- without sums alone, `+` keeping SQLite from reading them through the parent index: scanned,
-- every node was read to be left out, in every file since version 8. A node of a thread the
-- file has no row for, in a damaged file, is in no total: no view that sums threads counts it.)
CREATE VIEW IF NOT EXISTS thread_routine_totals AS
  SELECT thread_id, routine_id, root, calls, subrs, incl_ns, excl_ns, flops, bytes
  FROM thread_routine_sums
  UNION ALL
  SELECT n.thread_id, n.routine_id, 1, n.calls, n.subrs,
         CASE WHEN n.recursive = 0 THEN n.incl_ns ELSE 0 END, n.excl_ns, n.flops, n.bytes
  FROM nodes n
  WHERE n.parent_id IS NULL AND n.thread_id NOT IN (SELECT thread_id FROM thread_routine_sums)
    AND n.thread_id IN (SELECT thread_id FROM threads)
  UNION ALL
  SELECT n.thread_id, n.routine_id, 0, SUM(n.calls), SUM(n.subrs),
         SUM(CASE WHEN n.recursive = 0 THEN n.incl_ns ELSE 0 END), SUM(n.excl_ns),
         SUM(n.flops), SUM(n.bytes)
  FROM threads t CROSS JOIN nodes n ON n.thread_id = t.thread_id
  WHERE t.thread_id NOT IN (SELECT thread_id FROM thread_routine_sums) AND +n.parent_id IS NOT NULL
  GROUP BY n.routine_id, n.thread_id;

-- What the waits (the view waits) take from thread_routine_totals, per thread, routine and
-- root: the nodes inside a whole wait whole, and from each node at or above a wait the waits'
-- time (incl_ns, where not recursive), an own-time wait's (excl_ns) and the calls of the whole
-- waits right below it (subrs). (CROSS JOIN: the few waits look their nodes up; joined the
-- other way SQLite scanned every node, 0.04 s of a 1M-node report's 0.1 s.)
CREATE VIEW IF NOT EXISTS wait_adjustments AS
  SELECT n.thread_id AS thread_id, n.routine_id AS routine_id, 0 AS root, SUM(n.calls) AS calls,
         SUM(n.subrs) AS subrs, SUM(CASE WHEN n.recursive = 0 THEN n.incl_ns ELSE 0 END) AS incl_ns,
         SUM(n.excl_ns) AS excl_ns, SUM(n.flops) AS flops, SUM(n.bytes) AS bytes
  FROM waited_nodes w CROSS JOIN nodes n ON n.node_id = w.node_id
  GROUP BY n.thread_id, n.routine_id
  UNION ALL
  SELECT n.thread_id, n.routine_id, n.parent_id IS NULL, 0, SUM(c.calls),
         SUM(CASE WHEN n.recursive = 0 THEN c.ns ELSE 0 END), SUM(c.own), 0, 0
  FROM wait_cuts c CROSS JOIN nodes n ON n.node_id = c.node_id
  GROUP BY n.thread_id, n.routine_id, n.parent_id IS NULL;

-- A fork child's inherited frames: the calls its parent had open when it forked, open in the
-- child too from its first instant (calls 0; its root alone counts one), down from its root.
-- The child's whole life runs under them: merged with the parent's, a DataLoader's main read
-- 1.755 s for its one call of 0.883 s, its __iter__ 870 ms, a worker's life (a red-team
-- find). counted_routine_totals takes their inclusive time, but for their own, out of their
-- routines' (the call paths keep it: the tree is the child's stack).
CREATE VIEW IF NOT EXISTS inherited_frames AS
  WITH RECURSIVE down(node_id) AS (
    SELECT c.node_id FROM processes p JOIN threads t USING (process_id)
    JOIN nodes r ON r.thread_id = t.thread_id AND r.parent_id IS NULL
    JOIN nodes c ON c.parent_id = r.node_id
    WHERE p.origin = 'fork' AND c.calls = 0
    UNION ALL
    SELECT c.node_id FROM down d JOIN nodes c ON c.parent_id = d.node_id WHERE c.calls = 0)
  SELECT node_id FROM down;

-- thread_routine_totals as the 100 % (run_totals.thread_s) counts it: less the waits
-- (wait_adjustments; a routine only waited in has no row, where a node of no call that holds
-- time keeps its: a fork child's inherited frames), a busy thread whole, a waiting
-- thread's root without its own time (its wait; its inclusive time is its calls'), an idle
-- thread not at all. Every counted nanosecond is one row's exclusive time.
CREATE VIEW IF NOT EXISTS counted_routine_totals AS
  WITH counted AS (SELECT thread_id, waiting FROM thread_times WHERE counted),
  signed AS (
    SELECT thread_id, routine_id, root, calls, subrs, incl_ns, excl_ns, flops, bytes
    FROM thread_routine_totals
    UNION ALL
    SELECT thread_id, routine_id, root, -calls, -subrs, -incl_ns, -excl_ns, -flops, -bytes
    FROM wait_adjustments
    UNION ALL
    -- (The frames' own time is their inclusive less their exclusive time, each less what the
    -- waits cut from it: the cuts apart, as rows of their own, where a LEFT JOIN to wait_cuts
    -- scanned every cut for every frame, 0.45 s of a 0.8 s report on 200 DataLoader workers.)
    SELECT n.thread_id, n.routine_id, 0, 0, 0,
           CASE WHEN n.recursive = 0 THEN n.excl_ns - n.incl_ns ELSE 0 END, 0, 0, 0
    FROM inherited_frames i JOIN nodes n USING (node_id)
    UNION ALL
    SELECT n.thread_id, n.routine_id, 0, 0, 0,
           CASE WHEN n.recursive = 0 THEN c.ns - c.own ELSE 0 END, 0, 0, 0
    FROM wait_cuts c CROSS JOIN nodes n ON n.node_id = c.node_id
    WHERE c.node_id IN (SELECT node_id FROM inherited_frames)),
  net AS (
    SELECT thread_id, routine_id, root, SUM(calls) AS calls, SUM(subrs) AS subrs,
           SUM(incl_ns) AS incl_ns, SUM(excl_ns) AS excl_ns, SUM(flops) AS flops,
           SUM(bytes) AS bytes
    FROM signed GROUP BY thread_id, routine_id, root
    HAVING root OR SUM(calls) <> 0 OR SUM(incl_ns) <> 0 OR SUM(excl_ns) <> 0)
  SELECT s.thread_id AS thread_id, s.routine_id AS routine_id, s.root AS root, s.calls AS calls,
         s.subrs AS subrs,
         CASE WHEN s.root AND r.waiting THEN s.incl_ns - s.excl_ns ELSE s.incl_ns END AS incl_ns,
         CASE WHEN s.root AND r.waiting THEN 0 ELSE s.excl_ns END AS excl_ns, s.flops AS flops,
         s.bytes AS bytes
  -- (Each row looks its thread up: the other way, SQLite indexed every row of net by thread.)
  FROM net s CROSS JOIN counted r USING (thread_id);

-- The nodes as every sum of call paths over threads reads them (callpaths, routine_edges, and
-- sonde's readers of nodes that merge threads): without the nodes inside whole waits
-- (waited_nodes), and a node at or above a wait with the waits' time out of its incl_ns, an
-- own-time wait's out of its excl_ns and the whole waits' calls out of its subrs (wait_cuts).
-- The same columns as nodes, in no order. (Two parts, not a LEFT JOIN to wait_cuts: SQLite
-- scanned the cuts for every node, 1M nodes by 45k cuts past any time limit. sonde's readers
-- read nodes itself where the file has no wait, the rows then the same.)
CREATE VIEW IF NOT EXISTS counted_nodes AS
  SELECT node_id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs, incl_ns,
         excl_ns, flops, bytes
  FROM nodes
  WHERE NOT EXISTS (SELECT 1 FROM waits)
     OR (node_id NOT IN (SELECT node_id FROM waited_nodes)
         AND node_id NOT IN (SELECT node_id FROM wait_cuts))
  UNION ALL
  SELECT n.node_id, n.thread_id, n.parent_id, n.routine_id, n.depth, n.recursive, n.calls,
         n.subrs - c.calls, n.incl_ns - c.ns, n.excl_ns - c.own, n.flops, n.bytes
  FROM wait_cuts c CROSS JOIN nodes n ON n.node_id = c.node_id;

-- One row per routine (routine_id: kind, library or file, line and name; two routines of one
-- display name are two rows), over the counted threads (counted_routine_totals). incl_s leaves
-- out recursive nodes, whose time is inside their outer call's; the percentages are of
-- run_totals.thread_s.
CREATE VIEW IF NOT EXISTS hotspots AS
  WITH per AS (
    SELECT s.routine_id AS routine_id, SUM(s.calls) AS calls, SUM(s.subrs) AS subrs,
           SUM(s.incl_ns) AS incl_ns, SUM(s.excl_ns) AS excl_ns
    FROM counted_routine_totals s
    GROUP BY s.routine_id),
  total AS (SELECT thread_s * 1e9 AS t FROM run_totals)
  SELECT r.name AS routine, r.kind AS kind, per.calls AS calls, per.incl_ns / 1e9 AS incl_s,
         per.excl_ns / 1e9 AS excl_s,
         CASE WHEN total.t > 0 THEN 100.0 * per.excl_ns / total.t ELSE 0 END AS excl_pct,
         CASE WHEN total.t > 0 THEN 100.0 * per.incl_ns / total.t ELSE 0 END AS incl_pct,
         per.subrs AS subrs, r.library AS library, r.file AS file, r.line AS line,
         r.routine_id AS routine_id
  FROM per JOIN routines r USING (routine_id), total;

-- One row per caller and callee routine: the callee's nodes under a node of the caller, summed
-- over the counted threads (a thread's top-level calls have its root, <thread>, as caller). primitive_calls and incl_s
-- are over the callee's nodes that are not recursive (cProfile's primitive calls and cumulative
-- time); a node's own figures are its routine's under that caller.
CREATE VIEW IF NOT EXISTS routine_edges AS
  SELECT p.routine_id AS caller_id, c.routine_id AS routine_id, SUM(c.calls) AS calls,
         SUM(CASE WHEN c.recursive = 0 THEN c.calls ELSE 0 END) AS primitive_calls,
         SUM(CASE WHEN c.recursive = 0 THEN c.incl_ns ELSE 0 END) / 1e9 AS incl_s,
         SUM(c.excl_ns) / 1e9 AS excl_s
  FROM counted_nodes c JOIN nodes p ON p.node_id = c.parent_id
  GROUP BY p.routine_id, c.routine_id;

-- Every node's call path below its thread root: path joins the frames' names by ';' (what
-- people read), path_ids their routine ids by '/' (what distinguishes two routines of one name).
CREATE VIEW IF NOT EXISTS node_paths AS
  WITH RECURSIVE p(node_id, path, path_ids) AS (
    SELECT n.node_id, r.name, CAST(n.routine_id AS TEXT)
      FROM nodes n JOIN routines r USING (routine_id)
      JOIN nodes root ON root.node_id = n.parent_id WHERE root.depth = 0
    UNION ALL
    SELECT c.node_id, p.path || ';' || r.name, p.path_ids || '/' || c.routine_id
      FROM nodes c JOIN p ON c.parent_id = p.node_id JOIN routines r ON r.routine_id = c.routine_id)
  SELECT node_id, path, path_ids FROM p;

-- The device time of each GPU activity row, defined once: its CUPTI timestamps', or, for a
-- kernel CUPTI could not time (replayed by SONDE_GPU_METRICS' range profiler: start_ns and
-- end_ns NULL), the gpu__time_duration.sum the range profiler measured for it.
CREATE VIEW IF NOT EXISTS gpu_activity_ns AS
  SELECT g.activity_id AS activity_id, g.node_id AS node_id, g.kind AS kind,
         COALESCE(g.end_ns - g.start_ns,
                  (SELECT CAST(m.value AS INTEGER) FROM gpu_metrics m
                    WHERE m.activity_id = g.activity_id AND m.metric = 'gpu__time_duration.sum'))
           AS ns
  FROM gpu_activity g;

-- What each GPU activity row is to the iteration breakdown, defined once: work 'nccl' (a
-- kernel of NCCL's, ncclKernel_* or ncclDevKernel_*: communication, whatever phase launched
-- it), 'compute' (any other kernel), 'h2d' (a host-to-device copy), 'copy' (any other copy) or
-- 'memset', with its device time as gpu_activity_ns gives it. The breakdown's device times and
-- its communication/compute overlap read it.
CREATE VIEW IF NOT EXISTS gpu_work AS
  SELECT g.activity_id AS activity_id, g.process_id AS process_id, g.node_id AS node_id,
         g.device AS device, g.stream AS stream, g.start_ns AS start_ns, g.end_ns AS end_ns,
         t.ns AS ns,
         CASE WHEN g.kind = 'kernel' AND g.name GLOB 'nccl*' THEN 'nccl'
              WHEN g.kind = 'kernel' THEN 'compute'
              WHEN g.kind = 'memcpy' AND g.name = 'memcpy HtoD' THEN 'h2d'
              WHEN g.kind = 'memcpy' THEN 'copy'
              ELSE g.kind END AS work
  FROM gpu_activity g JOIN gpu_activity_ns t USING (activity_id);

-- One row per call path of routines (path_ids), merged over the counted threads (counted_nodes)
-- and processes; routine_id
-- is the path's last frame, gpu_s the device time launched from that frame itself.
CREATE VIEW IF NOT EXISTS callpaths AS
  SELECT p.path AS path, SUM(n.calls) AS calls, SUM(n.incl_ns) / 1e9 AS incl_s,
         SUM(n.excl_ns) / 1e9 AS excl_s, SUM(n.subrs) AS subrs, SUM(n.flops) AS flops,
         COALESCE(SUM(g.gpu_ns), 0) / 1e9 AS gpu_s, n.routine_id AS routine_id,
         p.path_ids AS path_ids
  FROM node_paths p JOIN counted_nodes n USING (node_id)
       LEFT JOIN (SELECT node_id, SUM(ns) AS gpu_ns FROM gpu_activity_ns
                  WHERE node_id IS NOT NULL GROUP BY node_id) g USING (node_id)
  GROUP BY p.path_ids;

-- One row per sampled native path (SONDE_SAMPLE_HZ): the shadow-stack path it fell under (''
-- for the thread's root), its native frames, the count, its share of its thread's samples and
-- the standard error of that share, sqrt(share (1 - share) / thread's samples).
CREATE VIEW IF NOT EXISTS sampled_paths AS
  WITH per_thread AS (SELECT n.thread_id, SUM(s.count) AS total
                        FROM samples s JOIN nodes n USING (node_id) GROUP BY n.thread_id)
  SELECT s.node_id AS node_id, n.thread_id AS thread_id, COALESCE(p.path, '') AS path,
         s.frames AS frames, s.leaf AS leaf, s.count AS count,
         s.count * 1.0 / t.total AS share,
         sqrt((s.count * 1.0 / t.total) * (1 - s.count * 1.0 / t.total) / t.total) AS share_err
  FROM samples s JOIN nodes n USING (node_id) JOIN per_thread t USING (thread_id)
       LEFT JOIN node_paths p USING (node_id);

-- The same merged over threads and processes by path and frames (what `sonde tree` and `report`
-- show): share and share_err are of all the file's samples.
CREATE VIEW IF NOT EXISTS sampled_callpaths AS
  WITH m AS (SELECT path, frames, leaf, SUM(count) AS count FROM sampled_paths
              GROUP BY path, frames),
       n AS (SELECT SUM(count) AS total FROM m)
  SELECT m.path AS path, m.frames AS frames, m.leaf AS leaf, m.count AS count,
         m.count * 1.0 / n.total AS share,
         sqrt((m.count * 1.0 / n.total) * (1 - m.count * 1.0 / n.total) / n.total) AS share_err
  FROM m, n;

-- The peak that work run on `threads` threads is held against, for every thread count from 1 to
-- the largest a run has (its cores, a peak's or a shape's count): the calibrated peak of the
-- nearest thread count not above it (peaks.threads 0 stands for the run's cores; a row naming
-- the count outright wins over it). No row where no peak is at or below the count.
CREATE VIEW IF NOT EXISTS peaks_at_threads AS
  WITH RECURSIVE
    calibrated(run_id, resource, threads, value) AS (
      SELECT pk.run_id, pk.resource,
             CASE WHEN pk.threads > 0 THEN pk.threads ELSE r.cores END, pk.value
      FROM peaks pk JOIN runs r USING (run_id)
      WHERE pk.value > 0 AND (pk.threads > 0 OR (r.cores > 0 AND NOT EXISTS (
              SELECT 1 FROM peaks e WHERE e.run_id = pk.run_id AND e.resource = pk.resource
                                      AND e.threads = r.cores AND e.value > 0)))),
    top(n) AS (
      SELECT MIN(4096, MAX(1, COALESCE((SELECT MAX(cores) FROM runs), 1),
                              COALESCE((SELECT MAX(threads) FROM peaks), 1),
                              COALESCE((SELECT MAX(threads) FROM shapes), 1),
                              COALESCE((SELECT MAX(CAST(value AS INTEGER)) FROM run_info
                                        WHERE key = 'torch.num_threads'), 1)))),
    counts(t) AS (SELECT 1 UNION ALL SELECT t + 1 FROM counts, top WHERE t < top.n),
    chosen(run_id, resource, threads, peak_threads) AS (
      SELECT c.run_id, c.resource, counts.t, MAX(c.threads)
      FROM calibrated c JOIN counts ON c.threads <= counts.t
      GROUP BY c.run_id, c.resource, counts.t)
  SELECT ch.run_id AS run_id, ch.resource AS resource, ch.threads AS threads,
         ch.peak_threads AS peak_threads, c.value AS value
  FROM chosen ch JOIN calibrated c
       ON c.run_id = ch.run_id AND c.resource = ch.resource AND c.threads = ch.peak_threads;

-- Each shapes row with the thread count its calls ran with and the peaks they are held
-- against: gemm.<dtype> and mem.bw at that count (NULL: unknown count, or no peak at or below
-- it). The count is the library's own, recorded per call; where a oneDNN build cannot say (TBB,
-- threadpool runtimes), the process's torch.num_threads from run_info (the Python hook records
-- torch.get_num_threads() of a program that imported torch), the pool torch runs oneDNN on.
CREATE VIEW IF NOT EXISTS shape_threads AS
  SELECT s.shape_id AS shape_id, s.dtype AS dtype, pr.run_id AS run_id,
         COALESCE(s.threads, CASE WHEN r.kind = 'onednn'
                                  THEN CAST(tn.value AS INTEGER) END) AS threads
  FROM shapes s JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
       JOIN threads t ON t.thread_id = n.thread_id
       JOIN processes pr ON pr.process_id = t.process_id
       LEFT JOIN run_info tn ON tn.run_id = pr.run_id AND tn.process_id = pr.process_id
            AND tn.key = 'torch.num_threads' AND CAST(tn.value AS INTEGER) > 0;

CREATE VIEW IF NOT EXISTS shape_peaks AS
  SELECT st.shape_id AS shape_id, st.threads AS threads, g.peak_threads AS peak_threads,
         g.value AS gemm_peak, bw.value AS mem_bw
  FROM shape_threads st
       LEFT JOIN peaks_at_threads g ON g.run_id = st.run_id AND g.threads = st.threads
            AND g.resource = 'gemm.' || st.dtype
       LEFT JOIN peaks_at_threads bw ON bw.run_id = st.run_id AND bw.threads = st.threads
            AND bw.resource = 'mem.bw';

-- pct_peak: the calls' FLOPs over what the peak for their thread count does in their time,
-- SUM(flops) / SUM(time x peak) (one thread count: gflops / peak); NULL when a call of the
-- group has no peak. threads: the thread count when all calls share one, else NULL.
-- peak_gflops, mem_bw_gbs: the peaks, time-weighted over the group, for the roofline.
-- A routine is its routine_id (kind, library, file, line, name): two routines of one name
-- (an sgemm_ in two BLAS libraries) are two rows, never summed.
-- intensity, attainable_gflops and bound: the roofline, as routine_metrics defines it.
CREATE VIEW IF NOT EXISTS gemm_shapes AS
  WITH g AS (
  SELECT r.name AS routine, s.call_site AS call_site, s.m AS m, s.n AS n, s.k AS k,
         s.dtype AS dtype, SUM(s.calls) AS calls, SUM(s.time_ns) / 1e9 AS time_s,
         CASE WHEN SUM(s.time_ns) > 0 THEN SUM(s.flops) / SUM(s.time_ns) END AS gflops,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.gemm_peak) = COUNT(*)
              THEN 100.0 * SUM(s.flops) / SUM(s.time_ns * sp.gemm_peak) END AS pct_peak,
         CASE WHEN MIN(sp.threads) = MAX(sp.threads) AND COUNT(sp.threads) = COUNT(*)
              THEN MIN(sp.threads) END AS threads,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.gemm_peak) = COUNT(*)
              THEN SUM(s.time_ns * sp.gemm_peak) / SUM(s.time_ns) END AS peak_gflops,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.mem_bw) = COUNT(*)
              THEN SUM(s.time_ns * sp.mem_bw) / SUM(s.time_ns) END AS mem_bw_gbs,
         SUM(s.flops) AS flops, SUM(s.bytes) AS bytes, n.routine_id AS routine_id,
         r.library AS library
  FROM shapes s JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
       JOIN shape_peaks sp USING (shape_id)
  GROUP BY n.routine_id, s.call_site, s.m, s.n, s.k, s.dtype)
  SELECT g.*,
         CASE WHEN flops > 0 AND bytes > 0 THEN flops / bytes END AS intensity,
         CASE WHEN flops > 0 AND bytes > 0 AND peak_gflops > 0 AND mem_bw_gbs > 0
              THEN MIN(peak_gflops, flops / bytes * mem_bw_gbs) END AS attainable_gflops,
         CASE WHEN flops > 0 AND bytes > 0 AND peak_gflops > 0 AND mem_bw_gbs > 0
              THEN CASE WHEN flops / bytes * mem_bw_gbs < peak_gflops THEN 'memory'
                        ELSE 'compute' END END AS bound
  FROM g;

-- One row per operator, input signature and calling routine (`--record-shapes`): torch.profiler's
-- key_averages(group_by_input_shape=True) with the caller (the Python frame that ran it) beside.
-- time_s is inclusive; mean_us per call.
CREATE VIEW IF NOT EXISTS operator_shapes AS
  SELECT r.name AS operator, o.input_shapes AS input_shapes, o.input_dtypes AS input_dtypes,
         SUM(o.calls) AS calls, SUM(o.time_ns) / 1e9 AS time_s,
         CASE WHEN SUM(o.calls) > 0 THEN SUM(o.time_ns) / 1e3 / SUM(o.calls) END AS mean_us,
         pr.name AS caller, pr.file AS caller_file, pr.line AS caller_line,
         n.routine_id AS routine_id, p.routine_id AS caller_id
  FROM op_shapes o JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
       JOIN nodes p ON p.node_id = n.parent_id JOIN routines pr ON pr.routine_id = p.routine_id
  GROUP BY n.routine_id, o.input_shapes, o.input_dtypes, p.routine_id;

-- One row per routine with GEMM shapes (routine_id): its shapes' FLOPs, time and bytes, and
-- the peaks for the thread counts its calls ran with, time-weighted as in gemm_shapes. What
-- the per-routine % of peak and roofline use (sonde metrics, candidates). Its figures are
-- gemm_shapes' over another grouping, written out again because SQLite has no GROUPING SETS:
-- summing gemm_shapes' rows would need its raw sums (time in ns, time x peak) as columns of
-- that documented view, and would round each shape's figure before the routine's.
CREATE VIEW IF NOT EXISTS routine_peaks AS
  SELECT n.routine_id AS routine_id, r.name AS routine, r.kind AS kind,
         SUM(s.flops) AS flops, SUM(s.time_ns) / 1e9 AS time_s,
         CASE WHEN SUM(s.time_ns) > 0 THEN SUM(s.flops) / SUM(s.time_ns) END AS gflops,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.gemm_peak) = COUNT(*)
              THEN 100.0 * SUM(s.flops) / SUM(s.time_ns * sp.gemm_peak) END AS pct_peak,
         CASE WHEN MIN(sp.threads) = MAX(sp.threads) AND COUNT(sp.threads) = COUNT(*)
              THEN MIN(sp.threads) END AS threads,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.gemm_peak) = COUNT(*)
              THEN SUM(s.time_ns * sp.gemm_peak) / SUM(s.time_ns) END AS peak_gflops,
         CASE WHEN SUM(s.time_ns) > 0 AND COUNT(sp.mem_bw) = COUNT(*)
              THEN SUM(s.time_ns * sp.mem_bw) / SUM(s.time_ns) END AS mem_bw_gbs
  FROM shapes s JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
       JOIN shape_peaks sp USING (shape_id)
  GROUP BY n.routine_id;

-- One row per routine (routine_id) with its own FLOPs and bytes: the cost model's figures of
-- its calls, every node of it summed (a recursive call's own cost is its own: no double count).
CREATE VIEW IF NOT EXISTS routine_totals AS
  SELECT routine_id, SUM(flops) AS flops, SUM(bytes) AS bytes FROM thread_routine_totals
  GROUP BY routine_id;

-- One row per routine of hotspots (routine_id) with its cost model's figures and roofline:
-- what `sonde metrics`, `sonde candidates` and the viewer print per routine. flops and bytes
-- are routine_totals'; gflops is flops over the routine's inclusive time; intensity, flops
-- per byte moved. dtype: that of its GEMM shapes' FLOPs, the most (the first by name of
-- equals), else routines.dtype. The ceilings (peak_gflops: gemm.<dtype>; mem_bw_gbs) and
-- pct_peak are routine_peaks' for a routine with shapes (their calls' thread counts); a
-- routine without shapes is held against them at the process's blas.threads (threads; the
-- run-wide run_info row, else the root process's), pct_peak = gflops / peak.
-- attainable_gflops, the roofline: min(peak, intensity x mem.bw); bound: 'memory' when
-- memory's is the lower ceiling, else 'compute'. NULL where no FLOPs, bytes or peak say.
CREATE VIEW IF NOT EXISTS routine_metrics AS
  WITH run AS (SELECT MIN(run_id) AS run_id FROM runs),
  blas AS (
    SELECT CASE WHEN CAST(i.value AS INTEGER) > 0
                     AND CAST(CAST(i.value AS INTEGER) AS TEXT) = i.value
                THEN CAST(i.value AS INTEGER) END AS threads
    FROM run_info i JOIN run USING (run_id) LEFT JOIN processes p USING (process_id)
    WHERE i.key = 'blas.threads'
    ORDER BY i.process_id IS NULL DESC, p.origin = 'root' DESC, p.started_ns, i.process_id
    LIMIT 1),
  at_blas AS (
    SELECT pt.resource AS resource, pt.value AS value
    FROM peaks_at_threads pt JOIN run USING (run_id) JOIN blas ON pt.threads = blas.threads),
  shape_dtype AS (
    SELECT routine_id, dtype FROM (
      SELECT n.routine_id AS routine_id, s.dtype AS dtype,
             ROW_NUMBER() OVER (PARTITION BY n.routine_id
                                ORDER BY SUM(s.flops) DESC, s.dtype) AS nth
      FROM shapes s JOIN nodes n USING (node_id) GROUP BY n.routine_id, s.dtype)
    WHERE nth = 1),
  f AS (
    SELECT h.routine_id AS routine_id, h.routine AS routine, h.kind AS kind,
           COALESCE(sd.dtype, r.dtype) AS dtype, h.calls AS calls, h.incl_s AS incl_s,
           COALESCE(t.flops, 0) AS flops, COALESCE(t.bytes, 0) AS bytes,
           rp.routine_id IS NOT NULL AS shaped, rp.pct_peak AS shapes_pct,
           CASE WHEN rp.routine_id IS NOT NULL THEN rp.threads
                ELSE (SELECT threads FROM blas) END AS threads,
           CASE WHEN rp.routine_id IS NOT NULL THEN rp.peak_gflops
                ELSE (SELECT value FROM at_blas WHERE resource = 'gemm.' || r.dtype) END AS peak,
           CASE WHEN rp.routine_id IS NOT NULL THEN rp.mem_bw_gbs
                ELSE (SELECT value FROM at_blas WHERE resource = 'mem.bw') END AS bw
    FROM hotspots h JOIN routines r USING (routine_id)
         LEFT JOIN routine_totals t USING (routine_id)
         LEFT JOIN routine_peaks rp USING (routine_id)
         LEFT JOIN shape_dtype sd USING (routine_id)),
  g AS (
    SELECT f.*, CASE WHEN flops > 0 AND incl_s > 0 THEN flops / (incl_s * 1e9) END AS gflops,
           CASE WHEN flops > 0 AND bytes > 0 THEN flops / bytes END AS intensity,
           CASE WHEN flops > 0 AND peak > 0 THEN peak END AS peak_gflops,
           CASE WHEN flops > 0 AND bw > 0 THEN bw END AS mem_bw_gbs
    FROM f)
  SELECT routine, kind, dtype, threads, calls, incl_s, flops, bytes, gflops, intensity,
         peak_gflops, mem_bw_gbs,
         CASE WHEN shaped THEN shapes_pct
              WHEN gflops IS NOT NULL AND peak_gflops IS NOT NULL
              THEN 100.0 * gflops / peak_gflops END AS pct_peak,
         CASE WHEN intensity IS NOT NULL AND peak_gflops IS NOT NULL AND mem_bw_gbs IS NOT NULL
              THEN MIN(peak_gflops, intensity * mem_bw_gbs) END AS attainable_gflops,
         CASE WHEN intensity IS NOT NULL AND peak_gflops IS NOT NULL AND mem_bw_gbs IS NOT NULL
              THEN CASE WHEN intensity * mem_bw_gbs < peak_gflops THEN 'memory'
                        ELSE 'compute' END END AS bound,
         routine_id
  FROM g;

-- One row per kernel launch: its time, launch configuration (blocks per grid, threads per
-- block), and the metrics recorded for it (SONDE_GPU_METRICS; NULL where not): TAU's three
-- counts and the speed-of-light throughputs in % of peak (memory: the compute-memory
-- throughput, else DRAM's).
CREATE VIEW IF NOT EXISTS gpu_kernel_launches AS
  WITH m(activity_id, warps, inst, gld, sm_pct, memory_pct) AS (
    SELECT activity_id,
           MAX(CASE metric WHEN 'smsp__warps_launched.sum' THEN value END),
           MAX(CASE metric WHEN 'smsp__inst_executed.sum' THEN value END),
           MAX(CASE metric WHEN 'smsp__inst_executed_op_global_ld.sum' THEN value END),
           MAX(CASE metric WHEN 'sm__throughput.avg.pct_of_peak_sustained_elapsed' THEN value END),
           COALESCE(
             MAX(CASE metric WHEN 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'
                 THEN value END),
             MAX(CASE metric WHEN 'dram__throughput.avg.pct_of_peak_sustained_elapsed' THEN value END))
    FROM gpu_metrics GROUP BY activity_id)
  SELECT g.activity_id AS activity_id, g.name AS kernel, g.node_id AS node_id,
         t.ns AS ns,
         COALESCE(g.grid_x, 1) * COALESCE(g.grid_y, 1) * COALESCE(g.grid_z, 1) AS grid,
         COALESCE(g.block_x, 1) * COALESCE(g.block_y, 1) * COALESCE(g.block_z, 1) AS block,
         g.registers AS registers, g.shared_bytes AS shared_bytes,
         m.activity_id IS NOT NULL AS measured, m.warps AS warps, m.inst AS inst, m.gld AS gld,
         m.sm_pct AS sm_pct, m.memory_pct AS memory_pct
  FROM gpu_activity g JOIN gpu_activity_ns t USING (activity_id) LEFT JOIN m USING (activity_id)
  WHERE g.kind = 'kernel';

-- The figures of gpu_kernels (by_path 1: per kernel and call path) and gpu_kernel_totals
-- (by_path 0: per kernel), written once: each launch is counted in both groupings.
-- grid, block, registers, shared_bytes: those of the group's longest launch (the earliest of
-- equal ones); launch_configs: how many distinct grid x block configurations its launches had
-- (1: every launch alike). warps_per_inst and gld_per_inst: TAU's ratios over the launches
-- whose counts were recorded; sm_pct_peak and memory_pct_peak: means weighted by launch time
-- over the launches that recorded them (plain means where those took no time).
CREATE VIEW IF NOT EXISTS gpu_kernel_groups AS
  WITH keyed AS (
    SELECT l.*, b.by_path AS by_path,
           CASE WHEN b.by_path THEN (SELECT p.path FROM node_paths p WHERE p.node_id = l.node_id)
           END AS call_path
    FROM gpu_kernel_launches l, (SELECT 0 AS by_path UNION ALL SELECT 1 AS by_path) b),
  ranked AS (
    SELECT keyed.*, ROW_NUMBER() OVER (PARTITION BY by_path, kernel, call_path
                                       ORDER BY ns DESC, activity_id) AS nth
    FROM keyed)
  SELECT by_path, kernel, call_path, COUNT(*) AS calls, SUM(ns) / 1e9 AS time_s,
         AVG(ns) / 1e9 AS avg_s,
         MAX(CASE WHEN nth = 1 THEN grid END) AS grid,
         MAX(CASE WHEN nth = 1 THEN block END) AS block,
         COUNT(DISTINCT grid || 'x' || block) AS launch_configs,
         MAX(CASE WHEN nth = 1 THEN registers END) AS registers,
         MAX(CASE WHEN nth = 1 THEN shared_bytes END) AS shared_bytes,
         SUM(measured) AS metric_launches,
         SUM(CASE WHEN measured THEN ns ELSE 0 END) / 1e9 AS metric_time_s,
         SUM(warps) / SUM(CASE WHEN warps IS NOT NULL THEN inst END) AS warps_per_inst,
         SUM(gld) / SUM(CASE WHEN gld IS NOT NULL THEN inst END) AS gld_per_inst,
         CASE WHEN SUM(CASE WHEN sm_pct IS NOT NULL THEN ns END) > 0
              THEN SUM(sm_pct * ns) / SUM(CASE WHEN sm_pct IS NOT NULL THEN ns END)
              ELSE AVG(sm_pct) END AS sm_pct_peak,
         CASE WHEN SUM(CASE WHEN memory_pct IS NOT NULL THEN ns END) > 0
              THEN SUM(memory_pct * ns) / SUM(CASE WHEN memory_pct IS NOT NULL THEN ns END)
              ELSE AVG(memory_pct) END AS memory_pct_peak
  FROM ranked
  GROUP BY by_path, kernel, call_path;

-- One row per GPU kernel and the call path that launched it (NULL: a launch sonde did not
-- see); the figures as in gpu_kernel_groups.
CREATE VIEW IF NOT EXISTS gpu_kernels AS
  SELECT kernel, call_path, calls, time_s, avg_s, grid, block, launch_configs, registers,
         shared_bytes, metric_launches, metric_time_s, warps_per_inst, gld_per_inst,
         sm_pct_peak, memory_pct_peak
  FROM gpu_kernel_groups WHERE by_path = 1;

-- One row per GPU kernel (by name) over all its launches: what sonde metrics --section kernels
-- and the gpu-kernel rule print.
CREATE VIEW IF NOT EXISTS gpu_kernel_totals AS
  SELECT kernel, calls, time_s, avg_s, grid, block, launch_configs, registers, shared_bytes,
         metric_launches, metric_time_s, warps_per_inst, gld_per_inst, sm_pct_peak,
         memory_pct_peak
  FROM gpu_kernel_groups WHERE by_path = 0;

-- One row per kernel, launching call path and metric recorded (SONDE_GPU_METRICS): the
-- launches measured, the metric's sum and mean over them, and their kernel time.
CREATE VIEW IF NOT EXISTS gpu_kernel_metrics AS
  SELECT g.name AS kernel, p.path AS call_path, m.metric AS metric, COUNT(*) AS launches,
         SUM(m.value) AS total, AVG(m.value) AS mean,
         SUM(t.ns) / 1e9 AS time_s
  FROM gpu_metrics m JOIN gpu_activity g USING (activity_id) JOIN gpu_activity_ns t USING (activity_id)
       LEFT JOIN node_paths p USING (node_id)
  GROUP BY g.name, p.path, m.metric;

-- CUDA graphs. Work a graph runs is counted where it was replayed (gpu_activity.node_id, the
-- cudaGraphLaunch call: callpaths.gpu_s, gpu_kernels) and, in these two views, also where its
-- graph node was created (origin_node_id: the launch captured during a stream capture, or the
-- cudaGraphAdd*Node call). One row per call-path node graph nodes were created at: the records
-- of their replays and those records' device time. Records whose origin is unknown are in none.
CREATE VIEW IF NOT EXISTS gpu_graph_origins AS
  SELECT g.origin_node_id AS node_id, COUNT(*) AS records, SUM(t.ns) AS ns
  FROM gpu_activity g JOIN gpu_activity_ns t USING (activity_id)
  WHERE g.origin_node_id IS NOT NULL
  GROUP BY g.origin_node_id;

-- One row per kernel (copy, memset), call path its graph node was created at (origin_path) and
-- call path that replayed it (call_path, NULL: a replay sonde did not see), merged over threads
-- and processes: records and their device time.
CREATE VIEW IF NOT EXISTS gpu_graph_kernels AS
  WITH k AS (
    SELECT g.kind AS kind, g.name AS name, g.origin_node_id AS origin_node_id,
           g.node_id AS node_id, COUNT(*) AS records, SUM(t.ns) AS ns
    FROM gpu_activity g JOIN gpu_activity_ns t USING (activity_id)
    WHERE g.origin_node_id IS NOT NULL
    GROUP BY g.kind, g.name, g.origin_node_id, g.node_id)
  SELECT k.kind AS kind, k.name AS name, o.path AS origin_path, p.path AS call_path,
         SUM(k.records) AS records, SUM(k.ns) / 1e9 AS time_s
  FROM k JOIN node_paths o ON o.node_id = k.origin_node_id
       LEFT JOIN node_paths p ON p.node_id = k.node_id
  GROUP BY k.kind, k.name, o.path, p.path;

-- Ranks. A file from one rank, or merged from many (sonde merge), holds each rank's processes.
-- The rank of a process: its own; else its nearest ancestor's (a child a rank started without
-- the launcher's variables, a DataLoader worker's child); else 0 where no process of the file
-- has a rank, so a file without ranks reads as one rank. Where some have, a process of no rank
-- below none is the launcher's side (torch.multiprocessing.spawn's parent, whose children learn
-- their rank from init_process_group, and its resource tracker): it has no row. The walk up
-- stops at 64 generations (a damaged file's loop of parents ends there).
CREATE VIEW IF NOT EXISTS process_ranks AS
  WITH RECURSIVE up(process_id, ancestor, rank, depth) AS (
    SELECT process_id, parent_process_id, rank, 0 FROM processes
    UNION ALL
    SELECT up.process_id, p.parent_process_id, p.rank, up.depth + 1
    FROM up JOIN processes p ON p.process_id = up.ancestor
    WHERE up.rank IS NULL AND up.depth < 64),
  nearest AS (SELECT process_id, MAX(rank) AS rank FROM up GROUP BY process_id),
  any_rank AS (SELECT EXISTS (SELECT 1 FROM processes WHERE rank IS NOT NULL) AS ranked)
  SELECT p.process_id AS process_id, p.run_id AS run_id, COALESCE(n.rank, 0) AS rank
  FROM processes p JOIN nearest n USING (process_id), any_rank a
  WHERE n.rank IS NOT NULL OR NOT a.ranked;

-- One row per rank: its wall time (first process start to last process end), its busy
-- threads' time summed (busy_s: the denominator of a rank's percentages) and its host.
CREATE VIEW IF NOT EXISTS rank_times AS
  SELECT pr.rank AS rank, COUNT(*) AS processes,
         (MAX(COALESCE(p.ended_ns, p.last_flush_ns)) - MIN(p.started_ns)) / 1e9 AS wall_s,
         COALESCE(SUM(pt.thread_s), 0) AS busy_s, COALESCE(SUM(pt.busy_threads), 0) AS busy_threads,
         MAX(p.host) AS host
  FROM process_ranks pr JOIN processes p USING (process_id) JOIN process_times pt USING (process_id)
  GROUP BY pr.rank;

-- hotspots per rank: one row per rank and routine (routine_id), over the rank's busy threads;
-- bytes from the wrappers' cost models (for communication, the bytes the calls moved);
-- percentages of the rank's busy_s.
CREATE VIEW IF NOT EXISTS rank_hotspots AS
  WITH per_thread AS (
    -- Summed per thread first: the join to a thread's rank then runs once per thread and
    -- routine, not once per node (1,024 merged ranks: 3.7 -> 2.8 s here).
    SELECT s.thread_id AS thread_id, s.routine_id AS routine_id, SUM(s.calls) AS calls,
           SUM(s.subrs) AS subrs, SUM(s.incl_ns) AS incl_ns, SUM(s.excl_ns) AS excl_ns,
           SUM(s.bytes) AS bytes
    FROM counted_routine_totals s
    GROUP BY s.thread_id, s.routine_id),
  per AS (
    SELECT pr.rank AS rank, pt.routine_id AS routine_id, SUM(pt.calls) AS calls,
           SUM(pt.subrs) AS subrs, SUM(pt.incl_ns) AS incl_ns, SUM(pt.excl_ns) AS excl_ns,
           SUM(pt.bytes) AS bytes
    FROM per_thread pt JOIN threads t USING (thread_id) JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank, pt.routine_id)
  SELECT per.rank AS rank, r.name AS routine, r.kind AS kind, per.calls AS calls,
         per.incl_ns / 1e9 AS incl_s, per.excl_ns / 1e9 AS excl_s, per.bytes AS bytes,
         CASE WHEN rt.busy_s > 0 THEN 100.0 * per.excl_ns / 1e9 / rt.busy_s ELSE 0 END AS excl_pct,
         CASE WHEN rt.busy_s > 0 THEN 100.0 * per.incl_ns / 1e9 / rt.busy_s ELSE 0 END AS incl_pct,
         per.subrs AS subrs, r.library AS library, r.file AS file, r.line AS line,
         r.routine_id AS routine_id
  FROM per JOIN routines r USING (routine_id) JOIN rank_times rt USING (rank);

-- Load imbalance per routine, and per phase (a region, kind 'region', is a phase the program
-- named), over every rank: a rank that never called it counts 0 s. Times are the ranks'
-- inclusive times in it; max_over_mean 1 is perfect balance; lost_s (max - mean) is what the
-- other ranks wait, on average, where they next synchronise. slowest_rank: the lowest of ties.
CREATE VIEW IF NOT EXISTS rank_imbalance AS
  WITH all_ranks AS (SELECT COUNT(*) AS ranks FROM rank_times),
  ordered AS (
    SELECT routine_id, rank, incl_s,
           ROW_NUMBER() OVER (PARTITION BY routine_id ORDER BY incl_s DESC, rank) AS nth
    FROM rank_hotspots),
  agg AS (
    SELECT routine_id, COUNT(*) AS ranks_with, SUM(incl_s) AS sum_s, MAX(incl_s) AS max_s,
           MIN(incl_s) AS min_s, MAX(CASE WHEN nth = 1 THEN rank END) AS slowest_rank
    FROM ordered GROUP BY routine_id)
  SELECT r.name AS routine, r.kind AS kind, a.ranks AS ranks, agg.ranks_with AS ranks_with,
         agg.sum_s / a.ranks AS mean_s, agg.max_s AS max_s,
         CASE WHEN agg.ranks_with < a.ranks THEN 0.0 ELSE agg.min_s END AS min_s,
         CASE WHEN agg.sum_s > 0 THEN agg.max_s * a.ranks / agg.sum_s END AS max_over_mean,
         CASE WHEN agg.ranks_with = a.ranks AND agg.min_s > 0 THEN agg.max_s / agg.min_s END
           AS max_over_min,
         agg.slowest_rank AS slowest_rank, agg.max_s - agg.sum_s / a.ranks AS lost_s,
         r.routine_id AS routine_id
  FROM agg JOIN routines r USING (routine_id), all_ranks a;

-- The waits for communication that PyTorch marks with no event: DDP's reducer waits for its
-- buckets' all-reduces at the end of the backward pass, inside the autograd engine after its
-- last node (finalize_backward), which is then the own time of the Python frame that runs the
-- engine: torch.autograd's backward or grad (2.x: graph.py's _engine_run_backward). One row per
-- such frame's node beneath which a nonblocking collective was posted: ns, its own time, taken
-- as that wait, with the engine's own scheduling beside it (small: a DDP rank that waited for
-- nobody had 9.7 ms of it in 0.34 s of backward; its peer, waiting for the slow rank, 257 ms).
-- The iteration breakdown counts it in t_comm and the rank rules as communication.
CREATE VIEW IF NOT EXISTS engine_waits AS
  WITH RECURSIVE up(node_id) AS (
    SELECT n.parent_id FROM comm_ops co JOIN nodes n USING (node_id)
    WHERE co.blocking = 0 AND n.parent_id IS NOT NULL
    UNION
    SELECT n.parent_id FROM up JOIN nodes n USING (node_id) WHERE n.parent_id IS NOT NULL)
  SELECT n.node_id AS node_id, n.thread_id AS thread_id, n.excl_ns AS ns
  FROM up JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
  WHERE r.kind = 'python'
    AND ((r.file LIKE '%/torch/autograd/__init__.py'
          AND (r.name LIKE '%(backward)' OR r.name LIKE '%(grad)'))
      OR (r.file LIKE '%/torch/autograd/graph.py'
          AND r.name LIKE '%(\_engine\_run\_backward)' ESCAPE '\'));

-- Communication per rank: time inside communication calls and PyTorch's unmarked waits for
-- them (comm_s: comm_ops' time and engine_waits'; MPI_Init and other setup apart, setup_s), its
-- share of the rank's busy_s, the calls and the bytes they moved.
-- The waits in torch.distributed's Python layer (torch/distributed/distributed_c10d.py): its
-- barrier, blocking all_reduce, broadcast, recv, ... post their c10d operator (a comm_ops row,
-- nonblocking) and then wait on it in the frame, in no event PyTorch marks. Per outermost such
-- frame (not init_process_group, new_group or destroy_process_group, which are set-up), its
-- time less the postings beneath it: ns. rank_comm and rank_overlap count it as communication
-- the rank waited for; before, a rank blocked 4.0 s in a barrier, an all_reduce, a broadcast and
-- a work.wait read 0 s of communication and 100 % overlap (a red-team find), while the
-- breakdown's t_comm counted those frames.
CREATE VIEW IF NOT EXISTS c10d_waits AS
  WITH RECURSIVE frames(node_id, setup) AS (
    SELECT n.node_id, (r.name LIKE '%(init\_process\_group)' ESCAPE '\'
                       OR r.name LIKE '%(new\_group)' ESCAPE '\'
                       OR r.name LIKE '%(destroy\_process\_group)' ESCAPE '\')
    FROM routines r JOIN nodes n USING (routine_id)
    WHERE r.kind = 'python' AND instr(r.file, 'torch/distributed/distributed_c10d.py') > 0),
  up(frame, node_id) AS (
    SELECT f.node_id, n.parent_id FROM frames f JOIN nodes n USING (node_id)
    UNION ALL
    SELECT up.frame, n.parent_id FROM up JOIN nodes n ON n.node_id = up.node_id
    WHERE n.parent_id IS NOT NULL),
  outer_frames(node_id) AS (
    SELECT node_id FROM frames WHERE NOT setup
    EXCEPT SELECT up.frame FROM up JOIN frames f ON f.node_id = up.node_id),
  -- Each posting node once: a node has a comm_ops row per message size, which posted sums.
  posted_up(comm, node_id) AS (
    SELECT n.node_id, n.parent_id FROM nodes n
    WHERE n.node_id IN (SELECT node_id FROM comm_ops WHERE kind <> 'setup')
      AND EXISTS (SELECT 1 FROM frames)
    UNION ALL
    SELECT p.comm, n.parent_id FROM posted_up p JOIN nodes n ON n.node_id = p.node_id
    WHERE n.parent_id IS NOT NULL),
  posted(frame, ns) AS (
    SELECT p.node_id, SUM(co.time_ns) FROM posted_up p JOIN outer_frames o ON o.node_id = p.node_id
    JOIN comm_ops co ON co.node_id = p.comm GROUP BY p.node_id)
  SELECT n.node_id AS node_id, n.thread_id AS thread_id,
         MAX(n.incl_ns - COALESCE(p.ns, 0), 0) AS ns
  FROM outer_frames o JOIN nodes n USING (node_id) LEFT JOIN posted p ON p.frame = o.node_id;

CREATE VIEW IF NOT EXISTS rank_comm AS
  WITH c AS (
    SELECT pr.rank AS rank, SUM(CASE WHEN co.kind <> 'setup' THEN co.time_ns ELSE 0 END) AS comm_ns,
           SUM(CASE WHEN co.kind = 'setup' THEN co.time_ns ELSE 0 END) AS setup_ns,
           SUM(co.calls) AS calls, SUM(co.bytes * co.calls) AS bytes
    FROM comm_ops co JOIN nodes n USING (node_id) JOIN threads t USING (thread_id)
         JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank),
  w AS (
    SELECT pr.rank AS rank, SUM(w.ns) AS ns
    FROM (SELECT thread_id, ns FROM engine_waits UNION ALL SELECT thread_id, ns FROM c10d_waits) w
    JOIN threads t USING (thread_id) JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank)
  SELECT rt.rank AS rank, rt.wall_s AS wall_s, rt.busy_s AS busy_s,
         (COALESCE(c.comm_ns, 0) + COALESCE(w.ns, 0)) / 1e9 AS comm_s,
         COALESCE(c.setup_ns, 0) / 1e9 AS setup_s,
         CASE WHEN rt.busy_s > 0
              THEN 100.0 * (COALESCE(c.comm_ns, 0) + COALESCE(w.ns, 0)) / 1e9 / rt.busy_s END
           AS comm_pct,
         COALESCE(c.calls, 0) AS calls, COALESCE(c.bytes, 0) AS bytes
  FROM rank_times rt LEFT JOIN c USING (rank) LEFT JOIN w USING (rank);

-- Per routine, the communication under it: every communication call path walked up to its
-- thread's root, its inclusive time counted once for each routine above it (a recursive routine
-- above it twice counts it once): comm_ns. A communication call path is a node with comm_ops
-- rows, or a frame of torch.distributed's Python layer (torch/distributed/distributed_c10d.py:
-- all_reduce, broadcast, ... wait there on the collective their c10d operator only posts; the
-- breakdown's t_comm counts them so too, metrics/breakdown_roles.hpp), the outermost one where
-- they nest. Beside it the routine's own inclusive time (incl_ns, recursive nodes left out) and
-- is_comm, 1 for a routine that is a communication call itself. sonde ranks takes a routine
-- whose time is mostly communication for one that waited, not one that computed.
CREATE VIEW IF NOT EXISTS routine_comm AS
  WITH RECURSIVE comm(node_id) AS (
    SELECT node_id FROM comm_ops
    UNION
    SELECT n.node_id FROM routines r JOIN nodes n USING (routine_id)
    WHERE r.kind = 'python' AND instr(r.file, 'torch/distributed/distributed_c10d.py') > 0),
  up(comm_node, node_id) AS (
    SELECT c.node_id, n.parent_id FROM comm c JOIN nodes n USING (node_id)
    UNION ALL
    SELECT up.comm_node, n.parent_id FROM up JOIN nodes n ON n.node_id = up.node_id
    WHERE n.parent_id IS NOT NULL),
  nested(node_id) AS (SELECT DISTINCT up.comm_node FROM up JOIN comm c ON c.node_id = up.node_id),
  -- DDP's reducer's wait, the own time of the frame running the engine (engine_waits): its
  -- frame and those above it hold that much communication.
  engine_up(wait, node_id) AS (
    SELECT node_id, node_id FROM engine_waits
    UNION ALL
    SELECT e.wait, n.parent_id FROM engine_up e JOIN nodes n ON n.node_id = e.node_id
    WHERE n.parent_id IS NOT NULL),
  under AS (
    SELECT routine_id, SUM(ns) AS comm_ns FROM (
      SELECT DISTINCT a.routine_id AS routine_id, up.comm_node AS comm_node, c.incl_ns AS ns
      FROM up JOIN nodes a ON a.node_id = up.node_id JOIN nodes c ON c.node_id = up.comm_node
      WHERE up.comm_node NOT IN (SELECT node_id FROM nested)
      UNION
      SELECT DISTINCT a.routine_id, e.wait, w.ns FROM engine_up e
      JOIN nodes a ON a.node_id = e.node_id JOIN engine_waits w ON w.node_id = e.wait)
    GROUP BY routine_id),
  own AS (
    SELECT routine_id, SUM(CASE WHEN recursive = 0 THEN incl_ns ELSE 0 END) AS incl_ns
    FROM nodes GROUP BY routine_id)
  SELECT own.routine_id AS routine_id, own.incl_ns AS incl_ns,
         COALESCE(under.comm_ns, 0) AS comm_ns,
         own.routine_id IN (SELECT n.routine_id FROM comm JOIN nodes n USING (node_id)) AS is_comm
  FROM own LEFT JOIN under USING (routine_id);

-- A rank's busy threads' time in three parts that add up to its busy_s: inside communication
-- calls (comm_s), in MPI's or NCCL's set-up (setup_s), and the rest (compute_s: outside every
-- communication call: the rank's computation and whatever else it does between calls). The
-- per-rank bars of the viewer stack these. compute_s stays at 0 where communication measured
-- on threads that are not busy would exceed busy_s.
CREATE VIEW IF NOT EXISTS rank_breakdown AS
  SELECT rank, busy_s, MAX(busy_s - comm_s - setup_s, 0.0) AS compute_s, comm_s, setup_s
  FROM rank_comm;

-- Bytes and effective bandwidth per operation, communicator size and message size (bytes per
-- call), over all ranks: gbs is the bytes moved over the time inside the calls (GB/s), for
-- blocking operations that move bytes only (a nonblocking call's time is its posting, not its
-- transfer; a barrier moves none).
CREATE VIEW IF NOT EXISTS comm_bandwidth AS
  SELECT co.op AS op, co.kind AS kind, co.blocking AS blocking, co.comm_size AS comm_size,
         co.bytes AS message_bytes, COUNT(DISTINCT pr.rank) AS ranks, SUM(co.calls) AS calls,
         SUM(co.time_ns) / 1e9 AS time_s, SUM(co.bytes * co.calls) AS bytes,
         CASE WHEN SUM(co.calls) > 0 THEN SUM(co.time_ns) / 1e3 / SUM(co.calls) END AS us_per_call,
         CASE WHEN co.blocking = 1 AND co.bytes > 0 AND SUM(co.time_ns) > 0
              THEN 1.0 * SUM(co.bytes * co.calls) / SUM(co.time_ns) END AS gbs
  FROM comm_ops co JOIN nodes n USING (node_id) JOIN threads t USING (thread_id)
       JOIN process_ranks pr USING (process_id)
  GROUP BY co.op, co.kind, co.blocking, co.comm_size, co.bytes;

-- Exposed against overlapped communication per rank (comm_overlap summed over its threads, and
-- PyTorch's unmarked waits, engine_waits, exposed):
-- overlap_pct is the overlapped share of exposed + overlapped time (0: nothing hidden).
CREATE VIEW IF NOT EXISTS rank_overlap AS
  WITH o AS (
    SELECT pr.rank AS rank, SUM(o.exposed_ns) AS exposed_ns, SUM(o.overlapped_ns) AS overlapped_ns,
           SUM(o.inflight_ns) AS inflight_ns
    FROM comm_overlap o JOIN threads t USING (thread_id) JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank),
  w AS (
    SELECT pr.rank AS rank, SUM(w.ns) AS ns
    FROM engine_waits w JOIN threads t USING (thread_id) JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank),
  -- A wait in torch.distributed's Python layer, or DDP's reducer's at the end of backward
  -- (engine_waits), is on an operation in flight: comm_overlap counted it overlapped; it was
  -- exposed. (The reducer's was counted both, and a rank waiting 0.876 s of 0.967 s in flight
  -- read 52.4 % overlapped: a red-team find.)
  cw AS (
    SELECT pr.rank AS rank, SUM(w.ns) AS ns
    FROM c10d_waits w JOIN threads t USING (thread_id) JOIN process_ranks pr USING (process_id)
    GROUP BY pr.rank),
  e AS (SELECT o.rank, o.inflight_ns,
               o.exposed_ns + COALESCE(w.ns, 0) + COALESCE(cw.ns, 0) AS waited_ns,
               MAX(o.overlapped_ns - COALESCE(w.ns, 0) - COALESCE(cw.ns, 0), 0) AS overlapped_ns
        FROM o LEFT JOIN w USING (rank) LEFT JOIN cw USING (rank))
  SELECT rank, waited_ns / 1e9 AS exposed_s, overlapped_ns / 1e9 AS overlapped_s,
         inflight_ns / 1e9 AS inflight_s,
         CASE WHEN waited_ns + overlapped_ns > 0
              THEN 100.0 * overlapped_ns / (waited_ns + overlapped_ns) END AS overlap_pct
  FROM e;

-- What a scaling study compares between runs (sonde scaling), one row: the ranks, the threads
-- each rank's BLAS or OpenMP ran with (blas.threads, else OMP_NUM_THREADS, else 1), and the
-- run's time, the slowest rank's wall time (every rank waits for it).
CREATE VIEW IF NOT EXISTS run_scale AS
  SELECT (SELECT COUNT(*) FROM rank_times) AS ranks,
         COALESCE((SELECT MAX(CAST(value AS INTEGER)) FROM run_info WHERE key = 'blas.threads'),
                  (SELECT MAX(CAST(value AS INTEGER)) FROM run_info
                   WHERE key = 'env.OMP_NUM_THREADS'), 1) AS threads,
         (SELECT MAX(wall_s) FROM rank_times) AS time_s;

-- Adaptive timing per routine: how much of its time is scaled from sampled calls and the
-- standard error of its inclusive time (its call paths' errors added in quadrature: their
-- samples are independent). Routines timed in full have no row; reports mark the others.
CREATE VIEW IF NOT EXISTS scaled_times AS
  SELECT r.routine_id AS routine_id, r.name AS routine, r.kind AS kind, SUM(n.calls) AS calls,
         SUM(t.sampled_calls) AS sampled_calls, SUM(t.timed_calls) AS timed_calls,
         SUM(CASE WHEN n.recursive = 0 THEN n.incl_ns ELSE 0 END) / 1e9 AS incl_s,
         sqrt(SUM(t.incl_se_ns * 1.0 * t.incl_se_ns)) / 1e9 AS incl_se_s
  FROM node_timing t JOIN nodes n USING (node_id) JOIN routines r USING (routine_id)
  GROUP BY r.routine_id;

-- One row per DataLoader worker process (torch.utils.data): a process whose Python frames hold
-- _utils/worker.py's _worker_loop, or that fetched batches (_utils/fetch.py's fetch) without
-- iterating a DataLoader itself (dataloader.py's __next__: a loader without workers fetches in
-- the training process; under a collection window a worker's loop began before it). Its life,
-- the batches it fetched and the time they took. Empty without the Python hook.
CREATE VIEW IF NOT EXISTS dataloader_workers AS
  WITH named AS (
    SELECT routine_id,
           CASE WHEN name LIKE '%(fetch)' THEN 'fetch' WHEN name LIKE '%(\_\_next\_\_)' ESCAPE '\'
                THEN 'next' ELSE 'loop' END AS role
    FROM routines
    WHERE kind = 'python'
      AND ((name LIKE '%(\_worker\_loop)' ESCAPE '\'
            AND instr(file, 'torch/utils/data/_utils/worker.py') > 0)
        OR (name LIKE '%(fetch)' AND instr(file, 'torch/utils/data/_utils/fetch.py') > 0)
        OR (name LIKE '%(\_\_next\_\_)' ESCAPE '\'
            AND instr(file, 'torch/utils/data/dataloader.py') > 0))),
  per AS (
    SELECT t.process_id AS process_id,
           SUM(CASE WHEN nm.role = 'loop' THEN s.calls ELSE 0 END) AS loops,
           SUM(CASE WHEN nm.role = 'next' THEN s.calls ELSE 0 END) AS nexts,
           SUM(CASE WHEN nm.role = 'fetch' THEN s.calls ELSE 0 END) AS batches,
           SUM(CASE WHEN nm.role = 'fetch' THEN s.incl_ns ELSE 0 END) AS fetch_ns
    FROM thread_routine_totals s JOIN named nm USING (routine_id) JOIN threads t USING (thread_id)
    WHERE NOT s.root
    GROUP BY t.process_id)
  SELECT p.process_id AS process_id, p.pid AS pid, p.ppid AS ppid, p.started_ns AS started_ns,
         COALESCE(p.ended_ns, p.last_flush_ns) AS ended_ns, per.batches AS batches,
         per.fetch_ns / 1e9 AS fetch_s
  FROM per JOIN processes p USING (process_id)
  WHERE per.loops > 0 OR (per.batches > 0 AND per.nexts = 0);
