#!/usr/bin/env python3
"""Markdown tables from the raw result files of bench/compare_mpis.sh and bench/cluster_bench.sh
(render.py calls main() for a study's "report" table; also runnable by hand):

  cells_report.py cells FILE.json   auto over the fastest raw MPI_Allreduce, per size, memory
                                    kind and placement; one column per MPI build, the worst of
                                    the runs (and the others after it); cells under 1.00 marked *
  cells_report.py links FILE.json   per MPI, hosts and link: auto over raw and over the model's
                                    bound, per size (the worst of each row marked)

Python standard library only."""
import json
import sys


def size(n):
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def fmt_runs(runs):
    worst = min(runs)
    rest = [r for i, r in enumerate(runs) if i != runs.index(worst)]
    cell = "%.2f%s" % (worst, "*" if worst < 1.0 else "")
    return cell + (" (%s)" % " ".join("%.2f" % r for r in rest) if rest else "")


def cells(path):
    d = json.load(open(path))
    mpis = list(d["mpis"])
    groups = sorted({(c["mem"], c["inplace"]) for c in d["cells"]}, key=lambda g: (g[0] != "shared", g[1]))
    for mem, inplace in groups:
        print("#### -M %s, %s" % (mem, "in place" if inplace else "out of place"))
        print()
        print("| size | fastest raw (us) | by | " + " | ".join(mpis) + " |")
        print("| ---: | ---: | --- | " + " | ".join("---:" for _ in mpis) + " |")
        rows = sorted((c for c in d["cells"] if c["mem"] == mem and c["inplace"] == inplace),
                      key=lambda c: c["bytes"])
        for c in rows:
            per = c["speedup_per_run"]
            print("| %s | %.3f | %s | %s |" % (size(c["bytes"]), c["fastest_raw_us"], c["fastest_raw_mpi"],
                                             " | ".join(fmt_runs(per[m]) if per.get(m) else "-" for m in mpis)))
        print()
    losing = sum(1 for c in d["cells"] for m in mpis if c["speedup_per_run"].get(m)
                 and min(c["speedup_per_run"][m]) < 1.0)
    total = sum(1 for c in d["cells"] for m in mpis if c["speedup_per_run"].get(m))
    print("%d of %d cells under 1.00 in at least one of %d run(s) (marked *)." % (losing, total, d["runs"]))
    return 0


def links(path):
    d = json.load(open(path))
    sizes = sorted({r["bytes"] for run in d["runs"] for r in run["rows"]})
    print("| MPI | hosts x ranks | link (nominal; measured) | " +
          " | ".join(size(s) for s in sizes) + " |")
    print("| --- | --- | --- | " + " | ".join("---:" for _ in sizes) + " |")
    for run in d["runs"]:
        ln = run["link"]
        by = {r["bytes"]: r for r in run["rows"]}
        cellsv = []
        for s in sizes:
            r = by.get(s)
            if r is None or r.get("auto_vs_raw") is None:
                cellsv.append("-")
                continue
            mark = "*" if r["auto_vs_raw"] < 1.0 else ""
            cellsv.append("%.2f%s / %.2f" % (r["auto_vs_raw"], mark, r["bound_vs_auto"]))
        print("| %s | %d x %d | %s %s; %.0f MB/s %.0f us | %s |" % (
            run["mpi"], run["hosts"], run["ranks_per_host"], ln["rate"], ln["latency"],
            ln["measured_MBps"], ln["measured_latency_us"], " | ".join(cellsv)))
    print()
    print("Each cell: auto over raw `MPI_Allreduce` (under 1.00 marked *) / the model's bound over "
          "auto's time (1.00: at the bound).")
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("cells", "links"):
        print(__doc__, file=sys.stderr)
        return 2
    return cells(argv[2]) if argv[1] == "cells" else links(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
