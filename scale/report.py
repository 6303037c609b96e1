#!/usr/bin/env python3
"""Reads sweep output (scale/sweep.sh, scale/sim_allreduce JSON lines) and
   report.py tables FILE.jsonl...          markdown tables: time per algorithm, per (platform,
                                            ranks), auto's ratio to the best SMPI algorithm
   report.py check FILE.jsonl [LIMIT]      exit 1 if auto is more than LIMIT (1.1) x the best
                                            SMPI algorithm at any (platform, ranks, size), or
                                            if any line says a result was wrong
   report.py reducer FILE.jsonl            markdown table of scale/sim_reducer lines:
                                            efficiency against bucket cap per ranks and rate
   report.py dat FILE.jsonl OUT.dat KIND [PLATFORM] [X]
                                            gnuplot data blocks, one per algorithm: busbw
                                            against size (KIND size, at X ranks) or against
                                            ranks (KIND ranks, at X bytes); prints the titles
Later lines win over earlier ones for the same (platform, factors, ranks, algo, bytes)."""
import json
import sys

LIB = ["ring", "rhd", "hier", "auto"]


def load(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if "time_s" not in r:
                    continue
                key = (r.get("platform", "-"), r.get("factors", "-"), r["ranks"], r["algo"], r["bytes"])
                rows[key] = r
    return rows


def size_name(b):
    for unit, n in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}B"
    return f"{b} B"


def groups(rows):
    g = {}
    for (plat, fac, ranks, algo, b), r in rows.items():
        g.setdefault((plat, fac, ranks), {}).setdefault(b, {})[algo] = r
    return g


def best_smpi(cell):
    s = [(r["time_s"], a) for a, r in cell.items() if a.startswith("smpi:")]
    return min(s) if s else None


def tables(rows):
    for (plat, fac, ranks), sizes in sorted(groups(rows).items()):
        algos = sorted({a for cell in sizes.values() for a in cell},
                       key=lambda a: (LIB.index(a) if a in LIB else len(LIB), a))
        print(f"\n#### {plat}, {ranks} ranks ({fac} network factors): time per call (ms)\n")
        print("| size | " + " | ".join(a.replace("smpi:", "") for a in algos) +
              " | auto chose | auto / best SMPI |")
        print("|" + " --- |" * (len(algos) + 3))
        for b in sorted(sizes):
            cell = sizes[b]
            vals = []
            for a in algos:
                r = cell.get(a)
                vals.append(f"{r['time_s'] * 1e3:.3g}" if r else "-")
            best = best_smpi(cell)
            ratio = "-"
            if best and "auto" in cell:
                ratio = f"{cell['auto']['time_s'] / best[0]:.2f} (vs {best[1][5:]})"
            chose = cell["auto"].get("chose", "-") if "auto" in cell else "-"
            print(f"| {size_name(b)} | " + " | ".join(vals) + f" | {chose} | {ratio} |")


def check(rows, limit):
    bad = 0
    for key, r in rows.items():
        if r.get("wrong"):
            print(f"WRONG RESULT: {key}: {r['wrong']} wrong repetitions")
            bad += 1
    for (plat, fac, ranks), sizes in sorted(groups(rows).items()):
        for b, cell in sorted(sizes.items()):
            best = best_smpi(cell)
            if not best or "auto" not in cell:
                continue
            t = cell["auto"]["time_s"]
            verdict = "ok" if t <= limit * best[0] else "SLOW"
            print(f"{plat} {ranks} ranks {size_name(b)}: auto ({cell['auto'].get('chose')}) "
                  f"{t * 1e6:.1f} us, best SMPI {best[1][5:]} {best[0] * 1e6:.1f} us, "
                  f"ratio {t / best[0]:.2f} (limit {limit}): {verdict}")
            if verdict != "ok":
                bad += 1
    return 1 if bad else 0


def dat(rows, out, kind, plat, x):
    blocks = {}
    for (p, fac, ranks, algo, b), r in rows.items():
        if p != plat:
            continue
        if kind == "size" and ranks == x:
            blocks.setdefault(algo, []).append((b, r["busbw_GBps"]))
        elif kind == "ranks" and b == x:
            blocks.setdefault(algo, []).append((ranks, r["busbw_GBps"]))
    names = sorted(blocks, key=lambda a: (LIB.index(a) if a in LIB else len(LIB), a))
    with open(out, "w") as f:
        for a in names:
            for xv, y in sorted(blocks[a]):
                f.write(f"{xv} {y}\n")
            f.write("\n\n")
    print(" ".join(a.replace("smpi:", "") for a in names))


def reducer(path):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    caps = sorted({r["cap_mb"] for r in rows})
    print("| ranks | GFLOP/s | compute (ms) | " + " | ".join(f"cap {c:g} MB" for c in caps) + " |")
    print("|" + " --- |" * (len(caps) + 3))
    for key in sorted({(r["ranks"], r["gflops"]) for r in rows}):
        sel = {r["cap_mb"]: r for r in rows if (r["ranks"], r["gflops"]) == key}
        comp = next(iter(sel.values()))["compute_ms"]
        cells = []
        for c in caps:
            r = sel.get(c)
            cells.append(f"{r['efficiency'] * 100:.1f}% ({r['buckets']} b, {r['exposed_ms']:.2f} ms)" if r else "-")
        print(f"| {key[0]} | {key[1]:g} | {comp:.1f} | " + " | ".join(cells) + " |")


def main(argv):
    if len(argv) >= 3 and argv[1] == "reducer":
        reducer(argv[2])
        return 0
    if len(argv) >= 3 and argv[1] == "tables":
        tables(load(argv[2:]))
        return 0
    if len(argv) >= 3 and argv[1] == "check":
        return check(load([argv[2]]), float(argv[3]) if len(argv) > 3 else 1.1)
    if len(argv) >= 5 and argv[1] == "dat":
        plat = argv[5] if len(argv) > 5 else "fattree_128x8_100g"
        x = int(argv[6]) if len(argv) > 6 else (256 if argv[4] == "size" else 67108864)
        dat(load([argv[2]]), argv[3], argv[4], plat, x)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
