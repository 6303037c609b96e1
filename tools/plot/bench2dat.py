#!/usr/bin/env python3
"""allreduce_bench JSON (a list of records: coll, algo, dtype, op, bytes, count, inplace,
time_us, algbw, busbw, wrong, np) -> gnuplot data: one block per algorithm ("bytes busbw"
lines sorted by size, blocks separated by two blank lines). Prints the algorithm names, in
block order, on stdout."""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: bench2dat.py RESULTS.json OUT.dat [COLL] [inplace|outofplace]")
    src, dst = sys.argv[1], sys.argv[2]
    coll = sys.argv[3] if len(sys.argv) > 3 else None
    place = sys.argv[4] if len(sys.argv) > 4 else "inplace"
    with open(src) as f:
        data = json.load(f)
    if isinstance(data, dict):  # tolerate {"results": [...]}
        data = data.get("results", data.get("records", []))
    recs = [r for r in data if isinstance(r, dict) and "algo" in r and "bytes" in r and "busbw" in r]
    if not recs:
        sys.exit(f"bench2dat: no records with algo/bytes/busbw in {src}")
    if coll is None:
        coll = recs[0].get("coll", "allreduce")
    recs = [r for r in recs if r.get("coll", coll) == coll]
    want = place == "inplace"
    sel = [r for r in recs if bool(r.get("inplace", want)) == want]
    if not sel:  # only the other placement was measured
        sel = recs
    algos = []
    for r in sel:
        if r["algo"] not in algos:
            algos.append(r["algo"])
    with open(dst, "w") as out:
        for i, a in enumerate(algos):
            pts = {}
            for r in sel:
                if r["algo"] == a and r["bytes"] > 0:
                    pts[int(r["bytes"])] = float(r["busbw"])
            if i:
                out.write("\n\n")
            out.write(f"# {a}\n")
            for b in sorted(pts):
                out.write(f"{b} {pts[b]:.6g}\n")
    print(" ".join(algos))


if __name__ == "__main__":
    main()
