"""Which rule of which policy file decided: Cerbos's own evaluation trace of one request.

The PDP's answer names the policy that decided (``resource.task.vdefault``) but not the rule. The rule comes
from ``cerbos compile --verbose``, which prints the engine's evaluation trace (every derived role, variable,
rule and condition with its result) for each *failing* test case. So :func:`trace_decision` copies the
policy set (its policies and schemas; its own suites left out) into a temporary directory, adds a generated
one-case suite with the exact principal and resource, and expects an output no rule ever emits, so that the
case fails whatever the effect and the trace is printed. The trace is read from the JSON test report:

- a rule *matched* when it was not skipped and its top-level condition (a rule without one shows an empty
  condition) evaluated true;
- the effect is the engine's final effect for the action; the deciding rules are the matched rules whose
  effect (from the policy file) is that effect. A DENY with no matching DENY rule is the default deny: no
  rule allowed it (``rules`` is empty).

The trace is evaluated by the same engine the PDP runs, but callers that also asked a PDP compare the two
effects (and epochs) and refuse to show a trace that disagrees (:func:`check_agreement`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from engine.errors import PolicyRejected, PolicyUnavailable, YamlRefused
from engine.models.common import Model
from engine.policy.model import PrincipalRef, ResourceRef
from engine.policy.pdp_process import cerbos_binary
from engine.yaml_input import load_yaml_data

Effect = Literal["ALLOW", "DENY"]
SUITE = "PmwExplain"
_NEVER = {"src": "pmw-explain#never", "val": "never"}  # an output no rule emits: the case always fails
_POLICY_SUFFIXES = (".yaml", ".yml", ".json")


class TraceStep(Model):
    """One line of the engine's trace: what was evaluated (``path``) and what came of it."""

    path: str = Field(description="e.g. 'resource.task.vdefault > action=claim > rule=claim > condition'")
    status: str = Field(description="activated | skipped")
    result: str = Field(description="the value, the effect, or why it was skipped")


class RuleTrace(Model):
    """The trace of one (principal, resource, action) under one policy set."""

    effect: Effect
    policy: str | None = Field(description="the policy that decided, e.g. resource.task.vdefault")
    policy_file: str | None = Field(description="its file, relative to the policy directory")
    rules: list[str] = Field(description="the matched rules whose effect is the decision's (empty: default deny)")
    matched_rules: list[str] = Field(description="every rule that matched, whatever its effect")
    derived_roles: list[str]
    epoch: str | None = Field(description="the epoch marker's output under this set")
    steps: list[TraceStep]


def policy_files(policy_dir: Path) -> dict[str, str]:
    """The policies of ``policy_dir`` by name as Cerbos names them (``resource.task.vdefault``,
    ``derived_roles.pmw_roles``, ``principal.alice.vdefault``; a scope as ``/scope``) -> relative file path.
    Test suites, test data and schemas are not policies; a file that is not YAML is skipped."""
    out: dict[str, str] = {}
    for path in sorted(p for p in policy_dir.rglob("*") if p.is_file() and p.suffix in _POLICY_SUFFIXES):
        rel = path.relative_to(policy_dir)
        if rel.parts[0] == "_schemas" or "testdata" in rel.parts or path.stem.endswith("_test"):
            continue
        try:
            doc = load_yaml_data(path)
        except (YamlRefused, OSError):
            continue
        name = _policy_name(doc)
        if name is not None:
            out[name] = rel.as_posix()
    return out


