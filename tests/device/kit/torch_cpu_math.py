"""CPU math of a PyTorch build, seeded: nn.Linear forward and backward, mm, bmm, a convolution
forward and backward. Prints the build's BLAS (torch.__config__), then one SHA-256 of every
result's bytes: under sonde it must print the same digest as without it.

A pip wheel of PyTorch links MKL and oneDNN into libtorch_cpu.so (Debian's links libblas.so.3
and libdnnl.so.2): whether sonde's preloaded BLAS and oneDNN wrappers see those calls, and
whether the calls still reach the same code (the digest), is what the device kit's
`torch: CPU math` check asks of the GPU machine's wheel."""
import hashlib
import re
import sys

import torch


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: the same summation order in every run
    digest = hashlib.sha256()

    def take(t):
        digest.update(t.detach().contiguous().numpy().tobytes())

    for step in range(3):
        lin = torch.nn.Linear(96, 80)
        x = torch.randn(48, 96, requires_grad=True)
        y = lin(x)
        y.square().sum().backward()
        take(y), take(x.grad), take(lin.weight.grad)
        a, b = torch.randn(64, 32), torch.randn(32, 40)
        take(torch.mm(a, b))
        take(torch.bmm(torch.randn(4, 16, 24), torch.randn(4, 24, 8)))
        conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        img = torch.randn(2, 3, 16, 16, requires_grad=True)
        out = conv(img)
        out.sum().backward()
        take(out), take(img.grad), take(conv.weight.grad)
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    print(f"torch {torch.__version__} BLAS_INFO={blas.group(1) if blas else '?'} "
          f"mkl={torch.backends.mkl.is_available()} mkldnn={torch.backends.mkldnn.is_available()}")
    print(f"digest {digest.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
