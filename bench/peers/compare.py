"""Prints mpiddp and its PyTorch peers side by side, with ratios, from the files that
bench/peers/compare.sh writes (allreduce_bench / torch_allreduce JSON, ddp_bench /
torch_ddp_mlp JSON, ddp_train / torch_fmnist metrics CSV). Missing inputs are skipped.

    python3 bench/peers/compare.py OUT_DIR"""
import csv
import json
import os
import sys


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_csv(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f))


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def allreduce(out):
    gloo = load_json(os.path.join(out, "torch_allreduce.json"))
    mems = {m: load_json(os.path.join(out, f"allreduce_{m}.json")) for m in ("shared", "host")}
    if not gloo or not all(mems.values()):
        print("# allreduce: inputs missing, skipped")
        return 0
    t = {}  # (column, bytes) -> in-place time in us
    for mem, recs in mems.items():
        for r in recs:  # raw and mpi from the -M shared run, auto from both
            if not r["inplace"] or (r["algo"] != "auto" and mem != "shared"):
                continue
            col = f"auto/{mem}" if r["algo"] == "auto" else r["algo"]
            t[(col, r["bytes"])] = r["time_us"]
    for r in gloo:
        t[("gloo", r["bytes"])] = r["time_us"]
    cols = ["raw", "mpi", "auto/shared", "auto/host", "gloo"]
    sizes = sorted({b for (c, b) in t if c == "gloo"} & {b for (c, b) in t if c == "raw"})
    print("# allreduce, f32 sum, in place, np=%d: time in us (raw, mpi: -M shared run)" %
          mems["shared"][0]["np"])
    print("#%9s" % "size" + "".join("%13s" % c for c in cols) +
          "%11s %11s %11s" % ("gloo/raw", "gloo/auto/s", "gloo/auto/h"))
    for b in sizes:
        row = " %9s" % human(b)
        for c in cols:
            v = t.get((c, b))
            row += "%13s" % ("-" if v is None else "%.2f" % v)
        g = t[("gloo", b)]
        for c in ("raw", "auto/shared", "auto/host"):
            v = t.get((c, b))
            row += "%12s" % ("-" if not v else "%.2fx" % (g / v))
        print(row)
    return 0


def ddp(out):
    torch = load_json(os.path.join(out, "torch_ddp_mlp.json"))
    runs = {}
    for np_ in (1, 2):
        j = load_json(os.path.join(out, f"ddp_bench_np{np_}.json"))
        if j:
            runs[np_] = j[0] if isinstance(j, list) else j
    if not torch or len(runs) < 2:
        print("# W-DDP: inputs missing, skipped")
        return 0
    tr = {r["np"]: r for r in torch["runs"]}
    n = max(tr)
    print("# W-DDP (MLP 784-2048-2048-2048-10, per-rank batch 64): median step of the slowest rank, ms")
    print("#%28s %10s %10s %10s %12s" % ("", "np=1", f"np={n}", "efficiency", f"samples/s np={n}"))
    me1, me2 = runs[1]["ddp_step_ms"], runs[n]["ddp_step_ms"]
    print(" %28s %10.2f %10.2f %10.3f %12.0f" % ("mpiddp ddp_bench (DDP step)", me1, me2, me1 / me2,
                                                 runs[n]["samples_per_s"]))
    print(" %28s %10.2f %10.2f %10.3f %12.0f" % ("PyTorch DDP gloo", tr[1]["step_ms"], tr[n]["step_ms"],
                                                 torch["efficiency"], tr[n]["samples_per_s"]))
    print(" %28s %10.2fx %9.2fx" % ("PyTorch step / mpiddp step", tr[1]["step_ms"] / me1,
                                    tr[n]["step_ms"] / me2))
    wrong = any(r.get("wrong") for r in runs.values())
    if wrong:
        print("# WRONG: ddp_bench reported a wrong result")
    return 1 if wrong else 0


def ddp_hook(out):
    j = load_json(os.path.join(out, "torch_ddp_hook.json"))
    if not j:
        print("# PyTorch DDP with the mpiddp hook: input missing, skipped")
        return 0
    print("# PyTorch DDP on W-DDP: gloo vs mpiddp.torch.allreduce_hook and the mpiddp backend, "
          "one job per np (torch_ddp_hook.py; efficiency = np=1 step / this step)")
    print("#%3s %-22s %9s %10s %10s" % ("np", "comm", "step_ms", "samples/s", "efficiency"))
    for r in j["runs"]:
        print(" %3d %-22s %9.2f %10.0f %10.3f" % (r["np"], r["comm"], r["step_ms"],
                                                  r["samples_per_s"], r["efficiency"]))
    return 0


def fmnist(out):
    me = load_csv(os.path.join(out, "ddp_train.csv"))
    pt = load_csv(os.path.join(out, "torch_fmnist.csv"))
    if not me or not pt:
        print("# Fashion-MNIST: inputs missing, skipped")
        return 0
    print("# Fashion-MNIST MLP 784-512-256-10, global batch 128: test accuracy and samples/s per epoch")
    print("#%5s %12s %12s %12s %12s %10s" % ("epoch", "mpiddp acc", "torch acc", "mpiddp s/s",
                                              "torch s/s", "s/s ratio"))
    for a, b in zip(me, pt):
        print(" %5s %11.2f%% %11.2f%% %12.0f %12.0f %9.2fx" % (
            a["epoch"], 100 * float(a["test_acc"]), 100 * float(b["test_acc"]),
            float(a["samples_per_s"]), float(b["samples_per_s"]),
            float(a["samples_per_s"]) / float(b["samples_per_s"])))
    return 0


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out/peers"
    rc = 0
    for part in (allreduce, ddp, ddp_hook, fmnist):
        rc |= part(out)
        print("#")
    return rc


if __name__ == "__main__":
    sys.exit(main())