def _policy_name(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    for key, prefix, subject in (("resourcePolicy", "resource", "resource"),
                                 ("principalPolicy", "principal", "principal")):
        body = doc.get(key)
        if isinstance(body, dict):
            scope = body.get("scope")
            name = f"{prefix}.{body.get(subject)}.v{body.get('version', 'default')}"
            return f"{name}/{scope}" if scope else name
    roles = doc.get("derivedRoles")
    if isinstance(roles, dict):
        return f"derived_roles.{roles.get('name')}"
    return None


def rule_effects(policy_file: Path) -> dict[str, Effect]:
    """The named rules of a resource or principal policy file -> their effect."""
    doc = load_yaml_data(policy_file)
    body = (doc.get("resourcePolicy") or doc.get("principalPolicy") or {}) if isinstance(doc, dict) else {}
    effects: dict[str, Effect] = {}
    rules = body.get("rules") if isinstance(body, dict) else None
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        for sub in rule.get("actions", []) if "resource" in rule else [rule]:  # principal rules nest actions
            if isinstance(sub, dict) and isinstance(sub.get("name"), str):
                effects[sub["name"]] = "ALLOW" if sub.get("effect") == "EFFECT_ALLOW" else "DENY"
    return effects


def _suite(principal: PrincipalRef, resource: ResourceRef, action: str) -> dict[str, Any]:
    return {
        "name": SUITE,
        "principals": {"p": {"id": principal.id, "roles": list(principal.roles), "attr": principal.attr}},
        "resources": {"r": {"kind": resource.kind, "id": resource.id, "attr": resource.attr}},
        "tests": [{"name": "explain", "input": {"principals": ["p"], "resources": ["r"], "actions": [action]},
                   "expected": [{"principal": "p", "resource": "r", "actions": {action: "EFFECT_DENY"},
                                 "outputs": [{"action": action, "expected": [_NEVER]}]}]}],
    }


def _ignore_tests(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "testdata" or n.endswith(("_test.yaml", "_test.yml", "_test.json"))}


def trace_decision(policy_dir: Path, principal: PrincipalRef, resource: ResourceRef, action: str, *,
                   timeout: float = 60) -> RuleTrace:
    """The evaluation trace of ``principal`` asking ``action`` on ``resource`` under ``policy_dir``.
    A set that does not compile is ``PolicyRejected`` (with the compiler's file:line output); a report
    that cannot be read is ``PolicyUnavailable``."""
    with tempfile.TemporaryDirectory(prefix="pmw-explain-") as tmp:
        copy = Path(tmp) / "policies"
        shutil.copytree(policy_dir, copy, ignore=_ignore_tests)
        (copy / "pmw_explain").mkdir()
        (copy / "pmw_explain" / "explain_test.yaml").write_text(json.dumps(_suite(principal, resource, action)))
        try:
            done = subprocess.run(
                [str(cerbos_binary()), "compile", "--verbose", "--no-color", "-o", "json", str(copy)],
                capture_output=True, text=True, timeout=timeout, check=False,
                env={**os.environ, "CERBOS_NO_TELEMETRY": "1"})
        except subprocess.TimeoutExpired as exc:
            raise PolicyUnavailable(f"cerbos compile did not finish within {exc.timeout} s") from exc
    if done.returncode == 3:
        raise PolicyRejected(str(policy_dir), (done.stdout + done.stderr).strip())
    details = _case_details(done.stdout, action)
    return _read_trace(details, action, policy_dir)


def _case_details(report_text: str, action: str) -> dict[str, Any]:
    try:
        report = json.loads(report_text)
        suite = next(s for s in report["suites"] if s["name"] == SUITE)
        acts = suite["testCases"][0]["principals"][0]["resources"][0]["actions"]
        details: dict[str, Any] = next(a for a in acts if a["name"] == action)["details"]
    except (ValueError, KeyError, IndexError, StopIteration, TypeError) as exc:
        raise PolicyUnavailable(f"cerbos compile gave no readable trace: {report_text[:500]!r}") from exc
    if "engineTraceBatch" not in details or "failure" not in details:
        raise PolicyUnavailable(f"cerbos compile printed no trace for the case: {details}")
    return details


def _components(batch: Mapping[str, Any]) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
    defs = batch.get("definitions", [])
    for entry in batch.get("entries", []):
        yield [defs[i] for i in entry.get("componentIndices", [])], entry.get("event", {})


def _label(component: Mapping[str, Any]) -> str:
    kind = str(component.get("kind", "")).removeprefix("KIND_").lower()
    for key in ("policy", "derivedRole", "action", "rule", "output", "expr"):
        if key in component:
            value = component[key]
            return f"{key}={value}" if key != "expr" else f"`{value}`"
    if "variable" in component:
        return f"variable={component['variable'].get('name')}"
    if "scope" in component:
        return f"scope={component['scope']!r}"
    if "index" in component:
        return f"{kind}#{component['index']}"
    return kind


def _read_trace(details: Mapping[str, Any], action: str, policy_dir: Path) -> RuleTrace:
    actual = details["failure"].get("actual")
    if actual not in ("EFFECT_ALLOW", "EFFECT_DENY"):
        raise PolicyUnavailable(f"cerbos compile reports no effect for {action!r}: {details['failure']}")
    effect: Effect = "ALLOW" if actual == "EFFECT_ALLOW" else "DENY"
    steps: list[TraceStep] = []
    policy: str | None = None
    skipped: set[str] = set()
    conditions: dict[str, tuple[int, bool]] = {}  # rule -> (depth of its top-level condition, result)
    role_conditions: dict[str, tuple[int, bool]] = {}
    roles_skipped: set[str] = set()
    epoch: str | None = None
    seen: set[tuple[str, str, str]] = set()
    for comps, event in _components(details["engineTraceBatch"]):
        names = [c.get("policy", "").removeprefix("cerbos.") if "policy" in c else _label(c) for c in comps]
        status = str(event.get("status", "")).removeprefix("STATUS_").lower()
        result = str(event.get("effect") or event.get("message") or json.dumps(event.get("result")))
        line = " > ".join(names)
        if (line, status, result) not in seen:
            seen.add((line, status, result))
            steps.append(TraceStep(path=line, status=status, result=result))
        kinds = [c.get("kind") for c in comps]
        if "KIND_DERIVED_ROLE" in kinds:
            role = comps[kinds.index("KIND_DERIVED_ROLE")]["derivedRole"]
            _note(role, comps, kinds, event, status, role_conditions, roles_skipped)
            continue
        if "KIND_ACTION" not in kinds or comps[kinds.index("KIND_ACTION")].get("action") != action:
            continue
        if kinds == ["KIND_POLICY", "KIND_ACTION"]:
            policy = str(comps[0].get("policy", "")).removeprefix("cerbos.") or None
            continue
        if "KIND_RULE" not in kinds:
            continue
        rule = comps[kinds.index("KIND_RULE")]["rule"]
        if "KIND_OUTPUT" in kinds:
            value = event.get("result")
            if rule == "epoch-marker" and isinstance(value, dict) and isinstance(value.get("val"), str):
                epoch = value["val"]
            continue
        _note(rule, comps, kinds, event, status, conditions, skipped)
    matched = [r for r, (_, ok) in conditions.items() if ok and r not in skipped]
    roles = sorted(r for r, (_, ok) in role_conditions.items() if ok and r not in roles_skipped)
    files = policy_files(policy_dir)
    policy_file = files.get(policy) if policy else None
    effects = rule_effects(policy_dir / policy_file) if policy_file else {}
    return RuleTrace(effect=effect, policy=policy, policy_file=policy_file,
                     rules=[r for r in matched if effects.get(r) == effect], matched_rules=matched,
                     derived_roles=roles, epoch=epoch, steps=steps)


def _note(name: str, comps: list[dict[str, Any]], kinds: list[Any], event: Mapping[str, Any], status: str,
          conditions: dict[str, tuple[int, bool]], skipped: set[str]) -> None:
    """Record a rule's (or derived role's) skip, or its top-level condition's result (the shallowest)."""
    if "KIND_CONDITION" not in kinds:
        if status == "skipped":
            skipped.add(name)
        return
    depth = len(comps) - kinds.index("KIND_CONDITION")
    held = conditions.get(name)
    if held is None or depth < held[0]:
        conditions[name] = (depth, event.get("result") is True)


def check_agreement(trace: RuleTrace, *, allowed: bool, epoch: str | None, policy_dir: Path) -> None:
    """Refuse (``PolicyUnavailable``) to show a trace that is not of the decision the PDP gave: a different
    effect, or a set stamped with another epoch than the PDP decides under."""
    if (trace.effect == "ALLOW") != allowed:
        raise PolicyUnavailable(f"the trace of {policy_dir} gives {trace.effect} but the PDP answered "
                                f"{'ALLOW' if allowed else 'DENY'}")
    if epoch is not None and trace.epoch is not None and trace.epoch != epoch:
        raise PolicyUnavailable(f"{policy_dir} is epoch {trace.epoch!r}, the PDP decides under {epoch!r}")


__all__ = ["RuleTrace", "TraceStep", "check_agreement", "policy_files", "rule_effects", "trace_decision"]
