#!/usr/bin/env bash
# W-GPT: gpt_train against PyTorch DDP (gloo) on the same GPT model, per-rank batch fixed, one
# compute thread per rank, at np 1 and 2, one after the other in the same session; then the
# side-by-side table with tokens/s, ms/step, scaling efficiency, the ratio to PyTorch and the
# model FLOP utilisation against the single-thread sgemm rate ddp_info measures.
#
#   bash bench/peers/gpt_compare.sh [--steps N] [--np N] [--out DIR] [-- gpt_train model options]
#
# Default model: gpt_train's (6 layers, 6 heads, 384 dims, 256 tokens, per-rank batch 8).
# gpt_train's time is its steady-state ms/step after the first --log-every interval (the
# first steps build and rebuild the buckets); PyTorch's is the median step of the slowest rank
# (torch_gpt.py --bench, 2 untimed steps first). Environment: BUILD (default build), PYTHON
# (default /usr/bin/python3); the launcher is tools/mpilaunch.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=out/peers
STEPS=12
NP=2
MODEL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; MODEL=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gpt_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sgemm=$("$BUILD/apps/ddp_info" 2>/dev/null | awk '$1 == "0" && NF >= 9 { print $NF }')
log_every=$(( STEPS / 3 > 0 ? STEPS / 3 : 1 ))
for np in 1 "$NP"; do
  tools/mpilaunch -n "$np" "$BUILD/apps/gpt_train" "${MODEL[@]}" --steps "$STEPS" --val-every 0 \
    --log-every "$log_every" --warmup 1 >"$OUT/gpt_train_np$np.txt" 2>&1
done
# the model sizes gpt_train used, for the PyTorch run
read -r L H C T B < <(sed -n 's/^# gpt_train: GPT L\([0-9]*\) H\([0-9]*\) C\([0-9]*\) T\([0-9]*\) .*/\1 \2 \3 \4/p;
  s/^# ranks [0-9]*, per-rank batch \([0-9]*\) .*/\1/p' "$OUT/gpt_train_np1.txt" | tr '\n' ' '; echo)
"$PYTHON" bench/peers/torch_gpt.py --bench --np "$NP" --steps "$((STEPS - log_every))" \
  --layers "$L" --heads "$H" --dim "$C" --seq "$T" --batch "$B" -J "$OUT/torch_gpt.json" \
  >"$OUT/torch_gpt.txt" 2>&1
cat "$OUT/torch_gpt.txt"
# gpt_train's steady state: the mean ms/step of the lines after the first interval
ms() { awk 'NR > 0 && $1 ~ /^[0-9]+$/ { n++; if (n > 1) { s += $5; k++ } } END { if (k) printf "%.1f", s / k }' "$1"; }
fpt=$(sed -n 's/^# \([0-9.]*\) MFLOP per token.*/\1/p' "$OUT/gpt_train_np1.txt")
"$PYTHON" - "$OUT" "$NP" "$B" "$T" "$fpt" "${sgemm:-0}" "$(ms "$OUT/gpt_train_np1.txt")" \
  "$(ms "$OUT/gpt_train_np$NP.txt")" <<'EOF'
import json, sys
out, np_, B, T, fpt, sgemm, ms1, msn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
torch = {r["np"]: r for r in json.load(open(f"{out}/torch_gpt.json"))["runs"]}
print(f"# W-GPT: per-rank batch {B} x {T} tokens, {fpt:.1f} MFLOP/token, sgemm {sgemm:.1f} GFLOP/s (ddp_info, 1 thread)")
print(f"# {'np':>3} {'gpt_train ms':>12} {'tokens/s':>9} {'torch ms':>9} {'tokens/s':>9} {'ratio':>6} {'MFU':>6}")
rows = []
for w, ms in ((1, ms1), (np_, msn)):
    tps = B * T * w / (ms / 1e3)
    t = torch[w]
    mfu = tps / w * fpt * 1e6 / (sgemm * 1e9) if sgemm > 0 else 0.0
    print(f"  {w:>3} {ms:>12.1f} {tps:>9.0f} {t['step_ms']:>9.1f} {t['tokens_per_s']:>9.0f} {tps / t['tokens_per_s']:>6.2f} {mfu:>6.2f}")
    rows.append({"np": w, "ms_step": ms, "tokens_per_s": tps, "torch_ms_step": t["step_ms"], "torch_tokens_per_s": t["tokens_per_s"], "mfu": mfu})
print(f"# scaling efficiency at np={np_}: gpt_train {ms1 / msn:.3f}, torch {torch[1]['step_ms'] / torch[np_]['step_ms']:.3f}")
json.dump({"rows": rows, "sgemm_gflops": sgemm, "mflop_per_token": fpt}, open(f"{out}/gpt_compare.json", "w"), indent=1)
EOF
