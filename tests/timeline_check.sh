#!/usr/bin/env bash
# Runs timeline_prog with DDP_TIMELINE (merged and per-rank) and DDP_DEBUG_FILE, and checks
# the outputs with python3's json module.
# Usage: timeline_check.sh LAUNCH PROG NP   (LAUNCH: tools/mpilaunch)
set -euo pipefail
launch=$1 prog=$2 np=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$launch" -n "$np" -e DDP_TIMELINE="$tmp/merged.json" -e DDP_DEBUG_FILE="$tmp/log.%r" "$prog"
"$launch" -n "$np" -e DDP_TIMELINE="$tmp/rank%r.json" "$prog"

python3 - "$tmp" "$np" <<'PY'
import json, sys, os
tmp, np = sys.argv[1], int(sys.argv[2])
def check(path, ranks):
    with open(path) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    pids = {e["pid"] for e in ev}
    assert pids == set(ranks), (path, pids)
    for r in ranks:
        b = [e for e in ev if e["pid"] == r and e["ph"] == "B"]
        e_ = [e for e in ev if e["pid"] == r and e["ph"] == "E"]
        i = [e for e in ev if e["pid"] == r and e["ph"] == "i"]
        assert len(b) == 100 and len(e_) == 100 and len(i) == 50, (path, r, len(b), len(e_), len(i))
        assert len({e["tid"] for e in b}) == 2, "two threads expected"
        assert any(e["name"] == 'worker "quoted" step' for e in b)
        assert all(x["ts"] >= 0 for x in b)
check(os.path.join(tmp, "merged.json"), range(np))
for r in range(np):
    check(os.path.join(tmp, "rank%d.json" % r), [r])
    log = open(os.path.join(tmp, "log.%d" % r)).read()
    assert "timeline test warning line" in log and ":%d mpiddp WARN" % r in log, log
print("timeline_check: merged and per-rank traces valid, %d ranks, debug files ok" % np)
PY
