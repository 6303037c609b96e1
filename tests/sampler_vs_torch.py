#!/usr/bin/python3
"""Runs apps/ddp_sampler with random arguments and compares every line with what Debian's
python3-torch (1.13) DistributedSampler / BatchSampler give. ci/setup.sh installs torch, so a
missing torch is a failure; MPIDDP_SKIP_TORCH=1 turns it into a skip (exit 77) for machines
that cannot have it (the committed fixtures still cover the sampler there).

    /usr/bin/python3 tests/sampler_vs_torch.py build/apps/ddp_sampler [cases] [seed]
"""
import os
import random
import subprocess
import sys

try:
    import torch  # noqa: F401
    from torch.utils.data import BatchSampler, DistributedSampler
except ImportError as e:
    if os.environ.get("MPIDDP_SKIP_TORCH") == "1":
        print("sampler_vs_torch: SKIP: %s is missing torch (%s) and MPIDDP_SKIP_TORCH=1"
              % (sys.executable, e))
        sys.exit(77)
    print("sampler_vs_torch: FAIL: %s cannot import torch (%s): install python3-torch "
          "(ci/setup.sh does), or set MPIDDP_SKIP_TORCH=1 to skip this comparison"
          % (sys.executable, e))
    sys.exit(1)


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def torch_lines(size, replicas, rank, shuffle, drop_last, seed, epoch, batch, drop_batch):
    s = DistributedSampler(Sized(size), num_replicas=replicas, rank=rank, shuffle=shuffle,
                           seed=seed, drop_last=drop_last)
    s.set_epoch(epoch)
    if batch:
        return [" ".join(map(str, b)) for b in BatchSampler(s, batch, drop_batch)]
    return [" ".join(map(str, s))]


def random_case(rng):
    size = rng.choice([0, 1, 2, 3, 7, 10, 64, 101, 1000, 4097, 60000,
                       rng.randrange(1, 200), rng.randrange(1, 100000)])
    if rng.random() < 0.02:
        size = rng.randrange(1000000, 3000000)
    replicas = rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 64, rng.randrange(1, 300)])
    rank = rng.randrange(replicas)
    seed = rng.choice([0, 1, 42, 2**31 - 1, 2**32 - 1, 2**32, 2**32 + 7, 2**63, 2**64 - 10,
                       rng.randrange(2**64 - 100)])
    epoch = rng.choice([0, 1, 2, 5, rng.randrange(100), rng.randrange(2**40)])
    if seed + epoch >= 2**64:
        epoch = 0
    shuffle = rng.random() < 0.8
    drop_last = rng.random() < 0.5
    batch = rng.choice([0, 0, 1, 3, 64, rng.randrange(1, 500)])
    drop_batch = bool(batch) and rng.random() < 0.5
    return size, replicas, rank, shuffle, drop_last, seed, epoch, batch, drop_batch


def main():
    app = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 2026)
    bad = 0
    for i in range(cases):
        c = random_case(rng)
        size, replicas, rank, shuffle, drop_last, seed, epoch, batch, drop_batch = c
        args = [app, "--size", str(size), "--replicas", str(replicas), "--rank", str(rank),
                "--seed", str(seed), "--epoch", str(epoch)]
        args += ["--shuffle"] if shuffle else []
        args += ["--drop-last"] if drop_last else []
        args += ["--batch-size", str(batch)] if batch else []
        args += ["--drop-last-batch"] if drop_batch else []
        out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        want = torch_lines(*c)
        got = out.stdout.split("\n")
        if got and got[-1] == "":
            got.pop()
        if out.returncode != 0 or got != want:
            bad += 1
            print("DIFFERS: %s (rc %d, %d lines vs torch %d) %s" % (
                " ".join(args[1:]), out.returncode, len(got), len(want), out.stderr.strip()))
    # torch refuses seed + epoch >= 2^64 (manual_seed overflows): so must we
    for seed, epoch in ((2**64 - 1, 1), (2**63, 2**63)):
        out = subprocess.run([app, "--size", "5", "--shuffle", "--seed", str(seed),
                              "--epoch", str(epoch)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if out.returncode == 0:
            bad += 1
            print("DIFFERS: seed %d epoch %d accepted, torch refuses it" % (seed, epoch))
    print("sampler_vs_torch: %d random cases against torch %s, %d differ -> %s" % (
        cases, torch.__version__, bad, "FAIL" if bad else "PASS"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
