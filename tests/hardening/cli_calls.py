"""Every ``pmw`` command with a valid argument for each required parameter, so that a test can swap one
parameter for a bad value and run it.

The commands and their parameters come from the app's command tree (whatever the command modules declare),
so a command added later is covered without a change here. A value comes from the parameter's name (the
ids of :func:`tests.hardening.support.seed`); a parameter that takes JSON is known by its name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import click
import typer.main

from engine.cli import app

# Commands whose inputs are files or processes, not values (covered elsewhere or not input at all): the demo
# and the worker run the world, simulate/rules read files (tests/hardening/test_yaml_input.py), policy
# test/reload compile a policy directory, artifacts take files.
NOT_VALUE_COMMANDS = {"demo", "worker", "simulate", "policy test", "policy reload", "rules check", "rules shadow",
                      "artifacts register", "artifacts version", "artifacts get"}
JSON_PARAMS = {"payload", "constraints", "result", "capabilities", "permissions", "permission_scope",
               "authority_scope", "context_scope", "value"}  # and any option spelled --json (pmw exec)
VALID: dict[str, str] = {
    "agent_id": "alice", "target": "agent:alice", "key": "k", "value": '{"v": 3}', "expect_version": "1",
    "goal": "a goal", "task_id": "$task", "assignee": "bob", "reason": "a reason", "content": "some content",
    "epistemic_type": "inference", "memory_id": "$memory", "replacement_id": "$memory2", "target_agent": "bob",
    "cause": "ping", "wake_id": "$wake", "handoff_id": "$handoff", "approval_id": "$approval", "room_id": "$room",
    "body": "hello", "kind": "task", "ident": "$task", "action": "read", "principal": "alice",
    "source_agent": "alice", "edge_type": "info", "event_type": "note.posted", "name": "Someone", "role": "worker",
    "term": "t-someone", "sources": "$memory", "receipt_id": "rcp-none", "artifact_id": "$artifact",
    "token_id": "tok_none",
}
# Per command, where a parameter means something else than its name says elsewhere.
VALID_IN: dict[str, dict[str, str]] = {
    "exec": {"name": "create_task", "body": '{"goal": "from exec"}'},
    "commands": {"name": "create_task"},
    "decide": {"decision": '{"decision": "no_action"}'},
}


@dataclass(frozen=True)
class CliParam:
    name: str
    flag: str | None  # "--limit"; None for an argument
    kind: str  # str, int, float, json
    required: bool
    multiple: bool


@dataclass(frozen=True)
class CliCommand:
    words: tuple[str, ...]
    params: tuple[CliParam, ...]

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def argv(self, ids: dict[str, str], fuzzed: str | None = None, bad: str = "") -> list[str] | None:
        """The command line with ``fuzzed`` set to ``bad`` and every other required parameter valid
        (``None`` when a required parameter has no known valid value)."""
        args: list[str] = []
        options: list[str] = []
        for p in self.params:
            if p.name == fuzzed:
                value = bad
            elif p.required:
                known = VALID_IN.get(self.name, {}).get(p.name, VALID.get(p.name))
                if known is None:
                    return None
                value = ids[known[1:]] if known.startswith("$") else known
            else:
                continue
            if p.flag is None:
                args.append(value)
            else:
                options.append(f"{p.flag}={value}")  # one token: a value starting with "-" stays a value
        return [*self.words, *options, "--", *args] if args else [*self.words, *options]


def _kind(param: Any) -> str | None:
    """The fuzz kind of a click parameter, from its click type: ``int``, ``float``, ``str`` or ``json`` (a JSON
    text option); None for what the fuzz does not set (flags, choices, paths, files)."""
    kind = param.type
    if getattr(param, "is_flag", False) or isinstance(kind, click.types.BoolParamType | click.Choice | click.Path
                                                      | click.File):
        return None
    if isinstance(kind, click.types.IntParamType):
        return "int"
    if isinstance(kind, click.types.FloatParamType):
        return "float"
    if isinstance(kind, click.types.StringParamType):
        is_json = param.name in JSON_PARAMS or (param.opts and param.opts[0] == "--json")
        return "json" if is_json else "str"
    return None


@functools.cache
def cli_commands() -> tuple[CliCommand, ...]:
    """Every leaf command of ``pmw`` that takes values, with the parameters a fuzz can set."""
    found: list[CliCommand] = []

    def walk(cmd: Any, words: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*words, name))
            return
        if " ".join(words) in NOT_VALUE_COMMANDS:
            return
        params = []
        for p in cmd.params:
            kind = _kind(p)
            if kind is None:
                continue
            is_argument = type(p).__name__.endswith("Argument")
            params.append(CliParam(p.name, None if is_argument else p.opts[0], kind, bool(p.required),
                                   bool(p.multiple)))
        found.append(CliCommand(words, tuple(params)))

    walk(typer.main.get_command(app), ())
    return tuple(found)


__all__ = ["CliCommand", "CliParam", "cli_commands"]
