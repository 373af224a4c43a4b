#!/usr/bin/env bash
# A program answers --help with its options and an example, and exits 0. Usage: check_help.sh PROGRAM
set -euo pipefail
output=$("$1" --help 2>&1)
grep -q "Example" <<<"$output" || { echo "$1 --help gives no example:" >&2; echo "$output" >&2; exit 1; }
grep -qE -- "--[a-z]|-n" <<<"$output" || { echo "$1 --help lists no option" >&2; exit 1; }
