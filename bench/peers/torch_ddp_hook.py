"""W-DDP in PyTorch DDP with gloo and with the mpiddp comm hook, side by side in one run.

The model, batch and timing of torch_ddp_mlp.py (MLP 784-2048-2048-2048-10, per-rank batch 64,
SGD, synthetic inputs, one thread per rank, median step of the slowest rank). Started without
MPI, it launches itself through tools/mpilaunch at np=1 (no DDP: the baseline of all) and at
np=N, where every rank builds, on one process group made by mpiddp.torch.init_process_group(),
the model without DDP ("compute": every rank computing at once, the bound of any exchange on
a machine whose ranks share cores or memory bandwidth), under DDP with gloo, and under DDP with
mpiddp.torch.allreduce_hook, each with DDP's default buckets and with
gradient_as_bucket_view=True ("view": no copy of the gradients into and out of the buckets),
and under DDP on the torch.distributed backend "mpiddp" (no hook, DDP's defaults), timed in
alternating blocks so all see the same machine. Prints the table and the scaling
efficiency step(np=1) / step(np=N) of each; -J writes JSON.

    /usr/bin/python3 bench/peers/torch_ddp_hook.py --np 2 --steps 30 -J torch_ddp_hook.json

--model gpt: the same on W-GPT instead (torch_gpt.py's GPT-2 decoder, --layers --heads --dim
--seq, per-rank batch 8 sequences of random tokens, AdamW + clip as gpt_train; what
bench/peers/gpt_compare.sh runs with --only "gloo,mpiddp hook"); the rows then also give
tokens/s.

Needs the mpiddp package and library: PYTHONPATH=python MPIDDP_LIBRARY=build/libmpiddp.so
(or an installed mpiddp); rendezvous on 127.0.0.1 (loopback only)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "..", "tools", "mpilaunch")


# np=N configurations: (gradient exchange, DDP's gradient_as_bucket_view). "compute" is no DDP
# at all with every rank computing at once: the bound of any exchange on this machine.
# "mpiddp backend": DDP on a process group of the torch.distributed backend "mpiddp"
# (dist.new_group(backend="mpiddp")), no hook, DDP's arguments left alone (the backend then
# makes gradient_as_bucket_view True); "no view": gradient_as_bucket_view=False passed.
CONFIGS = {"compute": (None, False), "gloo": ("gloo", False), "gloo view": ("gloo", True),
           "mpiddp hook": ("mpiddp", False), "mpiddp hook view": ("mpiddp", True),
           "mpiddp backend": ("backend", None), "mpiddp backend no view": ("backend", False),
           "mpiddp backend 10MB": ("backend", None)}
# DDP's bucket_cap_mb where not its default 25 (10: the library's own reducer's default)
CAP_MB = {"mpiddp backend 10MB": 10}


def worker(args):
    import torch
    import torch.nn as nn
    import mpiddp.torch
    from torch_ddp_mlp import model, time_steps, trainer
    if args.model == "gpt":
        from torch_gpt import bench_model, bench_trainer
        model, trainer = (lambda: bench_model(args)), bench_trainer
    torch.set_num_threads(1)
    comm = mpiddp.torch.init_process_group()
    world, rank = comm.size, comm.rank
    res = {}
    if world == 1:
        torch.manual_seed(0)
        res["none"] = time_steps(trainer(model(), rank, args), args.steps, args.warmup, 1)
    else:
        import torch.distributed as dist
        backend = dist.new_group(backend="mpiddp")
        steps = {}
        for name, (comm_kind, view) in CONFIGS.items():
            if args.only and name not in args.only.split(","):
                continue
            torch.manual_seed(0)
            m = model()
            kw = {} if view is None else {"gradient_as_bucket_view": view}
            if name in CAP_MB:
                kw["bucket_cap_mb"] = CAP_MB[name]
            if comm_kind == "backend":
                kw["process_group"] = backend
            if comm_kind is not None:
                m = nn.parallel.DistributedDataParallel(m, **kw)
            if comm_kind == "mpiddp":
                m.register_comm_hook(None, mpiddp.torch.allreduce_hook)
            steps[name] = trainer(m, rank, args)
        blocks = max(1, args.blocks)
        per = {k: [] for k in steps}
        for b in range(blocks):  # alternate: both see the same machine over the run
            for k, step in steps.items():
                per[k].append(time_steps(step, max(1, args.steps // blocks),
                                         args.warmup if b == 0 else 1, world))
        for k, v in per.items():
            meds = sorted(x[0] for x in v)
            res[k] = (meds[len(meds) // 2], sum(x[1] for x in v) / len(v))
    if rank == 0:
        with open(args.worker, "w") as f:
            json.dump(res, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2, help="world size of the DDP runs (default 2)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=3, help="alternating blocks per comm (default 3)")
    ap.add_argument("--batch", type=int, help="per-rank batch (default 64; --model gpt: 8)")
    ap.add_argument("--model", choices=("mlp", "gpt"), default="mlp",
                    help="W-DDP's MLP (default) or W-GPT's decoder (torch_gpt.py)")
    ap.add_argument("--layers", type=int, default=6, help="--model gpt (default 6)")
    ap.add_argument("--heads", type=int, default=6, help="--model gpt (default 6)")
    ap.add_argument("--dim", type=int, default=384, help="--model gpt (default 384)")
    ap.add_argument("--seq", type=int, default=256, help="--model gpt (default 256)")
    ap.add_argument("-J", "--json", help="write the results as JSON")
    ap.add_argument("--only", help="comma-separated configurations of the np=N run (default: "
                    "all: %s)" % ", ".join(CONFIGS))
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # set by the launch: result file
    args = ap.parse_args()
    if args.batch is None:
        args.batch = 8 if args.model == "gpt" else 64
    if args.worker:
        return worker(args)
    import torch
    sys.path.insert(0, HERE)
    from peerlib import one_blas_thread
    one_blas_thread()
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in (1, args.np):
            out = os.path.join(tmp, "np%d.json" % w)
            cmd = ["bash", LAUNCH, "-n", str(w), "-e", "PYTHONPATH", sys.executable,
                   os.path.abspath(__file__), "--worker", out, "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--blocks", str(args.blocks),
                   "--batch", str(args.batch), "--model", args.model, "--layers",
                   str(args.layers), "--heads", str(args.heads), "--dim", str(args.dim), "--seq",
                   str(args.seq)] + (["--only", args.only] if args.only else [])
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
            if "MPIDDP_LIBRARY" in env:
                cmd[6:6] = ["-e", "MPIDDP_LIBRARY"]
            print("+ " + " ".join(cmd), file=sys.stderr)
            if subprocess.run(cmd, env=env).returncode != 0:
                sys.exit("torch_ddp_hook: the np=%d run failed" % w)
            with open(out) as f:
                res[w] = json.load(f)
    base = res[1]["none"][0]
    what = ("W-DDP MLP 784-2048-2048-2048-10, per-rank batch %d, SGD" % args.batch
            if args.model == "mlp" else
            "W-GPT GPT L%d H%d C%d T%d V256, per-rank batch %d x %d tokens, AdamW + clip"
            % (args.layers, args.heads, args.dim, args.seq, args.batch, args.seq))
    print("# torch %s DDP %s, 1 thread per rank, %d steps (+%d warm-up) in %d alternating blocks, "
          "median step of the slowest rank" % (torch.__version__, what, args.steps, args.warmup,
                                               args.blocks))
    print("#%3s %-22s %9s %9s %10s %10s" % ("np", "comm", "step_ms", "mean_ms", "samples/s",
                                           "efficiency"))
    rows = [(1, "none", res[1]["none"])] + [(args.np, k, res[args.np][k]) for k in CONFIGS
                                            if k in res[args.np]]
    recs = []
    for w, k, (med, mean) in rows:
        eff = base / med
        print(" %3d %-22s %9.2f %9.2f %10.0f %10.3f" % (w, k, med * 1e3, mean * 1e3,
                                                        args.batch * w / med, eff))
        recs.append({"np": w, "comm": k, "step_ms": med * 1e3, "step_mean_ms": mean * 1e3,
                     "samples_per_s": args.batch * w / med, "efficiency": eff})
        if args.model == "gpt":
            recs[-1]["tokens_per_s"] = args.batch * args.seq * w / med
    sps = {k: args.batch * w / med for w, k, (med, _) in rows}
    if "gloo" in sps:
        print("# samples/s over gloo's: " + ", ".join(
            "%s %.2fx" % (k, v / sps["gloo"]) for k, v in sps.items() if k.startswith("mpiddp")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": recs, "torch": torch.__version__, "model": args.model}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
