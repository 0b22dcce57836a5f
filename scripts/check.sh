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
echo "== pytest"
set +e
python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "FAIL: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
