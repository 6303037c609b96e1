#!/usr/bin/env python3
"""Where the time of a data-parallel step goes, from a DDP_TIMELINE trace of ddp_bench.

  timeline.py summary TRACE.json [CONFIG]           per-rank means over the DDP steps
  timeline.py excerpt TRACE.json [CONFIG] [STEP]    one step, event by event, every rank
  timeline.py dat TRACE.json OUT.dat [CONFIG] [STEP]  boxes for gnuplot (tools/plot/plot.sh timeline)

STEP defaults to the step whose length is the median; CONFIG to "ddp" (ddp_bench's label).

TRACE.json is the merged file (DDP_TIMELINE=trace.json) or one per rank (trace.%r.json: give
any one, the others are found). ddp_bench writes spans "ddp step (CONFIG)" and
"compute-only step" (category bench), the model's GEMM phases "fwd L", "dW L", "dX L", "sgd"
(category compute); the library adds the reducer's instants (grad_ready, bucket launch, bucket
done) and "reducer finish", the collectives' "allreduce" spans on the progress thread, and the
shared-memory algorithm's "reduce+push slice" and "wait peer" spans. Each step is aligned on
its own start on every rank (ddp_bench starts every step after a barrier), so per-rank clocks
need not agree. Python 3 standard library only."""
import glob
import json
import os
import re
import sys


def load(path):
    files = [path]
    m = re.match(r"(.*\.)\d+\.json$", path)  # trace.%r.json: rank r's file, take every rank's
    if m:
        files = sorted(f for f in glob.glob(glob.escape(m.group(1)) + "*.json")
                       if re.fullmatch(r"\d+\.json", f[len(m.group(1)):])) or [path]
    ev = []
    for f in files:
        with open(f) as fp:
            ev += json.load(fp)["traceEvents"]
    return ev


def spans(ev):
    """Closed B/E pairs as dicts: name, cat, pid, tid, t0, t1 (ms); instants with t0 == t1."""
    out, stacks = [], {}
    for e in sorted(ev, key=lambda e: e["ts"]):
        key = (e["pid"], e["tid"])
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        elif e["ph"] == "E":
            st = stacks.get(key, [])
            for i in range(len(st) - 1, -1, -1):
                if st[i]["name"] == e["name"]:
                    b = st.pop(i)
                    out.append(dict(name=b["name"], cat=b.get("cat", ""), pid=b["pid"], tid=b["tid"],
                                    t0=b["ts"] / 1e3, t1=e["ts"] / 1e3, args=b.get("args", {})))
                    break
        elif e["ph"] == "i":
            out.append(dict(name=e["name"], cat=e.get("cat", ""), pid=e["pid"], tid=e["tid"],
                            t0=e["ts"] / 1e3, t1=e["ts"] / 1e3, args=e.get("args", {})))
    return out


def steps_of(sp, config):
    """{rank: [step span, ...]} of the DDP steps of `config` (default: the first one seen)."""
    names = sorted({s["name"] for s in sp if s["name"].startswith("ddp step (")})
    if not names:
        sys.exit("timeline: no 'ddp step' spans (a ddp_bench trace is needed)")
    want = "ddp step (%s)" % config if config else next(
        (n for n in names if n == "ddp step (ddp)"), names[0])
    by = {}
    for s in sp:
        if s["name"] == want:
            by.setdefault(s["pid"], []).append(s)
    for r in by:
        by[r].sort(key=lambda s: s["t0"])
    return want, by


def inside(sp, pid, t0, t1):
    return [s for s in sp if s["pid"] == pid and s["t0"] >= t0 - 1e-6 and s["t1"] <= t1 + 1e-6]


def union(iv):
    """Total length of a union of intervals."""
    tot, end = 0.0, None
    for a, b in sorted(iv):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot


def overlap(a, b):
    """Length of (union of a) intersected with (union of b)."""
    tot = 0.0
    for x0, x1 in a:
        for y0, y1 in b:
            lo, hi = max(x0, y0), min(x1, y1)
            if hi > lo:
                tot += hi - lo
    return tot


