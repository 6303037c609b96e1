#!/usr/bin/env bash
# End-to-end checks of gpt_train, run by ctest (tests/gpt.cmake).
#   gpt_check.sh MODE NP LAUNCH GPT_TRAIN PYTHON TORCH_GPT SCRATCH
# MODE: torch   gpt_train at NP ranks (NP 2: with --accum 2) against PyTorch
#               (bench/peers/torch_gpt.py --check): the first 20 steps' losses within 1e-4
#               relative, step 1's averaged gradients within 1e-5 per tensor (max |diff| /
#               max |torch|), same initial weights (--dump-init) and the same batches
#       determ  --deterministic 4 at np 1, 2 and 4 (global batch 8): the same per-step losses
#               and the same CRC of the final parameters; the np 2 run stopped after step 4
#               (--stop-after, a checkpoint there) and resumed (--resume auto)
#       variants at NP ranks, --recompute and --zero 1 / 2 against the plain run: the same
#               per-step losses and final parameters, bit for bit (recomputing a block repeats
#               the same arithmetic; a shard's reduce-scatter sums what the allreduce sums)
#       resume  at NP ranks on a small corpus (35 steps an epoch): a run stopped after step 40
#               (--stop-after, checkpoints every 8) and resumed, and a --zero 1 run stopped by
#               SIGUSR1 to one rank (the ranks agree on a step, checkpoint, exit 75) and resumed,
#               against the uninterrupted run: the same per-step losses and final CRC
# Small sizes: 2 layers, 4 heads, 64 dims, 96 tokens (two attention tiles of gpt.c: 64 + 32).
# A missing PyTorch is a failure unless MPIDDP_SKIP_TORCH=1 (then 77); the corpus is Debian's
# `fortunes` (ci/setup.sh installs it).
set -uo pipefail
mode=$1 np=$2 train=$4 py=$5 torch_gpt=$6 scratch=$7
launch=("$(realpath "$3")")
mkdir -p "$scratch"
cd "$scratch" || exit 1
say() { echo "gpt_check[$mode]: $*"; }
fail=0
bad() { echo "gpt_check[$mode]: FAIL: $*" >&2; fail=1; }
corpus=/usr/share/games/fortunes
if [ ! -d "$corpus" ]; then
  bad "$corpus is missing: install Debian's package fortunes (ci/setup.sh does)"
  exit 1
fi
model=(--layers 2 --heads 4 --dim 64 --seq 96 --lr 1e-3 --warmup 5 --val-every 0 --log-every 10)

case $mode in
torch)
  if ! "$py" -c "import torch" 2>/dev/null; then
    if [ "${MPIDDP_SKIP_TORCH:-0}" = 1 ]; then
      say "SKIP: $py cannot import torch and MPIDDP_SKIP_TORCH=1"
      exit 77
    fi
    bad "$py cannot import torch: install python3-torch (ci/setup.sh does) or set MPIDDP_SKIP_TORCH=1"
    exit 1
  fi
  accum=$((np > 1 ? 2 : 1))
  rm -f "init$np.bin" "grads$np.bin" "steps$np.log"
  "${launch[@]}" -n "$np" "$train" "${model[@]}" --batch 4 --accum $accum --steps 20 \
    --dump-init "init$np.bin" --dump-grads "grads$np.bin" --log-steps "steps$np.log" \
    >"train$np.out" 2>&1 || bad "gpt_train np=$np exited with $?: $(tail -3 "train$np.out")"
  [ "$(wc -l <"steps$np.log" 2>/dev/null)" = 20 ] || bad "np=$np: 20 step lines expected in steps$np.log"
  "$py" "$torch_gpt" --check --init "init$np.bin" --grads "grads$np.bin" --log "steps$np.log" \
    --np "$np" --batch 4 --accum $accum --steps 20 --total-steps 20 --lr 1e-3 --warmup 5 \
    >"torch$np.out" 2>&1
  rc=$?
  cat "torch$np.out"
  [ $rc = 0 ] || bad "np=$np: PyTorch disagrees (torch_gpt.py exited $rc)"
  ;;
determ)
  rm -rf ckd
  for n in 1 2 4; do
    rm -f "det$n.log"
    ck=()
    [ $n = 2 ] && ck=(--checkpoint-dir ckd --checkpoint-every 4) &&
      { "${launch[@]}" -n $n "$train" "${model[@]}" --batch 4 --steps 8 --deterministic 4 "${ck[@]}" \
          --stop-after 4 --log-steps det2.log >det2a.out 2>&1 || bad "np=2 --stop-after 4 exited with $?"; } &&
      ck+=(--resume auto)
    "${launch[@]}" -n $n "$train" "${model[@]}" --batch $((8 / n)) --steps 8 --deterministic 4 \
      "${ck[@]}" --log-steps "det$n.log" >"det$n.out" 2>&1 || bad "np=$n exited with $?: $(tail -3 "det$n.out")"
    grep -q "deterministic, 4 lanes ($((4 / n)) per rank)" "det$n.out" || bad "np=$n: mode line missing"
  done
  grep -q "^# resumed from ckd/ckpt-000000000004.ddp at step 4" det2.out || bad "np=2 did not resume from step 4"
  for n in 2 4; do
    cmp -s det1.log "det$n.log" || bad "np=$n step losses differ from np=1: $(diff det1.log "det$n.log" | head -3)"
    a=$(grep 'final parameters' det1.out) b=$(grep 'final parameters' "det$n.out")
    [ -n "$a" ] && [ "$a" = "$b" ] || bad "np=$n final parameters differ: '$a' vs '$b'"
  done
  [ $fail = 0 ] && say "np=1,2,4 identical: $(grep 'final parameters' det1.out)"
  ;;
