#!/usr/bin/env bash
# The Python package as users get it, without the build tree: (1) `cmake --install` into a
# temporary prefix, then moved (mpiddp/_install.py names the library relative to itself);
# (2) `pip install --target` of python/ with the library found through LD_LIBRARY_PATH. Each
# time a 2-rank job imports mpiddp, checks which library it loaded, and allreduces.
# Usage: install.sh BUILD_DIR PYTHON LAUNCH SOURCE_DIR
set -euo pipefail
build=$1 python=$2 launch=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MPIDDP_LIBRARY PYTHONPATH
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mv "$tmp/prefix" "$tmp/moved"
site=$(cd "$tmp/moved" && find * -name _install.py -path '*/mpiddp/*' | head -n 1)
[ -n "$site" ] || { echo "install.sh: FAIL: no mpiddp/_install.py under the prefix"; exit 1; }
site=$tmp/moved/$(dirname "$(dirname "$site")")
check='
import sys, numpy as np, mpiddp
c = mpiddp.init()
assert c.size == 2, c.size
want = sys.argv[1]
assert mpiddp.library_path().startswith(want) and mpiddp.__file__.startswith(sys.argv[2]), (mpiddp.library_path(), mpiddp.__file__)
x = np.ones(4)
c.allreduce(x)
assert (x == 2).all(), x
if c.rank == 0:
    print("install.sh: ok: %s with %s" % (mpiddp.__file__, mpiddp.library_path()))
'
PYTHONPATH=$site bash "$launch" -n 2 -e PYTHONPATH "$python" -c "$check" "$tmp/moved/" "$site/"
# pip: the package alone; the library from the loader's path. From a copy: setuptools writes
# build/ and *.egg-info beside the sources.
cp -r "$src/python" "$tmp/src"
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$tmp/pip" "$tmp/src" \
  2>"$tmp/pip.err" || { cat "$tmp/pip.err"; echo "install.sh: FAIL: pip install"; exit 1; }
libdir=$(dirname "$(find "$tmp/moved" -name 'libmpiddp.so.*' | head -n 1)")
PYTHONPATH=$tmp/pip LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  bash "$launch" -n 2 -e PYTHONPATH -e LD_LIBRARY_PATH "$python" -c "$check" "$libdir/" "$tmp/pip/"
echo "install.sh: PASS"