def analyse(sp, pid, st):
    """One DDP step of one rank: a dict of times in ms."""
    ev = inside(sp, pid, st["t0"], st["t1"])
    main = st["tid"]
    comp = [(s["t0"], s["t1"]) for s in ev if s["cat"] == "compute" and s["tid"] == main and s["name"] != "sgd"]
    bwd = [(s["t0"], s["t1"]) for s in ev if s["cat"] == "compute" and s["tid"] == main and s["name"][:2] in ("dW", "dX")]
    sgd = [(s["t0"], s["t1"]) for s in ev if s["name"] == "sgd"]
    fin = [(s["t0"], s["t1"]) for s in ev if s["name"] == "reducer finish" and s["t1"] > s["t0"]]
    red = [(s["t0"], s["t1"]) for s in ev if s["cat"] == "shm" and "slice" in s["name"]]
    wait = [(s["t0"], s["t1"]) for s in ev if s["name"] == "wait peer"]
    coll = [(s["t0"], s["t1"]) for s in ev if s["cat"] == "coll" and s["t1"] > s["t0"]]
    launch = [s for s in ev if s["name"] == "bucket launch"]
    done = [s for s in ev if s["name"] == "bucket done"]
    bwd_end = max((b for _, b in bwd), default=st["t0"])
    return dict(step=st["t1"] - st["t0"], compute=union(comp), backward=union(bwd), sgd=union(sgd),
                finish=union(fin), reduce=union(red), reduce_in_bwd=overlap(red, bwd),
                reduce_after_bwd=union([(max(a, bwd_end), b) for a, b in red if b > bwd_end]),
                wait=union(wait), coll=union(coll), launches=len(launch),
                first_launch=(min(s["t0"] for s in launch) - st["t0"]) if launch else float("nan"),
                last_done=(max(s["t0"] for s in done) - st["t0"]) if done else float("nan"),
                bwd_end=bwd_end - st["t0"])


def compute_only(sp):
    """{rank: [compute time of each compute-only step]} (GEMMs alone, no communication)."""
    by = {}
    for s in sp:
        if s["name"] == "compute-only step":
            ev = inside(sp, s["pid"], s["t0"], s["t1"])
            comp = [(e["t0"], e["t1"]) for e in ev if e["cat"] == "compute" and e["name"] != "sgd"]
            by.setdefault(s["pid"], []).append((s["t1"] - s["t0"], union(comp)))
    return by


def median(v):
    v = sorted(v)
    n = len(v)
    return float("nan") if not n else (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))


def cmd_summary(path, config=None):
    sp = spans(load(path))
    name, by = steps_of(sp, config)
    co = compute_only(sp)
    print("# %s: medians over %d steps per rank (ms); compute-only = the same steps without communication"
          % (name, min(len(v) for v in by.values())))
    cols = ["step", "compute", "backward", "sgd", "finish", "reduce", "reduce_in_bwd", "reduce_after_bwd",
            "wait", "coll", "first_launch", "last_done", "bwd_end"]
    print("%-5s %9s %9s %9s" % ("rank", "co_step", "co_gemm", "gemm+") + "".join(" %9s" % c[:9] for c in cols))
    for r in sorted(by):
        rows = [analyse(sp, r, st) for st in by[r]]
        med = {c: median([x[c] for x in rows]) for c in cols}
        cs = median([a for a, _ in co.get(r, [])])
        cg = median([b for _, b in co.get(r, [])])
        print("%-5d %9.2f %9.2f %9.2f" % (r, cs, cg, med["compute"] - cg) + "".join(" %9.2f" % med[c] for c in cols))
    print("# co_step/co_gemm: compute-only step and its GEMM time; gemm+: how much longer the same GEMMs take in the DDP\n"
          "# step (the reduction competes for the cores); finish: time the step waited in ddp_reducer_finish (exposed);\n"
          "# reduce: this rank's reduction work (shm slice spans, progress thread), of which in/after backward;\n"
          "# wait: progress thread sleeping for a peer; first_launch/last_done/bwd_end: from the step's start")


