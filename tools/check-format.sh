#!/usr/bin/env bash
# Fails when a C++ or CUDA file of the repository is not formatted by .clang-format; lists them.
#   tools/check-format.sh            check (ctest runs it as check_format)
#   tools/check-format.sh --fix      format them in place
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check-format: $CLANG_FORMAT not found (Debian package clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' '*.cpp' 2>/dev/null ||
                     find include src python tests benchmarks examples \
                       \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -print)
if [ "${1:-}" = --fix ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
# One clang-format process for every file (one per file takes seconds on 2 cores); its messages
# name each file it would change ("FILE:LINE:COL: error: code should be clang-formatted").
status=0
messages="$("$CLANG_FORMAT" --dry-run -Werror "${files[@]}" 2>&1)" || status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*/\1/p' <<<"$messages" | sort -u)
if [ $status -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "check-format: $CLANG_FORMAT failed (status $status):" >&2
  printf '%s\n' "$messages" | head -20 >&2
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not clang-format clean" \
       "($("$CLANG_FORMAT" --version | head -1)); tools/check-format.sh --fix formats them:"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files clean"
