"""CLI latency benchmark: what one ``pmw`` call costs as a client of ``pmw serve`` and embedded.

Run from the repository root::

    .venv/bin/python -m benchmarks.cli_latency [--runs 20]

One run makes a world in a temporary directory (``pmw init --governor GOV``, whose JSON answer holds the
governor's first token), starts ``pmw --as GOV serve --port 0`` on it as a subprocess (it prints one JSON
line with its ``url`` once it listens) and times, ``--runs`` times each, as fresh processes:

1. ``pmw --help``, as a client (``PMW_SERVER`` and ``PMW_TOKEN`` set) and embedded (neither set);
2. a simple read, ``pmw --json agents show GOV``: as a client of the server (token of GOV), then, once the
   server is stopped (SIGTERM by its PID, bounded wait), embedded (``--as GOV``: the command opens the
   world and starts its own PDP, as every embedded call does).

It prints the medians (wall-clock seconds, and the CPU seconds of the child process) side by side with the
ratio embedded/client, and the issue's target (a client's ``--help`` and read <= 0.3 s) as PASS/MISS. Every
run must succeed (exit 0, and the read must answer GOV's row), else the benchmark stops with exit 1. The
figures depend on the machine's load (the 1-minute load average is printed): this is a benchmark, not a
test, and never fails on a missed target.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOVERNOR = "GOV"
TARGET_S = 0.3
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 120.0
# What the benchmark sets itself (anything the caller's environment has for these is dropped).
OWN_ENV = ("PMW_ACTOR", "PMW_SERVER", "PMW_TOKEN", "PMW_DB_URL", "PMW_ARTIFACT_DIR", "PMW_CREDENTIALS",
           "PMW_PDP_ADDRESS", "PMW_PDP_ADMIN_USER", "PMW_PDP_ADMIN_PASSWORD")


class BenchmarkFailed(RuntimeError):
    """A step of the benchmark did not do what it must (a command failed, the server did not start)."""


def pmw_command() -> list[str]:
    """The ``pmw`` console script next to this interpreter (what a user runs), else ``python -m engine.cli``."""
    script = Path(sys.executable).with_name("pmw")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


def base_env(folder: Path) -> dict[str, str]:
    """The environment of every call: the world in ``folder``, nothing of the caller's PMW settings."""
    env = {k: v for k, v in os.environ.items() if k not in OWN_ENV}
    env.update({"PMW_DB_URL": f"sqlite:///{folder / 'world.db'}", "PMW_CREDENTIALS": str(folder / "credentials"),
                "CERBOS_NO_TELEMETRY": "1"})
    return env


@dataclass(frozen=True)
class Timing:
    """The medians of a command's runs: wall-clock and the child's CPU (user + system) seconds."""

    wall_s: float
    cpu_s: float
    runs: int


def run_once(argv: Sequence[str], env: Mapping[str, str]) -> tuple[float, float, str]:
    """Run ``argv`` to completion: wall seconds, child CPU seconds and stdout; a failure is BenchmarkFailed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=dict(env), cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise BenchmarkFailed(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def timed(argv: Sequence[str], env: Mapping[str, str], runs: int,
          check: Callable[[str], bool] | None = None) -> Timing:
    """The medians of ``runs`` runs of ``argv``; ``check(stdout)`` (if given) must hold for each."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        wall, cpu, out = run_once(argv, env)
        if check is not None and not check(out):
            raise BenchmarkFailed(f"{' '.join(argv)} answered {out.strip()[:300]!r}")
        walls.append(wall)
        cpus.append(cpu)
    return Timing(statistics.median(walls), statistics.median(cpus), runs)


def shows_governor(out: str) -> bool:
    """Whether ``out`` is the JSON row of the governor (what ``pmw --json agents show GOV`` answers)."""
    try:
        row = json.loads(out)
    except ValueError:
        return False
    return isinstance(row, dict) and row.get("agent_id") == GOVERNOR


