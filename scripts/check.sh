#!/usr/bin/env bash
# The whole test suite: lint, types, and every test against SQLite and a real PostgreSQL that the tests
# start themselves. With CI=true nothing may skip for lack of a component.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/bootstrap.sh" "dev"
cd "$here"

for bin in initdb pg_ctl postgres; do
  if ! command -v "$bin" >/dev/null 2>&1; then
    msg="PostgreSQL server binary '$bin' not found (Debian: apt-get install postgresql)"
    if [ "${CI:-}" = "true" ]; then echo "FAIL: $msg" >&2; exit 1; fi
    echo "warning: $msg; PostgreSQL tests will be skipped" >&2
  fi
done

echo "== ruff"; ruff check .
echo "== mypy"; mypy
# Two workers (pytest-xdist) by default; a test module's tests all run on one worker (--dist loadfile), so a
# module's servers start once. PMW_TEST_WORKERS=N picks the count; 0 runs every test in this one process.
workers="${PMW_TEST_WORKERS:-2}"
case "$workers" in
  ''|*[!0-9]*) echo "FAIL: PMW_TEST_WORKERS=$workers: expected a number of workers (0: no xdist)" >&2; exit 2 ;;
esac
xdist=()
if [ "$workers" -gt 0 ]; then xdist=(-n "$workers" --dist loadfile); fi
echo "== pytest"
set +e
python -m pytest ${xdist[@]+"${xdist[@]}"} "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "FAIL: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