variants)
  run() { # name, options...
    local name=$1
    shift
    rm -f "$name.log"
    "${launch[@]}" -n "$np" "$train" "${model[@]}" --batch 4 --steps 6 --log-steps "$name.log" "$@" \
      >"$name.out" 2>&1 || bad "$name exited with $?: $(tail -3 "$name.out")"
  }
  run plain
  run recompute --recompute
  grep -q "with --recompute" recompute.out || bad "recompute: header line missing"
  for z in 1 2; do run "zero$z" --zero "$z"; done
  for v in recompute zero1 zero2; do
    cmp -s plain.log "$v.log" || bad "$v step losses differ from the plain run: $(diff plain.log "$v.log" | head -3)"
    a=$(grep 'final parameters' plain.out) b=$(grep 'final parameters' "$v.out")
    [ -n "$a" ] && [ "$a" = "$b" ] || bad "$v final parameters differ: '$a' vs '$b'"
  done
  [ $fail = 0 ] && say "np=$np plain, --recompute, --zero 1, --zero 2 identical: $(grep 'final parameters' plain.out)"
  ;;
resume)
  # 10 chunks of the split (gpt_data.h): 287 training windows of 512 + 1, 35 steps an epoch
  find "$corpus" -maxdepth 1 -type f ! -name '*.*' | sort | xargs cat 2>/dev/null | head -c 163840 >small.txt
  tiny=(--data small.txt --layers 1 --heads 2 --dim 32 --seq 512 --batch 4 --steps 48 --warmup 4
    --val-every 0 --log-every 8)
  export GPT_CHECK_TAG="gpt_check.$$.$RANDOM" # every rank carries it: how one is found
  rank_pid() {
    local e p
    for e in /proc/[0-9]*/environ; do
      p=${e#/proc/} && p=${p%/environ}
      [ "/proc/$p/exe" -ef "$train" ] 2>/dev/null && grep -qzxF "GPT_CHECK_TAG=$GPT_CHECK_TAG" "$e" 2>/dev/null &&
        echo "$p" && return
    done
  }
  run() { # name, options...: the rank-count run of gpt_train writing name.out; its status in st
    local name=$1
    shift
    "${launch[@]}" -n "$np" "$train" "${tiny[@]}" "$@" >"$name.out" 2>&1
    st=$?
  }
  crc() { grep 'final parameters' "$1.out"; }
  rm -rf ck ckz ./*.log
  run ref --log-steps ref.log
  [ $st = 0 ] || bad "uninterrupted run exited $st: $(tail -3 ref.out)"
  # 1. --stop-after 40 (in the second epoch), the newest checkpoint that of step 40; resumed.
  run stop --log-steps run.log --checkpoint-dir ck --checkpoint-every 8 --stop-after 40
  [ $st = 0 ] || bad "--stop-after run exited $st"
  run resumed --log-steps run.log --checkpoint-dir ck --checkpoint-every 8 --resume auto
  grep -q "^# resumed from ck/ckpt-000000000040.ddp at step 40 (epoch 2, micro-batch 5)" resumed.out ||
    bad "no resume from step 40: $(grep -m1 -E 'resumed|gpt_train:' resumed.out)"
  # 2. --zero 1, SIGUSR1 to one rank while it is stopped (so the run cannot end first).
  "${launch[@]}" -n "$np" "$train" "${tiny[@]}" --zero 1 --checkpoint-dir ckz --log-steps z.log >z1.out 2>&1 &
  pid=$! p=""
  for _ in $(seq 1 3000); do
    kill -0 $pid 2>/dev/null || break
    [ -n "$p" ] || p=$(rank_pid)
    [ -n "$p" ] && [ -s z.log ] && kill -STOP "$p" && kill -USR1 "$p" && kill -CONT "$p" && break
    sleep 0.01
  done
  wait $pid
  st=$?
  [ $st = 75 ] || bad "SIGUSR1 to rank pid ${p:-?}: exit $st, expected 75: $(tail -2 z1.out)"
  k=$(sed -n 's/^# stopped on SIGUSR1 after global step \([0-9]*\): checkpoint written.*/\1/p' z1.out)
  [ -n "$k" ] && [ "$(cat ckz/LATEST)" = "$(printf 'ckpt-%012d.ddp' "$k")" ] || bad "no checkpoint of the stopping step"
  say "--zero 1: $(grep '^# stopped' z1.out)"
  run zresumed --zero 1 --checkpoint-dir ckz --log-steps z.log --resume auto
  [ $st = 0 ] || bad "--zero 1 resume exited $st: $(tail -3 zresumed.out)"
  for v in run z; do
    cmp -s ref.log "$v.log" || bad "$v: step losses differ from the uninterrupted run: $(diff ref.log "$v.log" | head -3)"
  done
  for v in resumed zresumed; do
    [ -n "$(crc ref)" ] && [ "$(crc ref)" = "$(crc $v)" ] || bad "$v final parameters differ: '$(crc $v)' vs '$(crc ref)'"
  done
  [ $fail = 0 ] && say "uninterrupted, stopped at 40 + resumed, --zero 1 stopped at $k by SIGUSR1 + resumed: $(crc ref)"
  ;;
*)
  bad "unknown mode $mode"
  ;;
esac
exit $fail
