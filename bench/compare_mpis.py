"""Summary of bench/compare_mpis.sh: per MPI, MPI_Allreduce (`raw`) and mpiddp (`auto`) side
by side; then, per size, `auto` under each MPI against the fastest `raw` of all MPIs (speedup =
fastest raw time / auto time; targets: >= 1.0 at every size, >= 3.0 at 4, 16 and 64 MB with
-M shared buffers). With several runs the worst speedup of any run is shown. Writes
OUT_DIR/summary.json: the command (COMPARE_CMD), the machine, each MPI's version line, every
record of every run, and per cell the speedup of every run.

    python3 bench/compare_mpis.py OUT_DIR RUNS MPI...   (files OUT_DIR/runR.MPI.MEM.json)"""
import json
import os
import platform
import sys

NAMES = {"openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel MPI", "ompi5": "OMPI 5",
         "ompi5han": "OMPI 5 han", "mpich5": "MPICH 5"}
BIG = (4 << 20, 16 << 20, 64 << 20)


def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def version(out, run, mpi, mem):
    try:
        with open(os.path.join(out, f"run{run}.{mpi}.{mem}.txt")) as f:
            lines = [l for l in f if l.startswith("# ")]
        return lines[1][2:].strip()[:70] if len(lines) > 1 else "?"
    except OSError:
        return "?"


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main():
    out, runs, mpis = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    t = {}  # (run, mpi, mem, algo, inplace, bytes) -> time_us
    wrong = 0
    records = []
    for run in range(1, runs + 1):
        for mpi in mpis:
            for mem in ("shared", "host"):
                path = os.path.join(out, f"run{run}.{mpi}.{mem}.json")
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    for r in json.load(f):
                        t[(run, mpi, mem, r["algo"], r["inplace"], r["bytes"])] = r["time_us"]
                        records.append(dict(r, run=run, mpi=mpi))
                        wrong += max(r["wrong"], 0)
    sizes = sorted({k[5] for k in t})
    for mpi in mpis:
        print(f"# {NAMES[mpi]} ({version(out, 1, mpi, 'shared')}), median of {runs} run(s): time in us,"
              " out of place / in place; auto speedup = raw time / auto time")
        print("#%9s %6s %21s %21s %15s" % ("size", "mem", "raw", "auto", "auto speedup"))
        for mem in ("shared", "host"):
            for b in sizes:
                cell = {}
                for algo in ("raw", "auto"):
                    cell[algo] = [median([t[k] for k in ((r, mpi, mem, algo, ip, b) for r in range(1, runs + 1))
                                          if k in t]) for ip in (False, True)]
                if None in cell["raw"] + cell["auto"]:
                    continue
                sp = [cell["raw"][i] / cell["auto"][i] for i in (0, 1)]
                print(" %9s %6s %10.2f/%-10.2f %10.2f/%-10.2f %7.2f/%-7.2f" % (
                    human(b), mem, cell["raw"][0], cell["raw"][1], cell["auto"][0], cell["auto"][1],
                    sp[0], sp[1]))
        print("#")
    print("# auto under each MPI against the fastest raw MPI_Allreduce of all MPIs at that size "
          f"(speedup, worst of {runs} run(s)); * below target (1.0; 3.0 at 4, 16, 64 MB with -M shared)")
    misses = 0
    cells = []
    for mem in ("shared", "host"):
        for ip in (False, True):
            print("#%9s %6s %5s %22s" % ("size", "mem", "place", "fastest raw (us)") +
                  "".join("%12s" % NAMES[m] for m in mpis))
            for b in sizes:
                worst = {m: None for m in mpis}
                per_run = {m: [] for m in mpis}
                best_raw = None
                for run in range(1, runs + 1):
                    raws = [(t[(run, m, mem, "raw", ip, b)], m) for m in mpis
                            if (run, m, mem, "raw", ip, b) in t]
                    if not raws:
                        continue
                    fr = min(raws)
                    if run == 1:
                        best_raw = fr
                    for m in mpis:
                        a = t.get((run, m, mem, "auto", ip, b))
                        if a:
                            s = fr[0] / a
                            per_run[m].append(round(s, 3))
                            worst[m] = s if worst[m] is None else min(worst[m], s)
                if best_raw is None:
                    continue
                target = 3.0 if mem == "shared" and b in BIG else 1.0
                cells.append({"bytes": b, "mem": mem, "inplace": ip, "fastest_raw_us": best_raw[0],
                              "fastest_raw_mpi": best_raw[1], "target": target,
                              "speedup_per_run": per_run})
                row = " %9s %6s %5s %10.2f %-11s" % (human(b), mem, "in" if ip else "out",
                                                      best_raw[0], NAMES[best_raw[1]])
                for m in mpis:
                    if worst[m] is None:
                        row += "%12s" % "-"
                        continue
                    miss = worst[m] < target
                    misses += miss
                    row += "%11.2f%s" % (worst[m], "*" if miss else " ")
                print(row)
            print("#")
    print(f"# {misses} cell(s) below target; {wrong} wrong element(s)")
    summary = {
        "command": os.environ.get("COMPARE_CMD", "bench/compare_mpis.sh"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release()},
        "mpis": {m: version(out, 1, m, "shared") for m in mpis},
        "runs": runs, "misses": misses, "wrong": wrong, "cells": cells, "records": records,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
