#!/usr/bin/env bash
# ddp_train --device cuda with the MLP's arithmetic on a real GPU (cuBLAS + CUDA kernels),
# compared with the host run (tests/train_gpu.cmake, label gpu):
#   train_gpu.sh LAUNCH DDP_TRAIN SCRATCH [gpu|emulate]     (LAUNCH: tools/mpilaunch)
# - f32, np=2, two buckets: every step's loss within 1e-3 relative of the host run's, the test
#   accuracy within 1 point;
# - --amp bf16 and --amp fp16 (dynamic loss scaling) against the host's CPU emulation of the
#   same precision: per-step loss within 2e-2 relative; fp16 from a loss scale of 1e12 (inf
#   gradients, skipped steps, backoff): the same number of skipped steps and final scale;
# - interrupted at step 10 with a checkpoint and resumed: the remaining steps' losses within
#   1e-5 of the uninterrupted GPU run (parameters and momentum go device -> file -> device).
# Fashion-MNIST from $TRAIN_GPU_DATA (default Debian's /usr/share/datasets/fashion-mnist; a GPU
# machine without the package needs the four .gz files copied there); none: exit 77.
# In emulate mode every comparison must be exact (the stand-in does the host's arithmetic).
# gpu (default): a real CUDA device; exits 77 with the reason where none is present (or the
# build has no CUDA). emulate: DDP_TRAIN is ddp_train_gpuemu (the GPU path with a host
# stand-in of train_gpu.cu) on the emulated device: the same checks, for the wiring.
set -uo pipefail
train=$2 scratch=$3 mode=${4:-gpu}
launch=("$(realpath "$1")") # the script changes folder
mkdir -p "$scratch"
cd "$scratch" || exit 1
if [ "$mode" = emulate ]; then
  export DDP_DEVICE_EMULATE=1
  devpat="buckets on emulated"
  launch+=(-e DDP_DEVICE_EMULATE)
else
  unset DDP_DEVICE_EMULATE
  devpat="buckets on cuda"
fi
# skip REASON: exit 77, or 1 where DDP_REQUIRE_GPU=1 demands the GPU run (ci/gpu-check.sh).
skip() {
  if [ "${DDP_REQUIRE_GPU:-0}" = 1 ]; then echo "train_gpu: FAIL (DDP_REQUIRE_GPU=1): $*" >&2; exit 1; fi
  echo "train_gpu: SKIP: $*"
  exit 77
}
data=${TRAIN_GPU_DATA:-/usr/share/datasets/fashion-mnist}
if ! ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1; then
  skip "no Fashion-MNIST in $data (set TRAIN_GPU_DATA to a folder with the IDX files)"
fi
fail=0
say() { echo "train_gpu: $*"; }
bad() { echo "train_gpu: FAIL: $*" >&2; fail=1; }
steps=30
common=(--data "$data" --epochs 1 --batch 64 --limit-steps $steps --limit-test 1000 --bucket-cap-mb 0.5 --no-progress)

# ---- probe: is there a real CUDA device, and does ddp_train use it for the arithmetic? ----
"${launch[@]}" -n 1 "$train" --data "$data" --device cuda --epochs 1 --limit-steps 1 --limit-test 64 \
  --no-progress >probe.out 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  if [ "$mode" = gpu ] && grep -q "no device" probe.out; then
    skip "no CUDA device: $(grep -m1 'no device' probe.out)"
  fi
  cat probe.out
  bad "probe run exited with $rc"
  exit 1
fi
if ! grep -q "$devpat" probe.out; then
  [ "$mode" = gpu ] || { bad "expected '$devpat': $(grep -m1 'grad sync' probe.out)"; exit 1; }
  skip "the device is not a real CUDA device: $(grep -m1 'grad sync' probe.out)"
fi
grep -q "model arithmetic: GPU" probe.out ||
  { bad "a CUDA device but the arithmetic stayed on the host: $(grep -m1 'model arithmetic' probe.out)"; exit 1; }
say "$(grep -m1 'buckets on' probe.out | sed 's/.*buckets on/buckets on/')"

