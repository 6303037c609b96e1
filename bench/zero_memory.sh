#!/usr/bin/env bash
# Benchmark: ZeRO-1/2 on W-DDP (MLP 784-2048-2048-2048-10, per-rank batch 64) with AdamW at NP
# ranks. Step time and efficiency come from ONE ddp_bench run with --zero 0,1,2 (the three modes
# and the compute-only step interleaved); peak resident memory is per process, so each mode
# also runs alone in its own job: the bench's own VmHWM (max over ranks) and /usr/bin/time -v's
# "Maximum resident set size" of every rank. Prints one table, writes JSON.
#   bench/zero_memory.sh [DDP_BENCH [OUT.json [STEPS [NP]]]]
# (defaults: build/apps/ddp_bench, zero_memory.json, 30, 2; ranks start through
# tools/mpilaunch.)
set -uo pipefail
launch=$(dirname "$0")/../tools/mpilaunch
bench=${1:-build/apps/ddp_bench} json=${2:-zero_memory.json} steps=${3:-30} np=${4:-2}
timev=/usr/bin/time
[ -x "$timev" ] || { echo "zero_memory: $timev (GNU time) is needed for the RSS column" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--optim adamw --steps "$steps")

echo "# 1. step time: one run, --zero 0,1,2 side by side"
"$launch" -n "$np" "$bench" "${common[@]}" --zero 0,1,2 -J "$tmp/times.json" >"$tmp/times.out" 2>&1 ||
  { cat "$tmp/times.out"; echo "zero_memory: the side-by-side run failed" >&2; exit 1; }
grep -v '^# \(BLAS\|CPU\)' "$tmp/times.out"

echo "# 2. memory: each mode in its own job"
for z in 0 1 2; do
  # Every rank under GNU time: its own maximum resident set size.
  # --no-check: no reference model after the steps (the side-by-side run checked every mode),
  # so the peak is the training's.
  "$launch" -n "$np" "$timev" -v "$bench" "${common[@]}" --zero "$z" --no-check -J "$tmp/mem$z.json" \
    >"$tmp/mem$z.out" 2>&1 || { tail -20 "$tmp/mem$z.out"; echo "zero_memory: --zero $z failed" >&2; exit 1; }
  grep 'Maximum resident set size' "$tmp/mem$z.out" | sed "s/^[[:space:]]*/  --zero $z: \/usr\/bin\/time -v: /"
done

# One table: time figures from the side-by-side run, memory from the separate ones.
python3 - "$tmp" "$json" "$np" <<'PY'
import json, re, sys
tmp, out, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = {r["zero"]: r for r in json.load(open(f"{tmp}/times.json"))}
rows = []
for z in (0, 1, 2):
    mem = json.load(open(f"{tmp}/mem{z}.json"))
    text = open(f"{tmp}/mem{z}.out").read()
    tv = [int(x) for x in re.findall(r"Maximum resident set size \(kbytes\): (\d+)", text)]
    t = times[z]
    rows.append({"zero": z, "np": np, "optim": "adamw",
                 "opt_state_mb": mem["opt_state_bytes"] / 2**20,
                 "peak_rss_mb": mem["peak_rss_kib"] / 1024.0,
                 "time_v_max_rss_mb": max(tv) / 1024.0 if tv else None,
                 "time_v_ranks": len(tv),
                 "ddp_step_ms": t["ddp_step_ms"], "compute_only_ms": t["compute_only_ms"],
                 "efficiency": t["efficiency"], "grad_rel_err": t["grad_rel_err"], "wrong": t["wrong"]})
z0 = rows[0]
print("# ZeRO on W-DDP, AdamW, np %d: memory per rank (each mode its own job), time side by side (one job)" % np)
print("%-7s %13s %12s %16s %10s %8s %8s %9s" % ("# zero", "opt_state_MB", "VmHWM_MB", "time-v_maxRSS_MB",
      "ddp_ms", "vs_z0", "effic", "grad_err"))
for r in rows:
    print("%-7d %13.1f %12.1f %16.1f %10.2f %8.3f %8.3f %9.1e%s" % (
        r["zero"], r["opt_state_mb"], r["peak_rss_mb"], r["time_v_max_rss_mb"] or 0.0, r["ddp_step_ms"],
        r["ddp_step_ms"] / z0["ddp_step_ms"], r["efficiency"], r["grad_rel_err"], " WRONG" if r["wrong"] else ""))
for r in rows[1:]:
    print("# --zero %d vs 0: optimizer state %.2fx, peak RSS %+.1f MB (VmHWM) / %+.1f MB (time -v), step time %.3fx"
          % (r["zero"], r["opt_state_mb"] / z0["opt_state_mb"], r["peak_rss_mb"] - z0["peak_rss_mb"],
             (r["time_v_max_rss_mb"] or 0) - (z0["time_v_max_rss_mb"] or 0), r["ddp_step_ms"] / z0["ddp_step_ms"]))
json.dump(rows, open(out, "w"), indent=1)
print("# wrote " + out)
PY
