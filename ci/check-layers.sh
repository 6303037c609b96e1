#!/usr/bin/env bash
# Checks that the library's layers only look down (docs/architecture.md). The layers, bottom to
# top, and their folders are read from CMakeLists.txt (DDP_LAYERS, DDP_LAYER_<name>_DIRS), the
# one place that defines them. Fails (exit 1, one line per finding) on:
#   - a source or header under runtime/, collectives/ or samplers/ that belongs to no layer
#     (a new folder must be given a layer, or nothing would check it);
#   - an upward #include: a file including a header of a higher layer, by the folder that holds
#     that header (quoted includes, also by relative path), or the umbrella ddp.h;
#   - an upward call: an undefined ddp_/ddp__ symbol in a layer's object files that only a
#     higher layer's objects define (nm over BUILD_DIR/CMakeFiles/ddp_layer_<name>.dir, the
#     objects whose source is in the tree: an old build's objects of moved files are skipped);
#   - an algorithm file (collectives/algorithms/) that includes mpi.h or names an MPI symbol
#     (MPI_*, PMPI_*, MPIX_*) outside comments: algorithms reach MPI only through the transport
#     table (docs/collectives.md);
#   - a transport object (collectives/transports/) that calls a symbol defined by another
#     collectives file (algorithm, selection, engine, runner): transports are the leaves;
#   - a circle of calls among the object files of one layer (tsort over nm's view).
# The compiler already refuses upward includes (each layer's include path holds only itself
# and the layers below); this script also catches a relative path and upward calls, which
# link fine.
# Usage: ci/check-layers.sh [BUILD_DIR]   (default build; the library must be built there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
cd "$root"

