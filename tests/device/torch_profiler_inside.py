# torch.profiler started inside a program run under sonde: both must work (docs/gpu.md step 2).
import json, os, torch
x = torch.randn(2048, 2048, device="cuda")
act = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=act) as prof:
    for _ in range(20):
        x = torch.relu(x @ x) * 1e-3
    torch.cuda.synchronize()
prof.export_chrome_trace("os.environ.get("TRACE", "/tmp/trace.json")")
events = json.load(open("os.environ.get("TRACE", "/tmp/trace.json")"))["traceEvents"]
kernels = [e for e in events if e.get("cat") == "kernel"]
print("torch.profiler kernel events:", len(kernels))
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=5))
