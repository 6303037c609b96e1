"""PyTorch peer of gpt_train: the same GPT-2 decoder, for the agreement check and the benchmark.

--check: rebuilds gpt_train's run in PyTorch from its outputs (initial weights from --dump-init,
step 1's averaged gradients from --dump-grads, per-step losses from --log-steps) and the same
batches: the same corpus, split and windows, and the sampler order recomputed with
torch.utils.data.DistributedSampler (drop_last, shuffle, seed; mpiddp's sampler matches it
exactly), every rank's micro-batch of a step concatenated (DDP's gradient average over equal
batches is the gradient of the whole global batch). AdamW in two groups (weight decay on the
2-D tensors only), warmup + cosine as gpt_train, clip_grad_norm_. Prints one line per step and
per tensor and exits 1 when a loss differs by more than --loss-tol (relative) or a gradient by
more than --grad-tol (per tensor: max |torch - mpiddp| / max |torch|).

    gpt_train --layers 2 --dim 64 --heads 4 --seq 32 --batch 4 --steps 20 --dump-init i.bin \\
        --dump-grads g.bin --log-steps s.log
    /usr/bin/python3 bench/peers/torch_gpt.py --check --init i.bin --grads g.bin --log s.log \\
        --np 1 --batch 4 --steps 20

--bench: DDP (gloo) over world 1 and --np ranks, one thread each, on the same model sizes and
random tokens; median step time of the slowest rank and tokens/s, as gpt_train reports them.

Written for Debian's python3-torch (1.13, CPU)."""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import init_gloo, spawn  # noqa: E402
from torch_ddp_mlp import time_steps  # noqa: E402  (median step of the slowest rank)

CORPUS = "/usr/share/games/fortunes"
VAL_CHUNK, VAL_EVERY = 16384, 10  # apps/kit/gpt_data.h


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.H
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.H, hs).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = F.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    def tensors(self):  # gpt.h's order
        return [self.ln1.weight, self.ln1.bias, self.qkv.weight, self.qkv.bias, self.proj.weight,
                self.proj.bias, self.ln2.weight, self.ln2.bias, self.fc.weight, self.fc.bias,
                self.fcproj.weight, self.fcproj.bias]


class GPT(nn.Module):
    def __init__(self, L, H, C, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        # a plain attribute, not a buffer: DDP broadcasts buffers, and gloo has no bool type
        self.mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()  # the tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    def tensors(self):
        ts = [self.wte.weight, self.wpe.weight]
        for b in self.blocks:
            ts += b.tensors()
        return ts + [self.lnf.weight, self.lnf.bias]


def read_tensors(path):
    """gpt_train's tensor file: "GPTF32\\0\\0", six i32 (L, H, C, T, V, tensors), u64 total, f32s."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != b"GPTF32\0\0":
        sys.exit(f"torch_gpt: {path} is not a gpt_train tensor file")
    L, H, C, T, V, n = struct.unpack_from("<6i", raw, 8)
    (total,) = struct.unpack_from("<Q", raw, 32)
    flat = torch.frombuffer(bytearray(raw[40:]), dtype=torch.float32)
    if flat.numel() != total:
        sys.exit(f"torch_gpt: {path}: {flat.numel()} floats, header says {total}")
    return (L, H, C, T, V), n, flat


def load_flat(ts, flat):
    off = 0
    with torch.no_grad():
        for t in ts:
            t.copy_(flat[off:off + t.numel()].view_as(t))
            off += t.numel()
    assert off == flat.numel()


def corpus(path):
    """gpt_data.c: a folder's regular files (no *.dat, no links) in name order, concatenated;
    every VAL_EVERY-th chunk of VAL_CHUNK bytes to validation."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith(".") and not n.endswith(".dat")
                       and os.path.isfile(os.path.join(path, n))
                       and not os.path.islink(os.path.join(path, n)))
        data = b"".join(open(os.path.join(path, n), "rb").read() for n in names)
    else:
        data = open(path, "rb").read()
    chunks = [data[o:o + VAL_CHUNK] for o in range(0, len(data), VAL_CHUNK)]
    train = b"".join(c for k, c in enumerate(chunks) if k % VAL_EVERY != VAL_EVERY - 1)
    return torch.frombuffer(bytearray(train), dtype=torch.uint8).long()


