#!/usr/bin/env bash
# ci/check-size.sh --strict passes on this tree (no function of apps/ or apps/kit/ over 100
# lines), and on planted files it names a function of 101 lines and no other: not one of 100,
# not a long initializer, not braces inside comments, strings, characters or a macro.
# Usage: check_size.sh SOURCE_DIR [CC]   (CC, if given, must accept the planted file)
set -euo pipefail
src=$1 cc=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check=$src/ci/check-size.sh

echo "1. the tree as it is (strict: a function of apps/ over 100 lines fails)"
bash "$check" --strict

body() { # N lines of a function NAME: two of signature, N-3 statements, closing brace
  local name=$1 n=$2 i
  printf 'static int %s(int a,\n' "$name"
  printf '    int b) { /* { */\n'
  for ((i = 4; i < n; i++)); do printf '  a += b; /* "{" */ (void)'"'"'{'"'"'; (void)"}{";\n'; done
  printf '  return a;\n}\n'
}
{
  printf '#define BRACES(x) \\\n  do { \\\n  } while (0)\n'
  printf 'static const int table[] = {\n'
  for ((i = 0; i < 120; i++)); do printf '  %d,\n' "$i"; done
  printf '};\n'
  body ok_100 100
  body long_101 101
  printf 'int main(void) { return ok_100(1, 2) + long_101(1, 2) + table[0]; }\n'
} >"$tmp/planted.c"
if [ -n "$cc" ]; then "$cc" -fsyntax-only -Wall -Werror "$tmp/planted.c"; fi

echo "2. planted functions of 100 and 101 lines, --strict"
rc=0
out=$(bash "$check" --strict "$tmp/planted.c") || rc=$?
echo "$out"
want="$tmp/planted.c:$((3 + 1 + 120 + 1 + 100 + 1)): long_101 is 101 lines (limit 100)"
if [ "$rc" -ne 1 ] || ! grep -qF -- "$want" <<<"$out" || [ "$(grep -c ' lines (limit' <<<"$out")" -ne 1 ]; then
  echo "check_size: FAIL: expected exit 1 and exactly '$want'"
  exit 1
fi
echo "3. the same without --strict: listed, exit 0"
out=$(bash "$check" "$tmp/planted.c") || { echo "check_size: FAIL: exit $? without --strict"; exit 1; }
grep -qF -- "$want" <<<"$out" || { echo "check_size: FAIL: not listed without --strict"; exit 1; }
echo "check_size: PASS"
