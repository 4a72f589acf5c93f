#!/usr/bin/env bash
# The C lines a branch changes follow .clang-format: git clang-format
# formats only the lines changed since BASE (default: where HEAD left main,
# uncommitted changes included) and this fails when it would change any.
# The tree as a whole is not held to it (reformatting it would collide with
# every branch under way). Skips (77) without git-clang-format, a git
# checkout or a main to compare with.
# Usage: scripts/check_format.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v git-clang-format >/dev/null || ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "SKIP: git-clang-format or a git checkout missing"
  exit 77
fi
base=${1:-$(git merge-base HEAD main 2>/dev/null || true)}
if [ -z "$base" ]; then
  echo "SKIP: no main to compare with"
  exit 77
fi
out=$(git clang-format --diff --extensions c,h "$base" -- 2>&1 || true)
case $out in
  "" | *"no modified files to format"* | *"did not modify any files"*)
    echo "ok: the C lines changed since $(git rev-parse --short "$base") follow .clang-format"
    exit 0 ;;
esac
printf '%s\n' "$out"
echo "FAIL: the lines above do not follow .clang-format (git clang-format $base fixes them)"
exit 1