class Batches:
    """gpt_train's micro-batches: rank r's DistributedSampler list in chunks of `batch`, the
    last short one dropped, a new epoch (set_epoch) when a list runs out; every rank's
    micro-batch concatenated in rank order."""

    def __init__(self, tokens, T, world, batch, seed):
        self.tok, self.T, self.world, self.batch, self.seed = tokens, T, world, batch, seed
        self.nwin = (tokens.numel() - (T + 1)) // T + 1
        self.epoch, self.pos = -1, 0
        self.lists = []

    def next(self):
        from torch.utils.data import DistributedSampler
        if self.epoch < 0 or self.pos + self.batch > len(self.lists[0]):
            self.epoch += 1
            self.pos = 0
            self.lists = []
            for r in range(self.world):
                s = DistributedSampler(range(self.nwin), num_replicas=self.world, rank=r,
                                       shuffle=True, seed=self.seed, drop_last=True)
                s.set_epoch(self.epoch)
                self.lists.append(list(s))
        idx = [i for lst in self.lists for i in lst[self.pos:self.pos + self.batch]]
        self.pos += self.batch
        win = torch.stack([self.tok[i * self.T:i * self.T + self.T + 1] for i in idx])
        return win[:, :-1], win[:, 1:]


def train_lr(lr0, step, warmup, total):  # apps/kit/train_util.c
    if step < warmup:
        return lr0 * (step + 1) / warmup
    if total <= warmup:
        return lr0
    t = min((step - warmup) / (total - warmup), 1.0)
    return lr0 * 0.5 * (1.0 + math.cos(math.pi * t))


