#!/usr/bin/env bash
# The main job on the embedded default: a fresh SQLite world, exercised end to end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/bootstrap.sh" ""
cd "$here"
exec pmw demo "$@"
