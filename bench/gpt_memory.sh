#!/usr/bin/env bash
# Memory per rank of gpt_train at GPT-2 small size (--preset gpt2-124m: 12 layers, 768 dims,
# 1024 tokens, per-rank batch 1, byte vocabulary) with --zero 0, 1 and 2: one job per mode of
# STEPS optimizer steps (default 1) at NP ranks (default 2), every rank under GNU time
# (/usr/bin/time -v: its "Maximum resident set size"), and /proc/PID/status of the ranks read
# every 0.2 s for the split of resident memory into private (RssAnon) and node-shared
# (RssShmem: the reducer's bucket pool, the peer's pages this rank reads counted too), each
# the maximum over the run. Prints one table; --study writes it as
# a bench/results study (render.py's format; then run python3 bench/results/render.py).
#   bench/gpt_memory.sh [--build DIR] [--np N] [--steps N] [--study FILE.json] [-- gpt_train options]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=build np=2 steps=1 study= extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --study) study=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "gpt_memory.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
timev=/usr/bin/time
[ -x "$timev" ] || { echo "gpt_memory: $timev (GNU time) is needed" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg) date0=$(date -u '+%F %T')
for z in 0 1 2; do
  echo "+ gpt_train --preset gpt2-124m --zero $z, np=$np" >&2
  tools/mpilaunch -n "$np" "$timev" -v "$build/apps/gpt_train" --preset gpt2-124m --steps "$steps" \
    --val-every 0 --log-every 1 --warmup 1 --zero "$z" "${extra[@]}" >"$tmp/z$z.out" 2>&1 &
  job=$!
  while kill -0 "$job" 2>/dev/null; do
    for p in $(pgrep -x gpt_train); do
      awk '/^(RssAnon|RssShmem):/ { printf "%s %s ", $1, $2 } END { print "" }' "/proc/$p/status" 2>/dev/null
    done >>"$tmp/z$z.rss"
    sleep 0.2
  done
  wait "$job" || { tail -20 "$tmp/z$z.out"; echo "gpt_memory: --zero $z failed" >&2; exit 1; }
done
python3 - "$tmp" "$np" "$steps" "$study" "$date0" "$load0" "${extra[*]:-}" <<'PY'
import json, os, re, subprocess, sys
tmp, np_, steps, study, date, load, extra = sys.argv[1:]
rows = []
for z in (0, 1, 2):
    text = open(f"{tmp}/z{z}.out").read()
    rss = [int(x) / 1024.0 for x in re.findall(r"Maximum resident set size \(kbytes\): (\d+)", text)]
    params = int(re.search(r"(\d+) parameters in", text).group(1))
    act = float(re.search(r"activations ([0-9.]+) MB per rank", text).group(1))
    ms = re.search(r"# \d+ steps in [0-9.]+ s: \d+ tokens/s, ([0-9.]+) ms/step", text)
    split = {"RssAnon:": 0, "RssShmem:": 0}
    for line in open(f"{tmp}/z{z}.rss"):
        w = line.split()
        for k, v in zip(w[0::2], w[1::2]):
            split[k] = max(split[k], int(v) / 1024.0)
    rows.append({"zero": z, "np": int(np_), "params": params, "activations_mb": act,
                 "rss_mb": rss, "max_rss_mb": max(rss), "anon_mb": split["RssAnon:"],
                 "shmem_mb": split["RssShmem:"], "ms_step": float(ms.group(1)) if ms else None})
p = rows[0]["params"] * 4 / 2**20
print(f"# gpt_train --preset gpt2-124m, {rows[0]['params']:,} parameters ({p:.0f} MB of f32), np {np_}, "
      f"{steps} step(s); load {load}")
print(f"# {'zero':>4} {'activations_MB':>14} {'max_RSS_MB per rank':>22} {'vs zero 0':>10} {'anon_MB':>8} {'shmem_MB':>9} {'ms/step':>9}")
for r in rows:
    print(f"  {r['zero']:>4} {r['activations_mb']:>14.1f} {' / '.join('%.0f' % x for x in r['rss_mb']):>22} "
          f"{r['max_rss_mb'] - rows[0]['max_rss_mb']:>+10.0f} {r['anon_mb']:>8.0f} {r['shmem_mb']:>9.0f} {r['ms_step'] or 0:>9.0f}")
if study:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    s = {"title": "gpt_train at GPT-2 small size: peak memory per rank at --zero 0, 1, 2 (bench/gpt_memory.sh)",
         "machine_short": f"{cpu}, {os.cpu_count()} cores (shared)",
         "summary": f"`gpt_train --preset gpt2-124m` (12 layers, 12 heads, 768 dims, 1024 tokens, byte vocabulary: "
                    f"{rows[0]['params']:,} parameters, {p:.0f} MB of f32), per-rank batch 1, AdamW, {steps} "
                    f"optimizer step(s) at np={np_}, one job per mode, every rank under `/usr/bin/time -v`. The "
                    "optimizer state (two f32 moments) is all of the model at --zero 0 and a rank's shard at 1 and "
                    "2; --zero 2 also keeps only the shard's reduced gradients.",
         "machine": {"cpu": f"{cpu}, {os.cpu_count()} cores, shared with other jobs under the CPU lock",
                     "load": f"{load} at the start (1, 5, 15 min)"},
         "date": f"{date} UTC (commit {commit})",
         "commands": [f"bash bench/gpt_memory.sh --np {np_} --steps {steps} --study {study}" +
                      (f" -- {extra}" if extra else "")],
         "tables": [{"title": "peak resident memory per rank",
                     "caption": "activations: what gpt_train's header reports for its activation and scratch "
                                "buffers; RSS: GNU time's maximum resident set size of each rank; RssAnon / "
                                "RssShmem: the private and the node-shared part, each its maximum over the run "
                                "(max over ranks, /proc/PID/status every 0.2 s).",
                     "columns": ["--zero", {"label": "activations (MB)", "printf": "%.1f"},
                                 {"label": "max RSS, rank 0 / rank 1 (MB)", "printf": "%.0f"},
                                 {"label": "vs --zero 0 (MB)", "printf": "%+.0f"},
                                 {"label": "max RssAnon (MB)", "printf": "%.0f"},
                                 {"label": "max RssShmem (MB)", "printf": "%.0f"},
                                 {"label": "ms/step", "printf": "%.0f"}],
                     "rows": [[r["zero"], r["activations_mb"], r["rss_mb"], r["max_rss_mb"] - rows[0]["max_rss_mb"],
                               r["anon_mb"], r["shmem_mb"], r["ms_step"]] for r in rows]}]}
    with open(study, "w") as fp:
        json.dump(s, fp, indent=2)
        fp.write("\n")
    print(f"# wrote {study}")
PY
