"""Small child-process programs for the multi-process tests, and the helpers both sides use.

Children are started as ``sys.executable -m tests.procs.<name> ...`` from the repository root. They
report through files (one JSON object per line, each line written with a single ``os.write`` on an
``O_APPEND`` descriptor, so a SIGKILL never leaves a torn line behind a complete one) and through their
exit code. The parent side starts them with :func:`spawn`, waits with a deadline and, in a ``finally``,
kills every child still running by its own PID (:func:`stop_all`).

Only the standard library is imported here: every child imports this package before anything else.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# Children cache their bytecode outside the repository (the environment may set
# PYTHONDONTWRITEBYTECODE): compiling engine/ and store/ from source in each of 20 children costs
# more than the test itself on a small machine. Stale entries are invalidated by source mtime.
PYCACHE_DIR = Path(tempfile.gettempdir()) / f"pmw-test-pycache-{os.getuid()}"
_warmed = False

# -- child side ------------------------------------------------------------------------------------


def emit(path: str | Path, **record: Any) -> None:
    """Append one JSON line to ``path`` with one ``write`` call."""
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)


def wait_for_start(start_path: str | Path, timeout: float = 120.0) -> None:
    """The barrier: spin (bounded) until the parent creates ``start_path``."""
    deadline = time.monotonic() + timeout
    path = Path(start_path)
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no start signal at {path} within {timeout}s")
        time.sleep(0.0005)


# -- parent side -----------------------------------------------------------------------------------


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text() if self.stdout_path.exists() else ""

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def describe(self) -> str:
        return (f"child {self.name} (pid {self.pid}) exited {self.proc.returncode}\n"
                f"--- stdout ---\n{self.stdout()[-4000:]}\n--- stderr ---\n{self.stderr()[-4000:]}")


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMW_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE_DIR)
    return env


def warm_up(timeout: float = 120.0) -> None:
    """Once per test process: import what the children import, so their bytecode is cached before
    many of them start at once."""
    global _warmed
    if _warmed:
        return
    imports = "import engine.world, engine.world.book, engine.errors, engine.policy.enforcement, tests.procs"
    done = subprocess.run([sys.executable, "-c", imports], cwd=REPO_ROOT, env=_child_env(),
                          capture_output=True, text=True, check=False, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"a child cannot import the engine:\n{done.stderr[-4000:]}")
    _warmed = True


def spawn(module: str, *args: str, name: str, workdir: Path) -> Child:
    """Start ``python -m tests.procs.<module> args...``; stdout and stderr go to files in ``workdir``."""
    warm_up()
    out = workdir / f"{name}.out"
    err = workdir / f"{name}.err"
    env = _child_env()
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen([sys.executable, "-m", f"tests.procs.{module}", *args], cwd=REPO_ROOT,
                                stdin=subprocess.DEVNULL, stdout=fout, stderr=ferr, env=env)
    return Child(name, proc, out, err)


def wait_all(children: list[Child], timeout: float) -> None:
    """Wait for every child to exit within one overall deadline; raise TimeoutError otherwise
    (the caller's ``finally`` kills what is left)."""
    deadline = time.monotonic() + timeout
    for child in children:
        remaining = deadline - time.monotonic()
        try:
            child.proc.wait(timeout=max(remaining, 0.01))
        except subprocess.TimeoutExpired:
            running = [c.name for c in children if c.proc.poll() is None]
            raise TimeoutError(f"children still running after {timeout}s: {running}") from None


def kill(child: Child) -> None:
    """SIGKILL one child by its own PID (if still running) and reap it."""
    if child.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
    child.proc.wait(timeout=30)  # SIGKILL cannot be ignored; a hang here is a real failure


def stop_all(children: list[Child]) -> None:
    for child in children:
        kill(child)


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.002) -> None:
    """Poll ``predicate()`` until it is true; bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of ``path`` (a trailing partial line is ignored)."""
    if not path.exists():
        return []
    text = path.read_text()
    complete = text if text.endswith("\n") else text.rsplit("\n", 1)[0] if "\n" in text else ""
    return [json.loads(line) for line in complete.splitlines() if line.strip()]
