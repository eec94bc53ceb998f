#!/usr/bin/env bash
# The device kit: sonde's checks on a GPU machine, each with an asserted answer (docs/gpu.md,
# "Device validation"). From the repository root, with dist/ holding the wheels:
#
#   tests/device/check.sh              on a machine with an NVIDIA GPU, CUDA 13, nvcc and PyTorch
#   tests/device/check.sh --rehearse   anywhere: the same checks against the stub libraries
#                                      (tests/stubs), in a fresh venv, torch checks not run
#
# Options: --sonde-root DIR  take sonde from a build tree (DIR/bin/sonde, DIR/lib/libsonde.so,
#                            DIR/python) instead of the wheel
#          --dist DIR        where the wheels are (default: dist/)
#          --out DIR         where the table, the JSON summary and the logs go (default: $OUT
#                            when set, else a temporary folder)
#          --python PY       the interpreter (default python3; it must hold torch on a GPU run)
#          --budget SECONDS  the checks' time: a check not started by then is not run, and no
#                            command runs past it (the table is written after every check)
# Exits non-zero when any check fails; a check that cannot run here says so and is no failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
rehearse=0 sonde_root="" out="${OUT:-}" python=python3 dist="$repo/dist" budget=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=1 ;;
    --sonde-root) sonde_root=$(cd "$2" && pwd); shift ;;
    --out) out="$2"; shift ;;
    --dist) dist=$(cd "$2" && pwd); shift ;;
    --python) python="$2"; shift ;;
    --budget) budget=(--budget "$2"); shift ;;
    *) echo "check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d "${TMPDIR:-/tmp}/sonde-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] || out="$work/out"
mkdir -p "$out"
cuda="${CUDA_HOME:-/usr/local/cuda}"
say() { echo "check.sh: $*" >&2; }

# The interpreter. A rehearsal makes a fresh venv, so that nothing of a build or of the
# machine's site-packages is found by accident.
# pip (of the interpreter it was given) installs the wheel by --target, so the venv needs none.
host_python="$python"
if [ "$rehearse" = 1 ]; then
  "$python" -m venv --without-pip "$work/venv"
  python="$work/venv/bin/python"
fi
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')

# sonde: the wheel for this interpreter, installed into a folder of its own; or a build tree.
if [ -n "$sonde_root" ]; then
  sonde_cli="$sonde_root/bin/sonde" sonde_path="$sonde_root/python"
else
  wheel=$(ls "$dist"/sonde-*-"$tag"-"$tag"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ]; then
    say "no wheel for $tag in $dist (scripts/build-wheels.sh writes them); or --sonde-root"
    exit 2
  fi
  "$host_python" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$wheel"
  sonde_cli="$work/site/sonde/_kit/bin/sonde" sonde_path="$work/site"
fi
[ -x "$sonde_cli" ] || { say "no sonde CLI at $sonde_cli"; exit 2; }

# The known-answer program: nvcc on a GPU; against stub libraries built here for a rehearsal.
bin="$work/bin"
mkdir -p "$bin"
if [ "$rehearse" = 1 ]; then
  "$repo/tests/device/kit/build_stubs.sh" "$cuda/include" "$work/stubs" >"$out/build.log" 2>&1 ||
    { cat "$out/build.log" >&2; say "the stub libraries did not build"; exit 2; }
  c++ -std=c++17 -O1 -x c++ -rdynamic -I"$cuda/include" -o "$bin/known_answer" \
    "$repo/tests/device/kit/known_answer.cu" -L"$work/stubs" -lcublas -lcudart -pthread \
    -Wl,-rpath,"$work/stubs" >>"$out/build.log" 2>&1 ||
    { cat "$out/build.log" >&2; say "the known-answer program did not build"; exit 2; }
  export LD_LIBRARY_PATH="$work/stubs" SONDE_CUPTI_LIBRARY="$work/stubs/libcupti.so.13"
  export CUDART_STUB_DEVICE=1
  # The PyTorch checks' own code on the CPU, where the given interpreter has torch (the venv
  # has none): the operators against torch.profiler's counts and gloo's comm ops.
  if "$host_python" -c 'import torch' >/dev/null 2>&1; then
    SONDE_KIT_TORCH_PYTHON=$("$host_python" -c 'import sys; print(sys.executable)')
    export SONDE_KIT_TORCH_PYTHON
  fi
else
  # cuBLAS from the toolkit, else from the interpreter's nvidia-* wheels (PyTorch's).
  blas_dir=$(ls -d "$cuda"/lib64 2>/dev/null || true)
  if [ ! -e "$blas_dir/libcublas.so" ] && [ ! -e "$blas_dir/libcublas.so.13" ]; then
    blas_dir=$(dirname "$("$python" - <<'EOF'
import glob, site
for d in site.getsitepackages():
    for f in glob.glob(d + "/nvidia/**/libcublas.so.*", recursive=True):
        print(f); raise SystemExit
EOF
)")
  fi
  blas=$(ls "$blas_dir"/libcublas.so "$blas_dir"/libcublas.so.13 2>/dev/null | head -n 1)
  # Without the known-answer program the PyTorch checks still run: a GPU run is too dear to
  # end here.
  if ! nvcc -O2 -arch=native -o "$bin/known_answer" "$repo/tests/device/kit/known_answer.cu" \
      ${blas:+"$blas"} -Xlinker -rpath -Xlinker "$blas_dir" >"$out/build.log" 2>&1; then
    cat "$out/build.log" >&2
    say "nvcc failed (cuBLAS: ${blas:-none found}): the known-answer checks are not run"
    rm -f "$bin/known_answer"
  fi
  # nvcc links the runtime statically, so sonde looks for CUPTI among the toolkit's folders;
  # where the toolkit has none, the interpreter's nvidia-* wheels' (PyTorch's) serves the
  # known-answer runs (the PyTorch runs find it themselves, beside their runtime).
  if ! ls "$cuda"/extras/CUPTI/lib64/libcupti.so.13* "$cuda"/lib64/libcupti.so.13* \
      "$cuda"/targets/x86_64-linux/lib/libcupti.so.13* >/dev/null 2>&1; then
    SONDE_KIT_CUPTI=$("$python" - <<'EOF2'
import glob, site
for d in site.getsitepackages():
    for f in sorted(glob.glob(d + "/nvidia/*/lib/libcupti.so.13*")):
        print(f); raise SystemExit
EOF2
)
    export SONDE_KIT_CUPTI
  fi
  # One Inductor compile worker, in this process: no pool of compile processes under sonde.
  export TORCHINDUCTOR_COMPILE_THREADS=1
fi

mode=gpu
[ "$rehearse" = 1 ] && mode=rehearse
PYTHONUNBUFFERED=1 PYTHONPATH="$repo/tests/device/kit" \
  SONDE_KIT_CLI="$sonde_cli" SONDE_KIT_PYTHONPATH="$sonde_path" \
  SONDE_KIT_PROGRAM="$bin/known_answer" SONDE_KIT_WORK="$work" \
  "$python" "$repo/tests/device/kit/run_checks.py" --mode "$mode" --out "$out" "${budget[@]}"
