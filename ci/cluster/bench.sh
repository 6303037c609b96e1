#!/usr/bin/env bash
# Cluster benchmark (not a test): allreduce_bench -A raw,ring,rhd,hier,auto across emulated hosts,
# 2 hosts x 2 ranks and 4 hosts x 1, links unshaped and at 10 Gbit/s (tc tbf on both ends of
# every host's link), f32 sum, host memory. Prints allreduce_bench's tables, then one summary
# (in-place time per size and algorithm, auto/raw and hier/best-flat ratios) and writes JSON.
#   ci/cluster/bench.sh [--build DIR] [--out DIR] [--pml ob1|ucx] [--sizes "-b 16 -e 64M -f 4"]
#                       [--reps N]
# Run it on an otherwise idle machine (or under the CI machines' CPU lock): the ranks of all hosts
# share this machine's cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$src/build out="" pml=ob1 sizes="-b 16 -e 64M -f 4" reps=3
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --pml) pml=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --inside) inside=1; shift ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$build/cluster-bench}
mkdir -p "$out" && out=$(cd "$out" && pwd)

if [ -z "${inside:-}" ]; then
  exec bash "$here/cluster.sh" with 4 -- bash "$0" --inside --build "$build" --out "$out" \
    --pml "$pml" --sizes "$sizes" --reps "$reps"
fi

cl=$here/cluster.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
for link in unshaped 10gbit; do
  if [ "$link" != unshaped ]; then
    for h in h1 h2 h3 h4; do "$cl" shape "$h" rate "$link" || exit 1; done
  fi
  for layout in 2x2:h1:2,h2:2 4x1:h1:1,h2:1,h3:1,h4:1; do
    name=${layout%%:*} hosts=${layout#*:}
    json=$out/${pml}_${name}_${link}.json
    echo "=== $name hosts, $link links, pml $pml"
    # shellcheck disable=SC2086
    "$cl" mpirun "$pml" "$hosts" 4 "$build/apps/allreduce_bench" $sizes -A raw,ring,rhd,hier,auto \
      -R "$reps" -t 0.3 -w 2 -J "$json" || fail=1
  done
done

# Summary: in-place time (us) per size, and the two targets' ratios.
python3 - "$out" "$pml" <<'PY'
import json, sys, os
out, pml = sys.argv[1], sys.argv[2]
algos = ["raw", "ring", "rhd", "hier", "auto"]
print("\n# cluster allreduce, f32 sum in place, 4 ranks, best of the repetitions (us); "
      "auto/raw = raw time / auto time (>= 1: auto at least as fast); "
      "hier/flat = best of ring,rhd / hier")
for link in ("unshaped", "10gbit"):
    for name in ("2x2", "4x1"):
        path = os.path.join(out, "%s_%s_%s.json" % (pml, name, link))
        if not os.path.exists(path):
            continue
        recs = [r for r in json.load(open(path)) if r["inplace"]]
        t = {(r["algo"], r["bytes"]): r["time_us"] for r in recs}
        sizes = sorted({r["bytes"] for r in recs})
        print("\n## %s hosts, %s links, pml %s" % (name, link, pml))
        print("| bytes | " + " | ".join(algos) + " | auto/raw | hier/flat |")
        print("|" + " ---: |" * (len(algos) + 3))
        for b in sizes:
            cells = ["%.1f" % t[(a, b)] if (a, b) in t else "-" for a in algos]
            ar = t[("raw", b)] / t[("auto", b)] if ("raw", b) in t and ("auto", b) in t else float("nan")
            flat = min(t.get(("ring", b), float("inf")), t.get(("rhd", b), float("inf")))
            hf = flat / t[("hier", b)] if ("hier", b) in t else float("nan")
            print("| %d | %s | %.2f | %.2f |" % (b, " | ".join(cells), ar, hf))
PY
exit $fail
