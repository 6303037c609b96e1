#!/usr/bin/env bash
# W-GPT: gpt_train against PyTorch DDP on the same GPT model, with gloo and with the mpiddp
# comm hook, per-rank batch fixed, one compute thread per rank, at np 1 and N, one after the
# other in one run of this script; then the side-by-side table with tokens/s, ms/step, scaling
# efficiency, the ratios to PyTorch and the model FLOP utilisation (model FLOP/s per rank over
# the single-thread sgemm rate ddp_info measures, in the same run).
#
#   bash bench/peers/gpt_compare.sh [--steps N] [--np N] [--out DIR] [--study FILE.json]
#                                   [-- gpt_train model options]
#
# Default model: gpt_train's (6 layers, 6 heads, 384 dims, 256 tokens, per-rank batch 8).
# gpt_train's time is the median of its per-step times (--log-every 1) after the first 2 steps
# (the first builds the buckets), as PyTorch's is a median: one slow step of another job on a
# shared machine moves neither. PyTorch's (bench/peers/torch_ddp_hook.py --model
# gpt, launched by tools/mpilaunch) is the median step of the slowest rank, gloo and the hook
# timed in alternating blocks of the same job, with PyTorch without DDP at np=N ("compute only":
# every rank computing at once, what the cores give before any exchange). The np=N gpt_train run writes its DDP_TIMELINE
# trace to DIR/gpt_train_npN.trace.json. --study writes the results as a bench/results study
# (render.py's format; then run python3 bench/results/render.py). Environment: BUILD (default
# build), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=out/peers
STEPS=12
NP=2
STUDY=
MODEL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --study) STUDY=$2; shift 2 ;;
    --) shift; MODEL=("$@"); break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpt_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
load0=$(cut -d' ' -f1-3 /proc/loadavg)
date0=$(date -u '+%F %T')
sgemm=$("$BUILD/apps/ddp_info" 2>/dev/null | awk '$1 == "0" && NF >= 9 { print $NF }')
blas=$("$BUILD/apps/ddp_info" 2>/dev/null | sed -n 's/^# BLAS (rank 0) *: //p')
for np in 1 "$NP"; do
  tl=()
  [ "$np" = "$NP" ] && tl=(-e "DDP_TIMELINE=$OUT/gpt_train_np$np.trace.json")
  echo "+ gpt_train np=$np" >&2
  tools/mpilaunch -n "$np" "${tl[@]}" "$BUILD/apps/gpt_train" "${MODEL[@]}" --steps "$STEPS" \
    --val-every 0 --log-every 1 --warmup 1 >"$OUT/gpt_train_np$np.txt" 2>&1
done
# the model sizes gpt_train used, for the PyTorch run
read -r L H C T B < <(sed -n 's/^# gpt_train: GPT L\([0-9]*\) H\([0-9]*\) C\([0-9]*\) T\([0-9]*\) .*/\1 \2 \3 \4/p;
  s/^# ranks [0-9]*, per-rank batch \([0-9]*\) .*/\1/p' "$OUT/gpt_train_np1.txt" | tr '\n' ' '; echo)
tsteps=$(( STEPS * 2 / 3 > 2 ? STEPS * 2 / 3 : 2 ))
echo "+ torch_ddp_hook.py --model gpt" >&2
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} MPIDDP_LIBRARY=$BUILD/libmpiddp.so \
  "$PYTHON" bench/peers/torch_ddp_hook.py --model gpt --np "$NP" --steps "$tsteps" --warmup 2 \
  --blocks 2 --only "compute,gloo,mpiddp hook" --layers "$L" --heads "$H" --dim "$C" --seq "$T" \
  --batch "$B" -J "$OUT/torch_gpt.json" >"$OUT/torch_gpt.txt" 2>"$OUT/torch_gpt.err" ||
  { cat "$OUT/torch_gpt.err" >&2; exit 1; }
