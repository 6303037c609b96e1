#!/usr/bin/env bash
# Runs ddp_bench briefly with DDP_TIMELINE and DDP_DEBUG=INFO and checks that the reducer's
# events (grad_ready, bucket launch, bucket done, finish) are in the trace, that every launched
# bucket completed, that launches are in bucket order, and that the statistics line is logged.
# Usage: reducer_timeline.sh LAUNCH BENCH NP   (LAUNCH: tools/mpilaunch)
set -euo pipefail
launch=$1 bench=$2 np=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$launch" -n "$np" -e DDP_TIMELINE="$tmp/tl.json" -e DDP_DEBUG=INFO -e OPENBLAS_NUM_THREADS=1 \
  "$bench" --layers 64,128,128,128,10 --steps 3 --warmup 1 --bucket-cap-mb 0.05 --first-bucket-mb 0.01 \
  > "$tmp/out.txt" 2> "$tmp/err.txt" || { cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
grep -q "reducer: created" "$tmp/err.txt" || { echo "no creation log line"; cat "$tmp/err.txt"; exit 1; }
grep -q "reducer: rebuilt\|observed order gives the same buckets" "$tmp/err.txt" || { echo "no rebuild log line"; exit 1; }
grep -q "% hidden)" "$tmp/err.txt" || { echo "no statistics log line"; cat "$tmp/err.txt"; exit 1; }
python3 - "$tmp/tl.json" "$np" <<'PY'
import json, sys
path, np = sys.argv[1], int(sys.argv[2])
ev = json.load(open(path))["traceEvents"]
for r in range(np):
    mine = [e for e in ev if e["pid"] == r and e.get("cat") == "reducer"]
    ready = [e for e in mine if e["name"] == "grad_ready"]
    launch = [e for e in mine if e["name"] == "bucket launch"]
    done = [e for e in mine if e["name"] == "bucket done"]
    fin_b = [e for e in mine if e["name"] == "reducer finish" and e["ph"] == "B"]
    # DDP steps: warmup 1 + 3 timed + 1 checked against the single-process reference = 5, 8
    # parameters each
    steps = 5
    assert len(ready) == steps * 8, (r, len(ready))
    assert len(launch) == len(done) and len(launch) % steps == 0 and len(launch) >= 2 * steps, (r, len(launch), len(done))
    assert len(fin_b) == steps, (r, len(fin_b))
    per_iter = len(launch) // steps
    for it in range(steps):
        order = [e["args"]["bucket"] for e in launch[it * per_iter:(it + 1) * per_iter]]
        assert order == list(range(per_iter)), (r, it, order)
    assert all(e["args"]["bytes"] > 0 for e in launch)
print("timeline ok:", {k: sum(1 for e in ev if e.get("name") == k) for k in ("grad_ready", "bucket launch", "bucket done")})
PY
