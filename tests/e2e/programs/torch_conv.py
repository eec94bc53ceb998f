"""Convolutions of known shapes through PyTorch's oneDNN (mkldnn) path; prints results that
must not change under the preload. An argument N runs them on N threads
(torch.set_num_threads)."""
import sys

import torch
import torch.nn.functional as F

if len(sys.argv) > 1:
    torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
torch.backends.mkldnn.enabled = True

# 3 forward calls: 2x3x16x16 by 8x3x3x3, padding 1, with bias.
x = torch.randn(2, 3, 16, 16)
w = torch.randn(8, 3, 3, 3)
b = torch.randn(8)
for _ in range(3):
    y = F.conv2d(x, w, b, padding=1)
print(tuple(y.shape), f"{float(y.sum()):.6f}")

# 1 forward and its backward passes: grouped (2) and strided (2), 4x8x10x12 by 6x4x3x5.
x2 = torch.randn(4, 8, 10, 12, requires_grad=True)
w2 = torch.randn(6, 4, 3, 5, requires_grad=True)
y2 = F.conv2d(x2, w2, stride=2, groups=2)
y2.sum().backward()
print(tuple(y2.shape), f"{float(y2.sum()):.6f}", f"{float(x2.grad.sum()):.6f}",
      f"{float(w2.grad.sum()):.6f}")
