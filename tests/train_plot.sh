#!/usr/bin/env bash
# tools/plot/plot.sh on small fixtures: a ddp_train metrics CSV (two runs) and an
# allreduce_bench JSON (three algorithms) must each give a non-trivial PNG; bad input fails.
#   train_plot.sh SOURCE_DIR SCRATCH
set -uo pipefail
src=$1 dir=$2
command -v gnuplot >/dev/null || { echo "gnuplot not installed: skipping"; exit 77; }
mkdir -p "$dir" && cd "$dir" || exit 1
rm -f ./*.png
fail=0
printf 'epoch,global_step,train_loss,test_acc,samples_per_s,epoch_s,lr\n1,469,0.6,0.846,25000,2.5,0.04\n2,938,0.34,0.879,29000,2.3,0.02\n3,1407,0.27,0.883,29400,2.3,0\n' >a.csv
sed 's/0.6,/0.61,/' a.csv >b.csv
python3 - <<'PY'
import json
recs = []
for algo, s in (("mpi", 1.0), ("ring", 2.0), ("auto", 3.0)):
    for k in range(12):
        b = 8 * 4 ** k
        bw = s * b / (b + 2e5)
        for ip in (False, True):
            recs.append(dict(coll="allreduce", algo=algo, dtype="float", op="sum", bytes=b,
                             count=b // 4, inplace=ip, time_us=1.0, algbw=bw, busbw=bw,
                             wrong=0, np=2))
json.dump(recs, open("bench.json", "w"))
PY
bash "$src/tools/plot/plot.sh" train train.png a.csv=np1 b.csv=np2 || fail=1
bash "$src/tools/plot/plot.sh" bench bench.json busbw.png "fixture" || fail=1
for f in train.png busbw.png; do
  if [ "$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' ')" != "89504e47" ] || [ "$(stat -c %s "$f")" -lt 10000 ]; then
    echo "FAIL: $f missing, not a PNG or nearly empty" >&2
    fail=1
  fi
done
echo '[]' >empty.json
if bash "$src/tools/plot/plot.sh" bench empty.json none.png 2>/dev/null; then
  echo "FAIL: an empty JSON was accepted" >&2
  fail=1
fi
[ $fail -eq 0 ] && echo "train_plot: PASS" || echo "train_plot: FAIL"
exit $fail