def pick_step(by, step):
    n = min(len(v) for v in by.values())
    if step is None:  # the step whose length (slowest rank) is the median
        lens = [max(by[r][k]["t1"] - by[r][k]["t0"] for r in by) for k in range(n)]
        order = sorted(range(n), key=lambda k: lens[k])
        step = order[n // 2]
    if not 0 <= step < n:
        sys.exit("timeline: step %d out of range (0..%d)" % (step, n - 1))
    return step


def cmd_excerpt(path, config=None, step=None):
    sp = spans(load(path))
    name, by = steps_of(sp, config)
    k = pick_step(by, step)
    print("# %s #%d, times in ms from the step's start on each rank" % (name, k))
    for r in sorted(by):
        st = by[r][k]
        ev = sorted(inside(sp, r, st["t0"], st["t1"]), key=lambda s: (s["t0"], -s["t1"]))
        tids = sorted({s["tid"] for s in ev}, key=lambda t: (t != st["tid"], t))
        lane = {t: ("main" if t == st["tid"] else "progress" if i == 1 else "thread%d" % i) for i, t in enumerate(tids)}
        print("rank %d: step %.2f ms" % (r, st["t1"] - st["t0"]))
        for s in ev:
            if s is st or s["name"] == "grad_ready":
                continue
            a = s["args"] if isinstance(s["args"], dict) else {}
            extra = ""
            if "bucket" in a:
                extra = " bucket %s (%.1f MB)" % (a["bucket"], a.get("bytes", 0) / 1048576)
            elif "bytes" in a:
                extra = " %.1f MB" % (a["bytes"] / 1048576)
            if s["t1"] > s["t0"]:
                print("  %8.2f %8.2f  %-8s %s%s  (%.2f ms)" % (s["t0"] - st["t0"], s["t1"] - st["t0"], lane[s["tid"]],
                                                            s["name"], extra, s["t1"] - s["t0"]))
            else:
                print("  %8.2f %8s  %-8s %s%s" % (s["t0"] - st["t0"], "", lane[s["tid"]], s["name"], extra))


KINDS = [  # (label, colour, test on a span): one gnuplot data block each, in this order
    ("forward GEMM", "#9ecae1", lambda s: s["cat"] == "compute" and s["name"].startswith("fwd")),
    ("backward dW GEMM", "#1f77b4", lambda s: s["cat"] == "compute" and s["name"].startswith("dW")),
    ("backward dX GEMM", "#6baed6", lambda s: s["cat"] == "compute" and s["name"].startswith("dX")),
    ("SGD", "#7f7f7f", lambda s: s["name"] == "sgd"),
    ("allreduce (progress thread)", "#fdd0a2", lambda s: s["cat"] == "coll"),
    ("reduction work (shm slice)", "#d62728", lambda s: s["cat"] == "shm" and "slice" in s["name"]),
    ("sleeping for the peer", "#2ca02c", lambda s: s["name"] in ("wait peer", "wait mpi")),
    ("reducer finish (exposed)", "#ff7f0e", lambda s: s["name"] == "reducer finish"),
]


def cmd_dat(path, out, config=None, step=None):
    """gnuplot data: one block per KINDS entry ("x0 x1 y0 y1", ms from the step's start; lane
    y = 2 * rank for the main thread, 2 * rank + 1 for the progress thread), then a block of
    bucket launches ("x y"). Prints: title, labels, colours (|-separated), ranks."""
    sp = spans(load(path))
    name, by = steps_of(sp, config)
    k = pick_step(by, step)
    blocks = [[] for _ in KINDS]
    launches = []
    for r in sorted(by):
        st = by[r][k]
        for s in inside(sp, r, st["t0"], st["t1"]):
            if s is st:
                continue
            y = 2 * r + (0 if s["tid"] == st["tid"] else 1)
            if s["name"] == "bucket launch":
                launches.append((s["t0"] - st["t0"], y + 0.45))
                continue
            if s["t1"] <= s["t0"]:
                continue
            for i, (_, _, test) in enumerate(KINDS):
                if test(s):
                    h = 0.42 if s["cat"] != "coll" else 0.2  # the allreduce span encloses its work
                    blocks[i].append((s["t0"] - st["t0"], s["t1"] - st["t0"], y - h, y + h))
                    break
    used = [i for i, b in enumerate(blocks) if b]
    with open(out, "w") as f:
        for i in used:
            for b in blocks[i]:
                f.write("%.4f %.4f %.3f %.3f\n" % b)
            f.write("\n\n")
        for x, y in launches or [(-1.0, -1.0)]:
            f.write("%.4f %.3f\n" % (x, y))
    steplen = max(by[r][k]["t1"] - by[r][k]["t0"] for r in by)
    print("%s #%d (%.1f ms)" % (name, k, steplen))
    print("|".join(KINDS[i][0] for i in used))
    print("|".join(KINDS[i][1] for i in used))
    print(len(by))


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "summary":
        cmd_summary(a[1], a[2] if len(a) > 2 else None)
    elif len(a) >= 2 and a[0] == "excerpt":
        cmd_excerpt(a[1], a[2] if len(a) > 2 and a[2] else None, int(a[3]) if len(a) > 3 else None)
    elif len(a) >= 3 and a[0] == "dat":
        cmd_dat(a[1], a[2], a[3] if len(a) > 3 and a[3] else None, int(a[4]) if len(a) > 4 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
