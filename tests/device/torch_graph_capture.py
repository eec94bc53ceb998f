# A CUDA graph captured and replayed under sonde (with SONDE_GPU_METRICS=tau): the capture must
# not be invalidated by sonde's range profiler (docs/gpu.md step 2).
import torch
x = torch.randn(1024, 1024, device="cuda")
w = torch.randn(1024, 1024, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        y = torch.relu(x @ w)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = torch.relu(x @ w)
for _ in range(10):
    g.replay()
torch.cuda.synchronize()
print("graph replayed, checksum", float(y.sum()))
