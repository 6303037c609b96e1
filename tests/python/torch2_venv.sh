#!/usr/bin/env bash
# A PyTorch 2.x CPU-usable install from PyPI in a venv beside Debian's torch 1.13, for running
# the package's tests under 2.x (not CI's: see docs/python.md):
#   bash tests/python/torch2_venv.sh VENV [TORCH_VERSION]      (default 2.15.0)
#   cmake -S . -B build -DDDP_PYTHON=VENV/bin/python && ctest --test-dir build -L python
# PyPI serves only CUDA builds of torch for Linux x86_64; its wheel pulls about 3 GB of CUDA
# wheels. Installed with --no-deps instead: the wheel, its pure-Python dependencies, and only
# the CUDA libraries that neither it nor the CUDA toolkit (13.x, installed on these machines,
# found through the loader's cache) provides; libtorch_cuda.so must load for `import torch`
# even without a GPU. The venv sees Debian's numpy and mpi4py (--system-site-packages).
set -euo pipefail
venv=${1:?usage: torch2_venv.sh VENV [TORCH_VERSION]}
ver=${2:-2.15.0}
python=${DDP_PYTHON_BASE:-/usr/bin/python3}
"$python" -m venv --system-site-packages "$venv"
pip=("$venv/bin/pip" install --no-deps --disable-pip-version-check -q)
"${pip[@]}" "torch==$ver"
# what torch/__init__.py imports (Debian's typing_extensions is too old for 2.x)
"${pip[@]}" "typing-extensions>=4.13.0" "sympy>=1.13.3" mpmath "networkx>=2.5.1" filelock \
  jinja2 MarkupSafe "fsspec>=0.8.5"
# libtorch_cuda.so's libraries that the CUDA 13.0 toolkit lacks (ldd: not found) or has too
# old (its NCCL 2.28 has no ncclCommResume); versions as torch's metadata pins them
pins=$("$venv/bin/python" - <<'EOF'
import importlib.metadata as md
want = ("nvidia-cusparselt", "nvidia-nvshmem", "nvidia-nccl")
print(" ".join(r.split(";")[0].replace(" ", "") for r in md.requires("torch") or []
               if r.startswith(want)))
EOF
)
cufile=$("$venv/bin/python" - <<'EOF'
import importlib.metadata as md
for r in md.requires("torch") or []:
    if r.startswith("cuda-toolkit"):  # cuda-toolkit[...]==13.x.y: cufile of that release
        print(r.split("==")[1].split(";")[0].strip())
EOF
)
"${pip[@]}" $pins
if [ -n "$cufile" ]; then
  # the cufile pin of torch's cuda-toolkit release, read from that wheel's own metadata
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/pip" download --no-deps -q -d "$tmp" "cuda-toolkit==$cufile"
  pin=$(unzip -p "$tmp"/cuda_toolkit-*.whl '*/METADATA' |
        sed -n "s/^Requires-Dist: \(nvidia-cufile==[^;]*\);.*extra == 'cufile'.*/\1/p" | head -1)
  "${pip[@]}" "${pin:-nvidia-cufile}"
fi
"$venv/bin/python" -c "import torch, torch.distributed as d; print('torch', torch.__version__, 'distributed', d.is_available(), 'gloo', d.is_gloo_available())"
