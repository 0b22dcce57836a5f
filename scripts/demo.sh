#!/usr/bin/env bash
# The main job on the embedded default (SQLite, and a Cerbos PDP the runtime starts itself): the flagship
# adaptive-topology simulation, through the real store, PDP, controller and workers. It writes its report
# to sim-out/flagship/ (report.html, report.md, metrics.json, events.jsonl, plots) and exits non-zero if
# the scenario's expectations are not met. Extra arguments go to `pmw simulate` (e.g. --db URL, --seed N).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/bootstrap.sh" ""
cd "$here"
exec pmw simulate simulations/scenarios/flagship.yaml --out sim-out/flagship "$@"