cat "$OUT/torch_gpt.txt"
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# gpt_train's steady state: the median ms/step of the steps after the first 2
ms() { awk '$1 ~ /^[0-9]+$/ && $1 > 2 { print $5 }' "$1" | sort -n | awk '{ v[NR] = $1 }
  END { if (NR) printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fpt=$(sed -n 's/^# \([0-9.]*\) MFLOP per token.*/\1/p' "$OUT/gpt_train_np1.txt")
"$PYTHON" - "$OUT" "$NP" "$B" "$T" "$fpt" "${sgemm:-0}" "$(ms "$OUT/gpt_train_np1.txt")" \
  "$(ms "$OUT/gpt_train_np$NP.txt")" "$STUDY" "$date0" "$load0" "$load1" "$blas" "$STEPS" \
  "$tsteps" "${MODEL[*]:-}" <<'EOF'
import json, os, re, subprocess, sys
(out, np_, B, T, fpt, sgemm, ms1, msn, study, date, load0, load1, blas, steps, tsteps,
 model) = sys.argv[1:]
np_, B, T, fpt, sgemm, ms1, msn = int(np_), int(B), int(T), float(fpt), float(sgemm), float(ms1), float(msn)
tj = json.load(open(f"{out}/torch_gpt.json"))
torch = {(r["np"], r["comm"]): r for r in tj["runs"]}
head = open(f"{out}/gpt_train_np1.txt").read()
desc = re.search(r"^# gpt_train: (GPT [^,]*), (\d+) parameters", head, re.M)
if desc:  # gpt.h's count from the sizes (the header's figure has one decimal)
    L_, C_, T_, V_ = (int(re.search(k + r"(\d+)", desc.group(1)).group(1)) for k in ("L", "C", "T", "V"))
    fpt = (6.0 * (12.0 * L_ * C_ * C_ + V_ * C_) + 12.0 * L_ * T_ * C_) / 1e6
red = re.search(r"^# reducer: (.*)$", open(f"{out}/gpt_train_np{np_}.txt").read(), re.M)
rows, recs = [], []
def row(w, prog, comm, ms_):
    tps = B * T * w / (ms_ / 1e3)
    mfu = tps / w * fpt * 1e6 / (sgemm * 1e9) if sgemm > 0 else None
    recs.append({"np": w, "program": prog, "comm": comm, "ms_step": ms_, "tokens_per_s": tps, "mfu": mfu})
for w, ms_ in ((1, ms1), (np_, msn)):
    row(w, "gpt_train", "mpiddp reducer" if w > 1 else "none", ms_)
for w, comm in ((1, "none"), (np_, "compute"), (np_, "gloo"), (np_, "mpiddp hook")):
    if (w, comm) in torch:  # compute: no DDP, every rank computing at once (the exchange's bound)
        row(w, "torch DDP" if comm != "compute" else "torch", "none (compute only)" if comm == "compute" else comm,
            torch[(w, comm)]["step_ms"])
by = {(r["np"], r["program"], r["comm"]): r for r in recs}
base = {"gpt_train": ms1, "torch DDP": torch[(1, "none")]["step_ms"], "torch": torch[(1, "none")]["step_ms"]}
gloo, hook = by[(np_, "torch DDP", "gloo")]["tokens_per_s"], by[(np_, "torch DDP", "mpiddp hook")]["tokens_per_s"]
for r in recs:
    r["efficiency"] = base[r["program"]] / r["ms_step"]
    r["vs_torch_gloo"] = r["tokens_per_s"] / gloo if r["np"] == np_ else None
    r["vs_torch_hook"] = r["tokens_per_s"] / hook if r["np"] == np_ else None
print(f"# W-GPT: {desc.group(1) if desc else '?'}, per-rank batch {B} x {T} tokens, {fpt:.1f} MFLOP/token, "
      f"sgemm {sgemm:.1f} GFLOP/s (ddp_info, 1 thread); load {load0} before, {load1} after")
print(f"#{'np':>3} {'program':<10} {'comm':<15} {'ms/step':>9} {'tokens/s':>9} {'effic':>6} {'/gloo':>6} {'/hook':>6} {'MFU':>6}")
f = lambda v, p: "-" if v is None else f"{v:.{p}f}"
for r in recs:
    print(f" {r['np']:>3} {r['program']:<10} {r['comm']:<15} {r['ms_step']:>9.1f} {r['tokens_per_s']:>9.0f} "
          f"{r['efficiency']:>6.3f} {f(r['vs_torch_gloo'], 2):>6} {f(r['vs_torch_hook'], 2):>6} {f(r['mfu'], 3):>6}")
g = by[(np_, "gpt_train", "mpiddp reducer")]
print(f"# targets at np={np_}: efficiency {g['efficiency']:.3f} (>= 0.90), tokens/s {g['vs_torch_gloo']:.2f}x gloo "
      f"(>= 1.5), {g['vs_torch_hook']:.2f}x hook (>= 1.2), MFU {by[(1, 'gpt_train', 'none')]['mfu'] or 0:.3f} at np=1, "
      f"{g['mfu'] or 0:.3f} at np={np_} (>= 0.50)")
if red:
    print(f"# gpt_train np={np_} reducer: {red.group(1)}")
res = {"rows": recs, "sgemm_gflops": sgemm, "mflop_per_token": fpt, "model": desc.group(1) if desc else None,
       "params": int(desc.group(2)) if desc else None, "batch": B, "seq": T, "date_utc": date,
       "load_before": load0, "load_after": load1, "blas": blas, "torch": tj.get("torch"),
       "reducer": red.group(1) if red else None}
json.dump(res, open(f"{out}/gpt_compare.json", "w"), indent=1)
if study:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    s = {"title": f"W-GPT: gpt_train against PyTorch DDP (gloo and the mpiddp comm hook) at np 1 and {np_} "
                  "(bench/peers/gpt_compare.sh)",
         "machine_short": f"{cpu}, {os.cpu_count()} cores (shared)",
         "summary": f"{res['model']} ({res['params']:,} parameters, byte vocabulary), per-rank batch {B} x {T} "
                    f"tokens, AdamW + clipping, one compute thread per rank. gpt_train: median step of "
                    f"steps 3-{steps}; PyTorch {res['torch']}: median step of "
                    f"the slowest rank over {tsteps} steps, gloo and the hook in alternating blocks of one job. "
                    f"MFU: model FLOP/s per rank ({fpt:.1f} MFLOP per token, gpt.h's count) over the "
                    f"single-thread sgemm rate ddp_info measured in the same run ({sgemm:.1f} GFLOP/s).",
         "machine": {"cpu": f"{cpu}, {os.cpu_count()} cores, shared with other jobs under the CPU lock",
                     "load": f"{load0} before, {load1} after (1, 5, 15 min)", "blas": blas, "torch": res["torch"]},
         "date": f"{date} UTC (commit {commit})",
         "commands": [f"bash bench/peers/gpt_compare.sh --steps {steps} --np {np_} --study {study}" +
                      (f" -- {model}" if model else "")],
         "tables": [{"title": f"tokens/s and step time, np 1 and {np_}",
                     "caption": "efficiency: step(np=1) / step(np) of the same program; /gloo, /hook: tokens/s "
                                f"over PyTorch DDP's at np={np_}.",
                     "columns": ["np", "program", "grad exchange", {"label": "ms/step", "printf": "%.1f"},
                                 {"label": "tokens/s", "printf": "%.0f"}, {"label": "efficiency", "printf": "%.3f"},
                                 {"label": "/ torch gloo", "printf": "%.2f"}, {"label": "/ torch hook", "printf": "%.2f"},
                                 {"label": "MFU", "printf": "%.3f"}],
                     "rows": [[r["np"], r["program"], r["comm"], r["ms_step"], r["tokens_per_s"], r["efficiency"],
                               r["vs_torch_gloo"], r["vs_torch_hook"], r["mfu"]] for r in recs]}],
         "notes": ["Targets (issue 27): efficiency at np=2 >= 0.90, tokens/s >= 1.5x PyTorch gloo and >= 1.2x "
                   "PyTorch with the hook, MFU >= 0.50."] +
                  ([f"gpt_train np={np_} reducer statistics: {res['reducer']}."] if res["reducer"] else [])}
    with open(study, "w") as fp:
        json.dump(s, fp, indent=2)
        fp.write("\n")
    print(f"# wrote {study}")
EOF