# compare A B TOL: per-step losses (column 2 of --log-steps) within TOL relative.
compare() {
  local a=$1 b=$2 tol=$3
  [ "$(wc -l <"$a")" -eq "$(wc -l <"$b")" ] && [ "$(wc -l <"$a")" -gt 0 ] ||
    { bad "$a has $(wc -l <"$a") steps, $b $(wc -l <"$b")"; return; }
  awk -v tol="$tol" 'NR == FNR { ref[$1] = $2; next }
    { d = $2 - ref[$1]; if (d < 0) d = -d; r = d / (ref[$1] < 0 ? -ref[$1] : ref[$1]);
      if (!(r <= tol)) { bad++; if (bad <= 3) printf "  step %d: %.9g vs %.9g (rel %.2e)\n", $1, ref[$1], $2, r }
      if (r > m) m = r }
    END { printf "  max relative difference %.2e (tolerance %g)\n", m, tol; exit bad > 0 }' "$a" "$b" ||
    bad "$b differs from $a by more than $tol relative"
}
acc() { awk '/^final: test accuracy/ { sub("%", "", $4); print $4 }' "$1"; }

for amp in none bf16 fp16 fp16big; do
  tol=1e-3
  [ $amp = none ] || tol=2e-2
  [ "$mode" = emulate ] && tol=0
  flags=(--amp $amp)
  [ $amp = fp16big ] && flags=(--amp fp16 --loss-scale 1e12)
  rm -f host_$amp.log gpu_$amp.log
  "${launch[@]}" -n 2 "$train" "${common[@]}" "${flags[@]}" --log-steps host_$amp.log \
    >host_$amp.out 2>&1 || bad "host run (amp $amp): $? $(tail -3 host_$amp.out)"
  "${launch[@]}" -n 2 "$train" "${common[@]}" "${flags[@]}" --device cuda --log-steps gpu_$amp.log \
    >gpu_$amp.out 2>&1 || bad "GPU run (amp $amp): $? $(tail -3 gpu_$amp.out)"
  grep -q "model arithmetic: GPU" gpu_$amp.out || bad "amp $amp: arithmetic not on the GPU"
  say "amp $amp: host $(acc host_$amp.out)% vs GPU $(acc gpu_$amp.out)% test accuracy; $(grep -m1 'model arithmetic' gpu_$amp.out)"
  if [ $amp = fp16big ]; then
    hs=$(grep "^# amp fp16:" host_$amp.out) gs=$(grep "^# amp fp16:" gpu_$amp.out)
    say "  host: ${hs#\# }; GPU: ${gs#\# }"
    [ -n "$hs" ] && [ "$hs" = "$gs" ] || bad "fp16 from scale 1e12: host '$hs' vs GPU '$gs'"
    case "$hs" in "# amp fp16: 0 step"*) bad "fp16 from scale 1e12 skipped no step";; esac
  fi
  compare host_$amp.log gpu_$amp.log $tol
  if [ $amp = none ]; then
    awk -v a="$(acc host_$amp.out)" -v b="$(acc gpu_$amp.out)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1.0) }' ||
      bad "test accuracy host $(acc host_$amp.out)% vs GPU $(acc gpu_$amp.out)% differ by more than 1 point"
  fi
done

# ---- checkpoint and resume on the GPU ----
rm -f part.log resumed.log ck.bin
"${launch[@]}" -n 2 "$train" "${common[@]}" --device cuda --checkpoint ck.bin --checkpoint-every 10 \
  --stop-after 12 --log-steps part.log >part.out 2>&1 || bad "interrupted GPU run: $?"
"${launch[@]}" -n 2 "$train" "${common[@]}" --device cuda --resume ck.bin --log-steps resumed.log \
  >resumed.out 2>&1 || bad "resumed GPU run: $? $(tail -3 resumed.out)"
awk '$1 > 10' gpu_none.log >gpu_after10.log
say "resume from step 10:"
compare gpu_after10.log resumed.log "$([ "$mode" = emulate ] && echo 0 || echo 1e-5)"

[ $fail -eq 0 ] && say "PASS"
exit $fail
