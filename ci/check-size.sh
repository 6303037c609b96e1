#!/usr/bin/env bash
# Lists the functions of the programs and the training kit (apps/*.c, apps/kit/*.c) longer than
# the limit (100 lines, from the first line of the signature to the closing brace): one line
# each, "FILE:LINE: NAME is N lines (limit L)". Braces are counted outside comments, string and
# character literals and preprocessor lines (with their continuations); a top-level brace opens
# a function when the text since the previous declaration has a '(' and no '=' before it (not
# an initializer).
# Warns only (exit 0) unless --strict, then exit 1 on any finding.
# Usage: ci/check-size.sh [--strict] [--limit N] [FILE...]   (default: apps/*.c apps/kit/*.c)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
strict=0 limit=100
while [ $# -gt 0 ]; do
  case $1 in
    --strict) strict=1; shift ;;
    --limit) limit=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "check-size: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  cd "$root"
  set -- apps/*.c apps/kit/*.c
fi

found=$(awk -v limit="$limit" '
  FNR == 1 { depth = 0; incomment = 0; head = ""; headline = 0; cont = 0 }
  {
    line = $0
    if (cont || (!incomment && line ~ /^[ \t]*#/)) { cont = line ~ /\\$/; next }
    # drop comments, then literals, keeping the code between them
    out = ""
    while (length(line)) {
      if (incomment) {
        p = index(line, "*/")
        if (!p) { line = ""; break }
        line = substr(line, p + 2); incomment = 0; continue
      }
      p = index(line, "/*")
      q = index(line, "//")
      if (q && (!p || q < p)) { out = out substr(line, 1, q - 1); line = ""; break }
      if (p) { out = out substr(line, 1, p - 1); line = substr(line, p + 2); incomment = 1; continue }
      out = out line; line = ""
    }
    gsub(/"([^"\\]|\\.)*"/, "\"\"", out)
    gsub(/\047([^\047\\]|\\.)*\047/, "0", out)
    for (i = 1; i <= length(out); i++) {
      c = substr(out, i, 1)
      if (depth == 0) {
        if (c ~ /[^ \t]/ && headline == 0) headline = FNR
        if (c == ";" || c == "}") { head = ""; headline = 0; continue }
        if (c == "{") {
          depth = 1
          p = index(head, "("); e = index(head, "=")
          if (p && !(e && e < p)) {
            name = substr(head, 1, p - 1)
            sub(/[ \t*]+$/, "", name); n = split(name, w, /[ \t*]+/); name = w[n]
            start = headline; fname = name
          } else start = 0
          continue
        }
        head = head c
      } else if (c == "{") depth++
      else if (c == "}" && --depth == 0) {
        if (start && FNR - start + 1 > limit)
          printf "%s:%d: %s is %d lines (limit %d)\n", FILENAME, start, fname, FNR - start + 1, limit
        head = ""; headline = 0; start = 0
      }
    }
    if (depth == 0) head = head " "
  }' "$@")

if [ -z "$found" ]; then
  echo "check-size: no function over $limit lines in $# file(s)"
  exit 0
fi
echo "$found" | sed 's/^/check-size: /'
if [ "$strict" -eq 1 ]; then exit 1; fi
echo "check-size: WARNING only ($(echo "$found" | wc -l) function(s) over $limit lines; --strict fails on them)"
