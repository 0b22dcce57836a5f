"""The REST security tests can fail: each deliberately broken variant of ``engine/service/rest_api.py`` is
written into a copy of the repository (the working tree is never touched), the test that guards against it
is run on the copy, and it must fail; the unbroken copy must pass. The schemathesis oracles get the same
treatment (a write then a refusal must show as changed rows; a crash as a 5xx).

Not collected by the suite (it copies the tree and runs real servers for about three minutes, and proves the
tests, not the code): run it by name, ``pytest tests/transports/mutants_rest.py``, after changing the REST door
or its tests. A variant whose anchor moved fails loudly ("the code it breaks moved"): update it with the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import REPO

SECURITY = "tests/transports/test_rest_security.py"
FUZZ = "tests/transports/test_rest_schemathesis.py"
PROVE = "            principal = await to_thread.run_sync(service.dispatch.principal, token)\n"
CALL = "            return dispatch.world_call(principal, route.call, arguments)\n"
#: name -> (text of rest_api.py, its replacement, the test file, its -k selection); "" keeps the file as it is
MUTANTS: dict[str, tuple[str, str, str, str]] = {
    "control": ("", "", SECURITY, ""),
    "own_check_off": ("def own_check(route: Route, principal: TokenPrincipal, path: Mapping[str, str]) -> None:\n",
                      "def own_check(route: Route, principal: TokenPrincipal, path: Mapping[str, str]) -> None:\n"
                      "    return\n", SECURITY, "another_agents_id"),
    "no_body_cap": ('raw = await body_of(request) if route.is_command else b""',
                    'raw = await request.body() if route.is_command else b""', SECURITY, "over_the_cap"),
    "no_op_id": ('return {**arguments, **op_id_of(command, headers.get("idempotency-key"))}',
                 "return dict(arguments)", SECURITY, "idempotency"),
    "no_if_match": ('body = apply_headers(command, body, headers.get("if-match"), headers.get("if-none-match"))',
                    "body = dict(body)", SECURITY, "if_match"),
    "principal_cached": (PROVE, "            principal = _SEEN[token] if token in _SEEN else _SEEN.setdefault(token, "
                                "await to_thread.run_sync(service.dispatch.principal, token))\n",
                         SECURITY, "revoked"),
    "no_token_acts_as_alice": (PROVE, "            principal = (await to_thread.run_sync(service.dispatch.principal, "
                                      "token) if token else TokenPrincipal(agent_id='alice', token_id='tok_x', "
                                      "scope='act'))\n", SECURITY, "no_token"),
    "write_then_refuse": (CALL, "            value = dispatch.world_call(principal, route.call, arguments)\n"
                                "            if route.call == 'create_task':\n"
                                "                raise InvalidInput('goal', 'refused after the write')\n"
                                "            return value\n", FUZZ, "POST and /v1/tasks] and not actions"),
    "crash": (CALL, "            if 'limit' in arguments:\n                raise RuntimeError('a bug')\n" + CALL,
              FUZZ, "GET and /v1/tasks]"),
}
IGNORED = (".venv", "node_modules", ".git", "pmw-data", "sim-out", "__pycache__", ".mypy_cache", ".ruff_cache",
           ".pytest_cache", "results")


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_guarding_test_fails_on_a_broken_variant(name: str, tmp_path: Path) -> None:
    old, new, test_file, selection = MUTANTS[name]
    root = tmp_path / "tree"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(*IGNORED))
    (root / "node_modules").symlink_to(REPO / "node_modules")
    target = root / "engine" / "service" / "rest_api.py"
    text = target.read_text()
    if old:
        assert text.count(old) == 1, f"{name}: the code it breaks moved"
        text = text.replace(old, new).replace("PROBLEM_413 = 413\n", "PROBLEM_413 = 413\n_SEEN: dict[Any, Any] = {}\n")
        target.write_text(text)
    command = [sys.executable, "-m", "pytest", test_file, "-q", "-x", "-p", "no:cacheprovider"]
    if selection:
        command += ["-k", selection]
    done = subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=900, check=False)
    summary = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else done.stderr[-500:]
    if name == "control":
        assert done.returncode == 0, summary
    else:
        assert done.returncode == 1 and "failed" in done.stdout, (name, summary)  # failed, not crashed
