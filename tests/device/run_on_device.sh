#!/usr/bin/env bash
# The one command of a lent GPU machine (the device tool), from the repository root, with the
# wheels in dist/ carried (`carry: ["dist"]`, timeout_s 600):
#
#   tests/device/run_on_device.sh [BUDGET_SECONDS]      (default 480)
#
# Writes into $OUT what comes back (at most 8 files): env.txt (GPU, driver, Python, torch, CUDA,
# cuDNN, nvcc, the nvidia-* wheels), console.log, table.txt, summary.json, checks.log,
# build.log and kit.tgz (the kit's output folder: profiles and traces, overhead runs left out).
# The table and summary are rewritten after every check, so a run stopped at its limit still
# returns what it found.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
budget=${1:-480}
out=${OUT:?run_on_device.sh: OUT is not set (the device tool sets it)}
kit=/tmp/kit
mkdir -p "$kit"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda",
torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version())'
  nvcc --version | tail -n 2
  gcc --version | head -n 1
  python3 -c 'import os, sysconfig; h = os.path.join(sysconfig.get_path("include"), "Python.h")
print("Python.h", "present" if os.path.exists(h) else "MISSING (Triton cannot build its helpers)")'
  ls -d /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda/lib64 2>&1
  python3 -m pip list 2>/dev/null | grep -i -E '^(nvidia|torch |triton)'
} >"$out/env.txt" 2>&1
"$repo/tests/device/check.sh" --out "$kit" --budget "$budget" 2>&1 | tee "$out/console.log"
rc=${PIPESTATUS[0]}
cp "$kit/table.txt" "$kit/summary.json" "$kit/checks.log" "$kit/build.log" "$out/" 2>/dev/null
tar czf "$out/kit.tgz" -C "$kit" --exclude='overhead*' . 2>/dev/null
exit "$rc"