# ---- the layer table, from CMakeLists.txt -------------------------------------------------
cmake_list() { # the words of `set(NAME word...)` in CMakeLists.txt (may span lines)
  awk -v name="$1" '
    index($0, "set(" name " ") == 1 || index($0, "set(" name ")") == 1 { on = 1 }
    on { line = line " " $0; if (index($0, ")")) exit }
    END { sub(/^[^(]*\(/, "", line); sub(/\).*$/, "", line); print line }' CMakeLists.txt |
    tr -s ' \t' '\n' | sed '1d' | grep -v '^$' || true
}
mapfile -t layers < <(cmake_list DDP_LAYERS)
[ "${#layers[@]}" -ge 2 ] || { echo "check-layers: no DDP_LAYERS in CMakeLists.txt"; exit 1; }
declare -A rank_of_dir=() header_dir=() rank_of_layer=()
for i in "${!layers[@]}"; do
  l=${layers[$i]}
  rank_of_layer[$l]=$i
  mapfile -t dirs < <(cmake_list "DDP_LAYER_${l}_DIRS")
  [ "${#dirs[@]}" -ge 1 ] || { echo "check-layers: no DDP_LAYER_${l}_DIRS in CMakeLists.txt"; exit 1; }
  header_dir[$l]=${dirs[0]}
  for d in "${dirs[@]}"; do rank_of_dir[$d]=$i; done
done
umbrella=runtime/ddp.h

fail=0
report() { echo "check-layers: $*"; fail=1; }

# Layer rank of a header by the folder that holds it (-1: not a layer's header).
header_rank() {
  local d
  d=$(dirname "$1")
  if [ -n "${rank_of_dir[$d]+x}" ]; then echo "${rank_of_dir[$d]}"; else echo -1; fi
}
declare -A header_path=() # basename -> path, for includes by name through the include path
for l in "${layers[@]}"; do
  for h in "${header_dir[$l]}"/*.h; do
    [ -e "$h" ] && header_path[$(basename "$h")]=$h
  done
done
header_path[$(basename "$umbrella")]=$umbrella

# ---- every file belongs to a layer; includes look down --------------------------------------
nfiles=0
while IFS= read -r f; do
  nfiles=$((nfiles + 1))
  [ "$f" = "$umbrella" ] && continue
  d=$(dirname "$f")
  if [ -z "${rank_of_dir[$d]+x}" ]; then
    report "$f: folder $d belongs to no layer (add it to a DDP_LAYER_<name>_DIRS in CMakeLists.txt)"
    continue
  fi
  r=${rank_of_dir[$d]}
  while IFS= read -r hit; do
    line=${hit%%:*}
    inc=${hit#*:}
    inc=${inc#*\"}
    inc=${inc%%\"*}
    target=""
    if [ -e "$d/$inc" ]; then
      target=$(realpath -m --relative-to="$root" "$d/$inc")
    elif [ -n "${header_path[$(basename "$inc")]+x}" ]; then
      target=${header_path[$(basename "$inc")]}
    fi
    [ -n "$target" ] || continue # system or generated header (ddp_config.h)
    if [ "$target" = "$umbrella" ]; then
      report "$f:$line includes the umbrella $inc (for users only): include the layer headers it needs"
      continue
    fi
    tr=$(header_rank "$target")
    if [ "$tr" -gt "$r" ]; then
      report "$f:$line: layer ${layers[$r]} includes $inc of the higher layer ${layers[$tr]} ($target)"
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
done < <(find runtime collectives samplers -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
[ "$nfiles" -gt 0 ] || report "no sources found under runtime/ collectives/ samplers/"

# ---- algorithms are blind to the transport ---------------------------------------------------
# Comments are stripped by the compiler's preprocessor without expanding anything (-fpreprocessed),
# so a comment that names MPI_Allreduce is fine and a string or identifier is not.
cc=${CC:-cc}
nalgo=0
for f in collectives/algorithms/*.c collectives/algorithms/*.h; do
  [ -e "$f" ] || continue
  nalgo=$((nalgo + 1))
  if ! code=$("$cc" -fpreprocessed -dD -E -P -x c "$f" 2>&1); then
    report "$f: cannot strip its comments with $cc: $code"
    continue
  fi
  if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]mpi\.h[>"]' <<<"$code"; then
    report "$f includes mpi.h: an algorithm reaches MPI only through the transport table"
  fi
  if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(coll_state|coll_device_internal|xport_mpi)\.h"' <<<"$code"; then
    report "$f includes the collectives' state or a transport's private header: an algorithm sees the transport table and ddp__coll_shape_t only"
  fi
  syms=$(grep -oE '\b(P?MPIX?_[A-Za-z0-9_]+)' <<<"$code" | sort -u | tr '\n' ' ' || true)
  if [ -n "$syms" ]; then
    report "$f names MPI symbols (${syms% }): an algorithm reaches MPI only through the transport table"
  fi
done
[ "$nalgo" -gt 0 ] || report "no algorithm files under collectives/algorithms/"

# ---- calls look down ---------------------------------------------------------------------------
# A layer's objects whose source is still in the tree: an incremental build keeps the object of
# a file that was moved or deleted, and it would be read as a second definition.
live_objs() { # objdir
  local o src
  while IFS= read -r o; do
    src=${o#"$1"/}
    [ -e "$root/${src%.o}" ] && echo "$o"
  done < <(find "$1" -name '*.o' | sort)
  return 0
}
declare -A def_rank=()
nobj=0
for i in "${!layers[@]}"; do
  objdir=$build/CMakeFiles/ddp_layer_${layers[$i]}.dir
  if [ ! -d "$objdir" ]; then
    report "no objects of layer ${layers[$i]} in $objdir: build the library first"
    continue
  fi
  while IFS= read -r sym; do
    def_rank[$sym]=$i
  done < <(live_objs "$objdir" | xargs -r nm -g --defined-only 2>/dev/null |
           awk 'NF >= 3 && $3 ~ /^ddp_/ { print $3 }' | sort -u)
  nobj=$((nobj + $(live_objs "$objdir" | wc -l)))
done
[ "$nobj" -gt 0 ] || report "no object files under $build/CMakeFiles/ddp_layer_*.dir"
for i in "${!layers[@]}"; do
  objdir=$build/CMakeFiles/ddp_layer_${layers[$i]}.dir
  [ -d "$objdir" ] || continue
  while IFS= read -r o; do
    while IFS= read -r sym; do
      [ -n "${def_rank[$sym]+x}" ] || continue # defined outside the library (MPI, CUDA, libc)
      dr=${def_rank[$sym]}
      if [ "$dr" -gt "$i" ]; then
        report "${o#"$objdir"/}: layer ${layers[$i]} calls $sym of the higher layer ${layers[$dr]}"
      fi
    done < <(nm -u "$o" | awk '$2 ~ /^ddp_/ { print $2 }' | sort -u)
  done < <(live_objs "$objdir")
done

# ---- inside a layer: transports are leaves, and no call circle ------------------------------
# The same nm view per object file of one layer: a transport object (collectives/transports/)
# may call only transports and the layers below, never an algorithm, the selection, the engine
# or a runner, which sit on it (docs/collectives.md); and the files of a layer call each other
# without a circle (tsort finds one), so each file has a level: it calls only lower ones.
xport_dir=collectives/transports
nxport=0
for i in "${!layers[@]}"; do
  objdir=$build/CMakeFiles/ddp_layer_${layers[$i]}.dir
  [ -d "$objdir" ] || continue
  mapfile -t objs < <(live_objs "$objdir")
  [ "${#objs[@]}" -gt 0 ] || continue
  for o in "${objs[@]}"; do
    case ${o#"$objdir"/} in "$xport_dir"/*) nxport=$((nxport + 1)) ;; esac
  done
  # One nm per layer; awk prints "E from to" per call between two files, "X from sym to" per
  # transport calling a non-transport file (sources named relative to the tree, no .o).
  out=$({ nm -A -g --defined-only "${objs[@]}" 2>/dev/null; echo "--"; nm -A -u "${objs[@]}"; } |
    awk -v dir="$objdir/" -v xd="$xport_dir/" '
      function src(line) { f = substr(line, 1, index(line, ".o:") - 1); return substr(f, length(dir) + 1) }
      $0 == "--" { undef = 1; next }
      $NF !~ /^ddp_/ { next }
      !undef { def[$NF] = src($0); next }
      {
        from = src($0); to = def[$NF]
        if (to == "" || to == from) next
        if (!seen[from " " to]++) print "E", from, to
        if (index(from, xd) == 1 && index(to, xd) != 1) print "X", from, $NF, to
      }')
  while read -r kind from sym to; do
    [ "$kind" = X ] || continue
    report "$from: a transport calls $sym of $to (transports are leaves: algorithms, selection, engine and runners sit on them)"
  done <<<"$out"
  loop=$(awk '$1 == "E" { print $2, $3 }' <<<"$out" | tsort 2>&1 >/dev/null |
         sed -n 's/^tsort: \([^:]*\)$/\1/p' | sort -u | tr '\n' ' ' || true)
  if [ -n "$loop" ]; then
    report "layer ${layers[$i]}: its files call each other in a circle (${loop% }): give each file a level"
  fi
done
[ "$nxport" -gt 0 ] || report "no transport objects under $xport_dir in $build"

if [ "$fail" -ne 0 ]; then
  echo "check-layers: FAIL (layers bottom to top: ${layers[*]}; see docs/architecture.md)"
  exit 1
fi
echo "check-layers: PASS ($nfiles files, $nobj objects, $nalgo algorithm files blind to MPI, $nxport transport objects that are leaves, no call circle in a layer; layers bottom to top: ${layers[*]})"
