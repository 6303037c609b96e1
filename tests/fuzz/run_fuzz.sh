#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: new inputs go to a scratch corpus in the build
# tree, the committed seeds (tests/fuzz/corpus/<name>) are read only. Any crash, leak, timeout
# or out-of-memory ends libFuzzer with a non-zero status, which fails the ctest test.
#   run_fuzz.sh <exe> <seconds> <seed corpus dir> <scratch dir>
set -u
exe=$1 secs=$2 seeds=$3 work=$4
mkdir -p "$work"
cd "$work" || exit 2 # crash-* / leak-* reproducers land here
"$exe" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -detect_leaks=1 "$work" "$seeds"
rc=$?
if [ $rc -ne 0 ]; then
  echo "run_fuzz.sh: $(basename "$exe") failed with status $rc; reproducers in $work:"
  ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true
fi
exit $rc