def check(args):
    torch.set_num_threads(1)
    cfg, n, init = read_tensors(args.init)
    L, H, C, T, V = cfg
    model = GPT(L, H, C, T, V)
    ts = model.tensors()
    if len(ts) != n:
        sys.exit(f"torch_gpt: {n} tensors in {args.init}, the model has {len(ts)}")
    load_flat(ts, init)
    decay = [t for t in ts if t.dim() == 2]
    nodecay = [t for t in ts if t.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": nodecay, "weight_decay": 0.0}], lr=args.lr,
                            betas=(args.beta1, args.beta2), eps=args.eps)
    ref = [line.split() for line in open(args.log) if line.strip()]
    steps = min(args.steps, len(ref))
    warmup = args.warmup if args.warmup >= 0 else min(200, args.total_steps // 10)
    data = Batches(corpus(args.data), T, args.np, args.batch, args.seed)
    bad = 0
    print(f"# torch {torch.__version__}: {L} layers, {H} heads, {C} dims, {T} tokens, vocab {V}; "
          f"np {args.np} x batch {args.batch} x accum {args.accum}; {steps} steps")
    print(f"# {'step':>4} {'torch_loss':>12} {'mpiddp_loss':>12} {'rel_diff':>9} {'gnorm':>9}")
    worst = 0.0
    for s in range(steps):
        lr = train_lr(args.lr, s, warmup, args.total_steps)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        loss = 0.0
        for _ in range(args.accum):
            x, y = data.next()
            lo = model(x, y) / args.accum
            lo.backward()
            loss += lo.item()
        if s == 0 and args.grads:
            _, _, g1 = read_tensors(args.grads)
            off, gworst = 0, 0.0
            for t, name in zip(ts, names(L)):
                mine = g1[off:off + t.numel()].view_as(t)
                off += t.numel()
                scale = t.grad.abs().max().item()
                d = (t.grad - mine).abs().max().item() / (scale if scale > 0 else 1.0)
                gworst = max(gworst, d)
                flag = "" if d <= args.grad_tol else "  FAIL"
                bad += bool(flag)
                if flag or args.verbose:
                    print(f"#   grad {name:>14}: max|diff|/max|g| {d:.2e} (max|g| {scale:.3e}){flag}")
            print(f"# step 1 gradients: {len(ts)} tensors, worst max|diff|/max|g| {gworst:.2e} "
                  f"(tolerance {args.grad_tol:g})")
        gn = torch.nn.utils.clip_grad_norm_(ts, args.clip).item() if args.clip > 0 else 0.0
        opt.step()
        mine = float(ref[s][1])
        rel = abs(loss - mine) / abs(loss)
        worst = max(worst, rel)
        flag = "" if rel <= args.loss_tol else "  FAIL"
        bad += bool(flag)
        print(f"  {s + 1:>4} {loss:>12.7f} {mine:>12.7f} {rel:>9.2e} {gn:>9.4f}{flag}")
    print(f"# losses of {steps} steps: worst relative difference {worst:.2e} (tolerance {args.loss_tol:g})")
    print(f"torch_gpt --check: {'FAIL' if bad else 'PASS'} ({bad} over tolerance)")
    return 1 if bad else 0


def names(L):
    per = ["ln1.w", "ln1.b", "attn.qkv.w", "attn.qkv.b", "attn.proj.w", "attn.proj.b", "ln2.w",
           "ln2.b", "mlp.fc.w", "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"]
    return ["wte", "wpe"] + [f"h{l}.{p}" for l in range(L) for p in per] + ["lnf.w", "lnf.b"]


def bench_model(args):
    """The --bench model (vocab 256, the byte tokenizer's), seeded."""
    torch.manual_seed(0)
    return GPT(args.layers, args.heads, args.dim, args.seq, 256)


def bench_trainer(m, rank, args):
    """One AdamW + clip step of `m` (the GPT or a DDP wrapper of it) on this rank's random
    tokens: gpt_train's recipe (decay on the 2-D tensors, betas 0.9/0.95, clip 1). Also the
    model of torch_ddp_hook.py --model gpt."""
    ts = getattr(m, "module", m).tensors()
    decay = [t for t in ts if t.dim() == 2]
    nodecay = [t for t in ts if t.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}], lr=6e-4, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randint(0, 256, (args.batch, args.seq), generator=g)
    y = torch.randint(0, 256, (args.batch, args.seq), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        m(x, y).backward()
        torch.nn.utils.clip_grad_norm_(ts, 1.0)
        opt.step()
    return step


def bench_rank(rank, world, port, args, q):
    torch.set_num_threads(1)
    m = bench_model(args)
    if world > 1:
        init_gloo(rank, world, port)
        m = nn.parallel.DistributedDataParallel(m)
    step = bench_trainer(m, rank, args)

    med, _ = time_steps(step, args.steps, args.warmup_steps, world)
    if world > 1:
        dist.destroy_process_group()
    if rank == 0:
        q.put(med)


def bench(args):
    res = {}
    for w in sorted({1, args.np}):
        r, ok = spawn(bench_rank, w, args)
        if not ok:
            sys.exit(f"torch_gpt --bench: a process of world {w} failed")
        res[w] = r
    nparams = sum(p.numel() for p in GPT(args.layers, args.heads, args.dim, args.seq, 256).tensors())
    print(f"# torch {torch.__version__} DDP (gloo) GPT L{args.layers} H{args.heads} C{args.dim} "
          f"T{args.seq} V256, {nparams} parameters, per-rank batch {args.batch}, AdamW + clip, "
          f"1 thread per process, {args.steps} steps (+{args.warmup_steps} warm-up), median step "
          f"of the slowest rank")
    print(f"#{'np':>3} {'ms/step':>9} {'tokens/s':>10}")
    recs = []
    for w, med in sorted(res.items()):
        tps = args.batch * args.seq * w / med
        print(f" {w:>3} {med * 1e3:>9.1f} {tps:>10.0f}")
        recs.append({"np": w, "step_ms": med * 1e3, "tokens_per_s": tps})
    if args.np > 1:
        print(f"# scaling efficiency step(np=1) / step(np={args.np}): {res[1] / res[args.np]:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": recs, "params": nparams, "torch": torch.__version__}, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--np", type=int, default=1, help="gpt_train's rank count / DDP world")
    ap.add_argument("--batch", type=int, default=8, help="per-rank micro-batch (sequences)")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="steps compared / timed")
    ap.add_argument("--total-steps", type=int, default=20, help="gpt_train's --steps (schedule)")
    ap.add_argument("--warmup", type=int, default=-1)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=CORPUS)
    ap.add_argument("--init", help="gpt_train --dump-init file")
    ap.add_argument("--grads", help="gpt_train --dump-grads file")
    ap.add_argument("--log", help="gpt_train --log-steps file")
    ap.add_argument("--loss-tol", type=float, default=1e-4)
    ap.add_argument("--grad-tol", type=float, default=1e-5)
    ap.add_argument("-v", "--verbose", action="store_true", help="every tensor's gradient line")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--warmup-steps", type=int, default=2, help="--bench: untimed steps first")
    ap.add_argument("-J", "--json", help="--bench: write the results as JSON")
    args = ap.parse_args()
    if args.check:
        if not (args.init and args.log):
            ap.error("--check needs --init and --log")
        return check(args)
    if args.bench:
        return bench(args)
    ap.error("give --check or --bench")
    return 2


if __name__ == "__main__":
    sys.exit(main())
