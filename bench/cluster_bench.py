"""Summary of bench/cluster_bench.sh: per MPI, layout and link, the in-place allreduce time of
raw MPI_Allreduce, ring, rhd, hier and auto, each beside the alpha-beta model's prediction, the
model's bound, and the two targets (auto >= 1.0x raw at every size; auto within 1.15x of the
bound from 4 MB up). Writes OUT/summary.json (command, machine, links, every record, models).

The model (docs/scale.md's, node-local steps free): p ranks on N hosts, n bytes, alpha the
one-way host-to-host latency, B what one host's link carries each way (both measured by
bench/link_probe.py just before the runs, also given: the nominal rate and latency)
  ring   2(p-1) alpha + 2 n (p-1)/p / B       (2(p-1) steps, one flow of n/p per link and step)
  rhd    2 log2(N) alpha + 2 n (N-1)/N / B    (halving nearest partner first: the first
                                               log2(p/N) levels stay in the host)
  hier   the same as rhd (host-local reduce-scatter, p/N flows of n p/N... across, allgather)
  bound  min(ring, rhd): what any of them can reach; raw and auto are read against it

    python3 bench/cluster_bench.py OUT_DIR"""
import json
import math
import os
import platform
import sys

from compare_mpis import cpu_model  # the same machine line in both studies

ALGOS = ["raw", "ring", "rhd", "hier", "auto"]
NAMES = {"ob1": "Open MPI 4.1.4 ob1+tcp", "ucx": "Open MPI 4.1.4 ucx (tcp)", "mpich": "MPICH 4.0.2 ch4:ucx (tcp)"}
BIG = 4 << 20


def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def model(algo, n, p, nh, alpha, bw):
    """Seconds for n bytes; alpha in s, bw in bytes/s."""
    ring = 2 * (p - 1) * alpha + 2 * n * (p - 1) / p / bw
    rhd = 2 * math.log2(nh) * alpha + 2 * n * (nh - 1) / nh / bw
    return {"ring": ring, "rhd": rhd, "hier": rhd}.get(algo, min(ring, rhd))


def main():
    out = sys.argv[1]
    links = []
    with open(os.path.join(out, "links.txt")) as f:
        for line in f:
            rate, lat, lat_us, bw, lat_meas = line.split()
            links.append({"rate": rate, "latency": lat, "latency_us": float(lat_us),
                          "measured_MBps": float(bw), "measured_latency_us": float(lat_meas)})
    runs = []
    misses = {"raw": 0, "bound": 0}
    for link in links:
        for name in sorted(os.listdir(out)):
            if not name.endswith("_%s_%s.json" % (link["rate"], link["latency"])):
                continue
            mpi, layout = name.split("_")[:2]
            nh, rph = (int(x) for x in layout.split("x"))
            p = nh * rph
            recs = [r for r in json.load(open(os.path.join(out, name))) if r["inplace"]]
            t = {(r["algo"], r["bytes"]): r["time_us"] for r in recs}
            wrong = sum(max(r["wrong"], 0) for r in recs)
            alpha, bw = link["measured_latency_us"] * 1e-6, link["measured_MBps"] * 1e6
            rows = []
            print("\n## %s, %d hosts x %d ranks, %s links, %s host to host (measured: %.0f MB/s per "
                  "host each way, %.0f us one way); time in us, model beside it; %d wrong" % (
                      NAMES.get(mpi, mpi), nh, rph, link["rate"], link["latency"], link["measured_MBps"],
                      link["measured_latency_us"], wrong))
            print("| size | raw | ring (model) | rhd (model) | hier (model) | auto | bound | auto/raw | bound/auto |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for b in sorted({r["bytes"] for r in recs}):
                m = {a: model(a, b, p, nh, alpha, bw) * 1e6 for a in ALGOS}
                cells = []
                for a in ALGOS:
                    v = t.get((a, b))
                    s = "-" if v is None else "%.0f" % v
                    if a in ("ring", "rhd", "hier"):
                        s += " (%.0f)" % m[a]
                    cells.append(s)
                raw, auto = t.get(("raw", b)), t.get(("auto", b))
                vs_raw = raw / auto if raw and auto else float("nan")
                vs_bound = m["auto"] / auto if auto else float("nan")
                flag_raw = vs_raw < 1.0
                flag_bound = b >= BIG and vs_bound < 1 / 1.15
                misses["raw"] += flag_raw
                misses["bound"] += flag_bound
                print("| %s | %s | %.0f | %.2f%s | %.2f%s |" % (human(b), " | ".join(cells), m["auto"], vs_raw,
                                                               "*" if flag_raw else "", vs_bound,
                                                               "*" if flag_bound else ""))
                rows.append({"bytes": b, "time_us": {a: t.get((a, b)) for a in ALGOS},
                             "model_us": {a: m[a] for a in ("ring", "rhd", "hier")}, "bound_us": m["auto"],
                             "auto_vs_raw": vs_raw, "bound_vs_auto": vs_bound})
            runs.append({"mpi": mpi, "hosts": nh, "ranks_per_host": rph, "link": link, "wrong": wrong,
                         "rows": rows, "records": recs})
    print("\n# * misses: auto below raw at %d point(s); auto slower than 1.15x the bound at %d point(s) "
          "of %s and up" % (misses["raw"], misses["bound"], human(BIG)))
    summary = {"command": os.environ.get("CLUSTER_CMD", "bench/cluster_bench.sh"),
               "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release()},
               "model": __doc__.split("\n\n")[1], "links": links, "misses": misses, "runs": runs}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if any(r["wrong"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
