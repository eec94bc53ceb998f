// The one schema version of a sonde profile: what libsonde writes and the newest the analyzers
// read. Bumped whenever a table or a public view changes meaning (docs/schema.md).
#pragma once

namespace sonde {

// 2: shapes.threads (the thread count a call ran with); % of peak against the peak for it.
// 3: ranks (processes.host, rank, world_size, local_rank), comm_ops and comm_overlap.
//    The rank views (rank_hotspots, rank_imbalance, rank_comm, comm_bandwidth, rank_overlap).
// 4: gpu_kernels' grid, block, registers and shared_bytes are its longest launch's (were
//    averages), with launch_configs and the metric columns; gpu_kernel_launches,
//    gpu_kernel_groups, gpu_kernel_totals (per kernel) and routine_totals (a routine's own
//    FLOPs and bytes); gemm_shapes groups by routine_id (was the routine's name) and gives it
//    with the library. A version 3 file is read with these views made at open.
// 5: gpu_activity.start_ns and end_ns may be NULL (a kernel CUPTI's range profiler replayed
//    comes without timestamps); gpu_activity_ns gives every row's device time, which
//    callpaths, gpu_kernel_launches and gpu_kernel_metrics read. Versions 3 and 4 are read with
//    gpu_activity_ns made at open (their rows are all timed).
// 6: op_shapes (`--record-shapes`: operators' input signatures) and the operator_shapes view;
//    a version 3 to 5 file has neither, and readers skip what needs them. gpu_work (each GPU
//    activity row's work: nccl, compute, h2d, copy, memset), which the iteration breakdown's
//    device times read; versions 3 to 5 get it at open.
//    gpu_activity.origin_node_id (where a CUDA graph's replayed work was captured), with the
//    views gpu_graph_origins and gpu_graph_kernels; older files read them as empty.
// 7: peaks.spread_pct (the calibration's repeat-to-repeat spread) and the source 'forced' (a
//    calibration that failed sonde calibrate's checks, kept by --force). A version 3 to 6 file
//    has no spread_pct: nothing reads it but a user's query.
// 8: thread_routine_sums (each thread's nodes summed per routine, kept by the writer at each
//    flush) and the view thread_routine_totals, which hotspots, routine_totals and
//    rank_hotspots now read: `sonde report` on a million nodes no longer groups them all. A
//    version 3 to 7 file has no such table: its threads are summed from their nodes, as the
//    view defines.
// 9: routines.dtype and routines.role, the facts the wrappers' tables state (a routine's
//    element type; a CUDA API call's role: launch, copy, sync, other), which `sonde candidates`
//    reads instead of guessing them from names. A version 3 to 8 file is read through a temp
//    view `routines` that gives both as NULL.
// 10: routine_metrics (each routine's GFLOP/s, intensity, peaks, % of peak, attainable rate and
//    bound: the figures `sonde metrics` computed in C++) and gemm_shapes' intensity,
//    attainable_gflops and bound. Versions 3 to 9 get them at open, as every view.
// 11: threads.cpu_ns (a thread's CPU time over its recorded life) and thread_times' waiting,
//    cpu_s and counted_s: a thread that waits for work most of its life (under 5 % of it in
//    measured calls and on a CPU) is no longer busy; its measured calls count in the 100 %
//    (run_totals.thread_s, now the threads' counted_s) and its wait does not. process_times
//    and run_totals give waiting_threads; counted_routine_totals (what hotspots and
//    rank_hotspots sum). The view dataloader_workers (torch DataLoader worker processes, their
//    batches and fetch time). A version 3 to 10 file is read through a temp view `threads`
//    whose cpu_ns is NULL: its threads are judged on their measured calls alone.
// 12: the waits for work of threads that are not their process's first (the views
//    wait_routines and waits: threading's Condition.wait and join, selectors' select,
//    socket.accept, whole; a thread pool worker loop's own time) are in no 100 %:
//    thread_times.waited_s, counted_s less them, run_totals.waited_s; counted_routine_totals
//    (wait_adjustments) and the new view counted_nodes, which callpaths, routine_edges and the
//    readers that merge threads read, leave them out. thread_times.counted (busy or waiting);
//    off_cpu now against the counted time. Views only: a version 3 to 11 file gets them at
//    open, as every view.
// 13: a join of a child process (multiprocessing's Process.join, torch.multiprocessing.spawn's
//    join) and multiprocessing's resource tracker's loop are waits for work in any thread
//    (wait_routines.any_thread), the process's first too: the 100 % counts the children's
//    own time. engine_waits: the own time of the frame running the autograd engine where a
//    collective was posted beneath it, DDP's reducer's wait (t_comm, not t_b). Views only: a
//    version 3 to 12 file gets them at open.
// 14: a DataLoader worker process's first thread (loader_worker_threads: it runs torch's
//    _worker_loop) has its waits for work left out, as a helper thread's; routine_comm counts
//    engine_waits' own time under the frames above it; c10d_waits (torch.distributed's own
//    waits) in rank_comm and rank_overlap; a fork child's inherited frames (inherited_frames)
//    without its life in their routines' inclusive time. Views only: a version 3 to 13 file
//    gets them at open.
inline constexpr int kSchemaVersion = 14;

}  // namespace sonde