def init_world(env: Mapping[str, str]) -> str:
    """``pmw init --governor GOV`` on the benchmark's world; the governor's token."""
    _, _, out = run_once([*pmw_command(), "--json", "init", "--governor", GOVERNOR, "--name", "Governor",
                          "--term", "bench"], env)
    token = json.loads(out).get("token")
    if not isinstance(token, str) or not token:
        raise BenchmarkFailed(f"pmw init answered no token: {out.strip()[:300]!r}")
    return token


@contextmanager
def served(env: Mapping[str, str]) -> Iterator[str]:
    """``pmw --as GOV serve --port 0`` as a subprocess, for the block: its URL. Stopped with SIGTERM by its
    PID at the end (SIGKILL if it has not exited within STOP_TIMEOUT_S, reported as a failure)."""
    proc = subprocess.Popen([*pmw_command(), "--as", GOVERNOR, "serve", "--port", "0"], env=dict(env), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield _announced_url(proc)
    finally:
        _stop(proc)


def _announced_url(proc: subprocess.Popen[str]) -> str:
    """The URL of the first JSON line the server prints (within START_TIMEOUT_S)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(timeout=min(left, 1.0)):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stdout.readline()
            if not line:
                break
            try:
                info = json.loads(line)
            except ValueError:
                continue
            url = (info.get("url") or info.get("serving")) if isinstance(info, dict) else None
            if isinstance(url, str):
                return url
    stderr = ""
    if proc.poll() is not None and proc.stderr is not None:
        stderr = proc.stderr.read()[-500:]
    raise BenchmarkFailed(f"pmw serve did not announce its URL within {START_TIMEOUT_S:.0f} s: {stderr.strip()}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
            raise BenchmarkFailed(f"pmw serve (pid {proc.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s of "
                                  "SIGTERM (killed)") from None
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def measure(runs: int, folder: Path) -> dict[str, tuple[Timing, Timing]]:
    """The (client, embedded) timings of each command."""
    env = base_env(folder)
    token = init_world(env)
    pmw = pmw_command()
    help_argv = [*pmw, "--help"]
    with served(env) as url:
        client_env = {**env, "PMW_SERVER": url, "PMW_TOKEN": token}
        client_help = timed(help_argv, client_env, runs, lambda out: "Usage: pmw" in out)
        client_read = timed([*pmw, "--json", "agents", "show", GOVERNOR], client_env, runs, shows_governor)
    embedded_help = timed(help_argv, env, runs, lambda out: "Usage: pmw" in out)
    embedded_read = timed([*pmw, "--json", "--as", GOVERNOR, "agents", "show", GOVERNOR], env, runs,
                          shows_governor)
    return {"pmw --help": (client_help, embedded_help),
            f"pmw --json agents show {GOVERNOR}": (client_read, embedded_read)}


def report(results: Mapping[str, tuple[Timing, Timing]], runs: int) -> list[str]:
    """The side-by-side table (medians), the ratios and the target's verdicts."""
    width = max(len(name) for name in results)
    lines = [f"CLI latency: medians of {runs} run(s) each, seconds (wall / child CPU); "
             f"load average {os.getloadavg()[0]:.2f}",
             f"{'command':<{width}}  {'client (pmw serve)':>18}  {'embedded':>15}  {'embedded/client':>15}  "
             f"target <= {TARGET_S} s"]
    for name, (client, embedded) in results.items():
        ratio = embedded.wall_s / client.wall_s if client.wall_s > 0 else float("inf")
        verdict = "PASS" if client.wall_s <= TARGET_S else "MISS"
        lines.append(f"{name:<{width}}  {client.wall_s:>8.3f} / {client.cpu_s:>7.3f}  "
                     f"{embedded.wall_s:>6.3f} / {embedded.cpu_s:>6.3f}  {ratio:>14.1f}x  {verdict} (client)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="runs of each command per mode (default 20)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="pmw-cli-latency-") as tmp:
        try:
            results = measure(args.runs, Path(tmp))
        except (BenchmarkFailed, subprocess.TimeoutExpired) as exc:
            print(f"cli_latency: {exc}", file=sys.stderr)
            return 1
    print("\n".join(report(results, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
