"""Bad input to every ``pmw`` command: the documented exit code, a message on stderr, no traceback, and
the store left exactly as it was (``counts_and_versions()`` before == after), except that a policy denial
appends exactly one ``policy.denied`` audit event (acting agent, nothing else changed).

Every case runs against one seeded world per module (a governor, agents with and without capabilities,
tasks, state, memory, wakes, a receipt, a handoff, artifacts, a topology edge, a pending approval) under
the session's Cerbos PDP: failures leave the store as it was, so the cases can share it. Each case runs in
human mode and in ``--json`` mode (where the error must be the error's ``to_dict()`` JSON on stderr, with a
code that matches the exit code).
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

import pytest
import typer.main

from engine.cli import app
from engine.runtime import Runtime
from engine.sources import SeededIds
from tests.cli_support import (
    GOVERNOR,
    POLICY_DIR,
    Pdp,
    assert_clean_failure,
    assert_one_denial,
    counts,
    invoke,
    pdp_fixture,  # noqa: F401 - the session's PDP (fixture ``pdp``)
    setup_agents,
)

BIG_JSON = json.dumps({"blob": ["x" * 1024] * 65})  # > 64 KiB of canonical JSON, every string within its limit
BIG_TEXT = "y" * (65 * 1024)
BAD_ID = "bad id!"
DENIED = "policy_denied"

# The error codes each exit code may carry (exit 2 is typer's own usage error: no JSON).
CODES = {3: {"invalid_input", "payload_too_large", "target_unresolved", "policy_invalid_request", "policy_rejected",
             "rule_file_invalid", "scenario_invalid", "scenario_timeline", "contract_invalid"},
         4: {"not_found"},
         5: {"version_conflict", "already_exists", "operation_conflict", "terminal_owned", "lease_held",
             "policy_epoch_changed"},
         6: {"illegal_transition", "not_permitted", "policy_denied", "approval_invalid"}, 7: {"artifact_corrupted"},
         8: {"store_unavailable"}, 9: {"policy_unavailable"}, 10: {"unauthenticated"}}


@dataclass(frozen=True)
class Case:
    """``pmw [--db DB] [--as ACTOR] ARGV`` must exit ``code``, mentioning ``fragment`` on stderr. A case
    whose fragment is ``policy_denied`` expects exactly one ``policy.denied`` event by ``actor``."""

    argv: str
    code: int
    fragment: str = ""
    actor: str | None = "a1"
    db: str | None = None

    def args(self, values: dict[str, str]) -> list[str]:
        return [Template(a).safe_substitute(values) for a in shlex.split(self.argv)]

    def __str__(self) -> str:
        who = "no-actor" if self.actor is None else self.actor
        return f"{self.argv} [{who}]"


CASES: list[Case] = [
    # -- top level
    Case("init", 3, "db_url", db="mysql://nowhere/x"),
    Case("init", 3, "db_url", db="not a url"),
    Case("init", 8, "store unavailable", db="sqlite:///$afile/world.db"),
    Case("init extra", 2),
    Case(f"init --governor '{BAD_ID}' --name X --term t9", 3, "agent_id"),
    Case("init --governor g2 --name '' --term t9", 3, "display_name"),
    Case("init --governor g2 --name G2", 3, "--term"),
    Case("init --name G2", 3, "--name"),
    Case("init --governor g2 --name G2 --term t9", 6, "a governor already exists"),
    Case("project ghost", 4, "ghost"),
    Case(f"project '{BAD_ID}'", 3, "agent_id"),
    Case("project a1 --budget 0", 2),
    Case("snapshot", 3, "--as", actor=None),
    Case("snapshot", 3, "actor", actor=BAD_ID),
    Case("demo --db $url", 3, "empty database"),
    Case("demo --out $afile", 2),
    # -- agents
    Case(f"agents register '{BAD_ID}' --name X --role r --term t9", 3, "agent_id"),
    Case("agents register a9 --name X --role r --term t9 --capabilities '{bad'", 3, "--capabilities"),
    Case("agents register a9 --name X --role r --term t9 --capabilities '[1]'", 3, "--capabilities"),
    Case("agents register a9 --name X --role r --term t9 --permissions $big_json", 3, "payload_too_large"),
    Case("agents register a9 --name '' --role r --term t9", 3, "display_name"),
    Case("agents register a9 --name X --role r", 2),
    Case("agents grant ghost --capability task.create", 4, "ghost", actor=GOVERNOR),
    Case("agents grant a2 --capability 'Bad Cap'", 3, "capabilities", actor=GOVERNOR),
    Case("agents grant a2", 3, "--capability", actor=GOVERNOR),
    Case("agents grant a2 --capability task.create --no-capabilities", 3, "--no-capabilities", actor=GOVERNOR),
    Case("agents grant a2 --clearance 9", 2, actor=GOVERNOR),
    Case("agents grant a2 --capability task.create", 3, "--as", actor=None),
    Case("agents grant a2 --capability task.create", 6, DENIED),
    Case("agents grant a1 --clearance 5", 6, DENIED),
    Case("agents list", 3, "--as", actor=None),
    Case("agents list --status zombie", 3, "zombie"),
    Case(f"agents list --role '{BAD_ID}'", 3, "role_id"),
    Case("agents show ghost", 4, "ghost"),
    Case(f"agents show '{BAD_ID}'", 3, "agent_id"),
    Case("agents show a1", 3, "--as", actor=None),
    Case("agents sessions agent:ghost", 3, "no such agent"),
    Case("agents sessions planet:x", 3, "target"),
    Case("agents sessions term:nobody", 3, "no live session"),
    Case("agents activate agent:a4", 5, "terminal_owned"),
    Case(f"agents activate 'agent:{BAD_ID}'", 3, "target"),
    Case("agents activate session:ghost", 3, "target"),
    Case("agents relinquish session:ghost", 3, "target"),
    Case("agents relinquish nope:x", 3, "target"),
    Case("agents detach agent:ghost", 3, "no such agent"),
    Case("agents detach agent:", 3, "target"),
    Case("agents unregister agent:ghost", 3, "no such agent"),
    Case("agents unregister term:", 3, "target"),
    # -- state
    Case(f"state get '{BAD_ID}'", 3, "key"),
    Case("state get missing", 4, "missing"),
    Case("state get k", 3, "--as", actor=None),
    Case("state set k '{bad' --expect-version 1", 3, "VALUE_JSON"),
    Case("state set k 2 --expect-version 5", 5, "version_conflict"),
    Case("state set k 2 --expect-version 0", 5, "already_exists"),
    Case("state set nokey 1 --expect-version 3", 4, "nokey"),
    Case("state set k NaN --expect-version 1", 3, "VALUE_JSON"),
    Case("state set k 1 --expect-version abc", 2),
    Case("state set k 1 --expect-version -1", 3, "expected_version"),
    Case("state set k 1", 2),
    Case("state set k $big_json --expect-version 1", 3, "payload_too_large"),
    Case(f"state set '{BAD_ID}' 1 --expect-version 0", 3, "key"),
    Case("state set k 1 --expect-version 1", 3, "--as", actor=None),
    Case("state set k 1 --expect-version 1", 3, "actor", actor=BAD_ID),
    Case("state set k 2 --expect-version 1", 6, DENIED, actor="a5"),
    Case("state list --limit 0", 2),
    Case("state list", 3, "actor", actor=BAD_ID),
    # -- tasks
    Case("tasks create ''", 3, "goal"),
    Case("tasks create $big_text", 3, "payload_too_large"),
    Case("tasks create goal --constraints '{'", 3, "--constraints"),
    Case("tasks create goal --constraints '[1]'", 3, "--constraints"),
    Case("tasks create goal --depends-on ghost", 4, "ghost"),
    Case(f"tasks create goal --id '{BAD_ID}'", 3, "task_id"),
    Case("tasks create goal --deadline-us -5", 3, "deadline_us"),
    Case("tasks create goal --id t-open", 5, "already_exists"),
    Case("tasks create goal", 3, "--as", actor=None),
    Case("tasks create goal", 6, DENIED, actor="a5"),
    Case("tasks list --status bogus", 3, "bogus"),
    Case(f"tasks list --assignee '{BAD_ID}'", 3, "assignee"),
    Case("tasks list --limit 0", 2),
    Case("tasks list", 3, "--as", actor=None),
    Case("tasks show ghost", 4, "ghost"),
    Case(f"tasks show '{BAD_ID}'", 3, "task_id"),
    Case("tasks show t-open", 3, "--as", actor=None),
    Case("tasks show t-secret", 6, DENIED),
    Case("tasks assign t-open ghost", 4, "ghost"),
    Case("tasks assign t-open a2", 6, "not_permitted", actor="a2"),
    Case("tasks assign t-open a2 --expect-version 9", 5, "version_conflict"),
    Case("tasks assign ghost a2", 4, "ghost"),
    Case("tasks claim ghost", 4, "ghost"),
    Case("tasks claim t-claimed", 6, "illegal_transition"),
    Case("tasks claim t-open --expect-version 7", 5, "version_conflict"),
    Case("tasks claim t-open --expect-version 0", 3, "expected_version"),
    Case("tasks complete t-open", 6, "illegal_transition"),
    Case("tasks complete t-claimed", 6, "not_permitted"),
    Case("tasks complete t-claimed --result '{'", 3, "--result", actor="a2"),
    Case("tasks complete t-claimed --result $big_json", 3, "payload_too_large", actor="a2"),
    Case("tasks fail t-open --reason x", 6, "illegal_transition"),
    Case("tasks fail t-open", 2),
    Case("tasks fail ghost --reason x", 4, "ghost"),
    Case("tasks release t-open", 6, "illegal_transition"),
    Case("tasks release t-claimed", 6, "not_permitted", actor="a3"),
    Case("tasks release ghost", 4, "ghost"),
    Case("tasks abort t-open --reason x", 6, "not_permitted", actor="a2"),
    Case("tasks abort ghost --reason x", 4, "ghost"),
    Case("tasks abort t-open", 2),
    # -- memory
    Case("memory store fact --type bogus", 3, "epistemic_type"),
    Case("memory store fact --type observation --scope shared", 3, "scope"),
    Case("memory store fact --type observation --scope room", 3, "room_id"),
    Case("memory store fact --type observation --scope room --room ghost", 6, "not_permitted"),
    Case("memory store fact --type observation --confidence 2", 3, "confidence"),
    Case("memory store $big_text --type observation", 3, "payload_too_large"),
    Case("memory store fact --type observation --permission-scope '{'", 3, "--permission-scope"),
    Case("memory store fact", 2),
    Case("memory store fact --type observation", 3, "--as", actor=None),
    Case("memory list", 3, "--as", actor=None),
    Case("memory list", 3, "actor", actor=BAD_ID),
    Case("memory list --limit 0", 2),
    Case("memory show m-priv", 6, DENIED, actor="a2"),
    Case("memory show ghost", 6, DENIED),  # memory one may not see: the same answer, existing or not
    Case(f"memory show '{BAD_ID}'", 3, "memory_id"),
    Case("memory propose m-priv", 6, DENIED, actor="a2"),  # sealed from a2: the policy answers first
    Case("memory propose m-shared", 6, "illegal_transition"),
    Case("memory propose ghost", 6, DENIED),
    Case("memory review m-priv", 6, DENIED, actor="a2"),
    Case("memory review ghost", 6, DENIED, actor="a2"),
    Case("memory promote m-priv", 6, DENIED, actor="a2"),
    Case("memory promote m-cand", 6, "not_permitted"),
    Case("memory reject m-priv --reason x", 6, DENIED, actor="a2"),
    Case("memory reject m-cand", 2, actor="a2"),
    Case("memory archive m-priv", 6, "illegal_transition"),
    Case("memory archive m-shared --expect-version 9", 5, "version_conflict"),
    Case("memory reopen m-priv --reason x", 6, "illegal_transition"),
    Case("memory supersede m-shared ghost", 4, "ghost"),
    Case("memory supersede m-shared m-priv", 3, "replacement_id"),
    Case("memory supersede m-shared m-shared", 3, "replacement_id"),
    Case("memory revoke ghost --reason x", 6, DENIED),
    Case(f"memory revoke '{BAD_ID}' --reason x", 3, "memory_id"),
    Case("memory revoke m-priv --reason x", 6, DENIED, actor="a2"),
    # -- wakes
    Case("wakes enqueue ghost --cause c --key k9", 4, "ghost"),
    Case("wakes enqueue a2 --cause c --key k9 --payload '{'", 3, "--payload"),
    Case("wakes enqueue a2 --cause c --key k9 --payload '[]'", 3, "--payload"),
    Case("wakes enqueue a2 --cause c --key k9 --payload $big_json", 3, "payload_too_large"),
    Case("wakes enqueue a2 --cause c --key k9 --priority 5000", 3, "priority"),
    Case(f"wakes enqueue '{BAD_ID}' --cause c --key k9", 3, "target_agent"),
    Case("wakes enqueue a2 --cause c", 2),
    Case("wakes enqueue a2 --cause c --key k9", 3, "--as", actor=None),
    Case("wakes claim --lease-seconds 0", 3, "lease_seconds"),
    Case(f"wakes claim --agent '{BAD_ID}'", 3, "agent_id"),
    Case("wakes claim", 3, "--as", actor=None),
    Case("wakes ack ghost", 4, "ghost"),
    Case("wakes ack $wake_pending", 6, "illegal_transition"),
    Case("wakes ack $wake_done", 6, "illegal_transition", actor="a2"),
    Case("wakes ack $wake_pending --decision bogus", 3, "decision"),
    Case("wakes ack $wake_pending --outcome bogus", 3, "outcome"),
    Case("wakes ack $wake_pending --payload '{'", 3, "--payload"),
    Case("wakes cancel $wake_done --reason x", 6, "illegal_transition"),
    Case("wakes cancel $wake_pending --reason x --outcome acted", 3, "outcome"),
    Case("wakes cancel ghost --reason x", 4, "ghost"),
    Case("wakes cancel $wake_pending", 2),
    Case("wakes list --status bogus", 3, "bogus"),
    Case(f"wakes list --agent '{BAD_ID}'", 3, "target_agent"),
    Case("wakes list", 3, "--as", actor=None),
    Case("wakes enqueue a2 --cause c --key k9", 6, DENIED, actor="a5"),
    Case("wakes show ghost", 4, "ghost"),
    Case(f"wakes show '{BAD_ID}'", 3, "wake_id"),
    Case("wakes show $wake_pending", 3, "--as", actor=None),
    Case("wakes show $wake_pending", 6, DENIED, actor="a2"),
    # -- handoffs
    Case("handoffs create a3 ghost goal", 4, "ghost", actor="a2"),
    Case("handoffs create ghost t-claimed goal", 4, "ghost", actor="a2"),
    Case("handoffs create a3 t-claimed goal", 6, "not_permitted"),
    Case("handoffs create a3 t-claimed goal --constraints '{'", 3, "--constraints", actor="a2"),
    Case("handoffs create a3 t-claimed ''", 3, "goal", actor="a2"),
    Case("handoffs create a3 t-claimed goal", 3, "--as", actor=None),
    Case("handoffs accept $handoff", 6, "not_permitted"),
    Case("handoffs accept ghost", 4, "ghost", actor="a3"),
    Case("handoffs complete $handoff", 6, "illegal_transition", actor="a3"),
    Case("handoffs complete $handoff --result '{'", 3, "--result", actor="a3"),
    Case("handoffs reject ghost --reason x", 4, "ghost"),
    Case("handoffs reject $handoff", 2),
    Case("handoffs reject $handoff --reason x", 6, "not_permitted"),
    Case("handoffs list --status bogus", 3, "bogus"),
    Case(f"handoffs list --target '{BAD_ID}'", 3, "target_agent"),
    Case("handoffs list", 3, "--as", actor=None),
    Case("handoffs show ghost", 4, "ghost"),
    Case(f"handoffs show '{BAD_ID}'", 3, "handoff_id"),
    Case("handoffs show $handoff", 3, "--as", actor=None),
    Case("handoffs show $handoff", 6, DENIED, actor="a1"),
    # -- receipts
    Case(f"receipts list --agent '{BAD_ID}'", 3, "agent_id"),
    Case("receipts list --limit 0", 2),
    Case("receipts list", 3, "--as", actor=None),
    Case("receipts show ghost", 4, "ghost"),
    Case(f"receipts show '{BAD_ID}'", 3, "receipt_id"),
    Case("receipts show $receipt", 3, "--as", actor=None),
    Case("receipts show $receipt", 6, DENIED, actor="a3"),
    Case("receipts for-wake $wake_pending", 4, "not_found"),
    Case(f"receipts for-wake '{BAD_ID}'", 3, "wake_id"),
    Case("receipts for-wake $wake_done", 3, "--as", actor=None),
    Case("receipts for-wake $wake_done", 6, DENIED, actor="a3"),
    # -- events
    Case("events tail --limit 0", 2),
    Case("events tail --after -1", 2),
    Case("events tail --limit abc", 2),
    Case("events tail", 3, "--as", actor=None),
    Case("events tail", 3, "actor", actor=BAD_ID),
    Case("events append 'Bad Type'", 3, "event_type"),
    Case("events append note.posted --payload '{'", 3, "--payload"),
    Case("events append note.posted --payload $big_json", 3, "payload_too_large"),
    Case("events append note.posted --payload '{\"v\": Infinity}'", 3, "--payload"),
    Case("events append note.posted", 3, "--as", actor=None),
    Case("events append note.posted", 6, DENIED, actor="a5"),
    # -- artifacts
    Case("artifacts register $missing_file --type doc", 2),
    Case(f"artifacts register $file --type '{BAD_ID}'", 3, "artifact_type"),
    Case("artifacts register $file --type doc --task ghost", 4, "ghost"),
    Case("artifacts register $file --type doc --id art1", 5, "already_exists"),
    Case("artifacts register $file --type doc", 3, "--as", actor=None),
    Case("artifacts register $file --type doc", 6, DENIED, actor="a5"),
    Case("artifacts version ghost $file", 4, "ghost"),
    Case("artifacts version art1 $file --expect-version 9", 5, "version_conflict"),
    Case("artifacts version art1 $file --expect-version 0", 3, "expected_version"),
    Case("artifacts version art1 $missing_file", 2),
    Case("artifacts show ghost", 4, "ghost"),
    Case("artifacts show art1", 3, "--as", actor=None),
    Case(f"artifacts show '{BAD_ID}'", 3, "artifact_id"),
    Case("artifacts versions ghost", 4, "ghost"),
    Case("artifacts versions art1", 3, "--as", actor=None),
    Case("artifacts get art1", 3, "--as", actor=None),
    Case("artifacts get art1 --version 9", 4, "art1@9"),
    Case("artifacts get art1 --version 0", 3, "version"),
    Case("artifacts get ghost", 4, "ghost"),
    Case("artifacts get art-bad", 7, "artifact_corrupted"),
    Case("artifacts get art1 --out $dir", 2),
    # -- topology
    Case("topology set a1 ghost info", 4, "ghost"),
    Case("topology set a1 a2 bogus", 3, "edge_type"),
    Case("topology set a1 a2 info --expect-version 99", 5, "version_conflict"),
    Case("topology set a1 a2 info --weight -1", 3, "weight"),
    Case("topology set a1 a2 info", 3, "--as", actor=None),
    Case("topology set a1 a2 info", 6, DENIED, actor="a5"),
    Case("topology show --bogus", 2),
    Case("topology show", 3, "--as", actor=None),
    # -- allowed
    Case("allowed bogus x", 3, "KIND"),
    Case("allowed task", 3, "KIND"),
    Case("allowed", 3, "--each"),
    Case("allowed --each task", 3, "--each"),
    Case("allowed --each task:", 3, "--each"),
    Case("allowed --each bogus:x", 3, "--each"),
    Case("allowed task t-open --each task:t-open", 3, "--each"),
    Case("allowed task ghost", 4, "ghost"),
    Case("allowed --each task:t-open --each task:ghost", 4, "ghost"),  # (a missing memory: refused: policy)
    Case("allowed task t-open", 3, "--as", actor=None),
    Case("allowed task t-open --json", 3, "actor", actor=BAD_ID),
    Case("allowed task t-open --bogus", 2),
    # -- invoke
    Case("invoke task t-open", 3, "KIND"),
    Case("invoke tool search --side-effect S9", 3, "--side-effect"),
    Case("invoke tool search --payload '{'", 3, "--payload"),
    Case("invoke tool search --payload $big_json", 3, "payload_too_large"),
    Case("invoke memory ghost", 4, "ghost"),
    Case("invoke tool search", 3, "--as", actor=None),
    Case("invoke tool search", 6, DENIED),
    Case("invoke tool search --side-effect S3", 6, "approval_invalid", actor=GOVERNOR),
    Case("invoke tool search --side-effect S3 --approval ghost", 6, "no such approval", actor=GOVERNOR),
    Case("invoke tool search --side-effect S3 --approval $approval", 6, "approval is pending", actor="a1"),
    Case("invoke tool", 2),
    # -- approvals
    Case("approvals request bogus x", 3, "KIND"),
    Case("approvals request tool search --payload '[1]'", 3, "--payload"),
    Case("approvals request tool $big_text", 3, "object_id"),
    Case("approvals request tool search", 3, "--as", actor=None),
    Case("approvals approve ghost", 4, "ghost", actor=GOVERNOR),
    Case("approvals approve $approval --ttl 0", 3, "ttl_seconds", actor=GOVERNOR),
    Case("approvals approve $approval --ttl abc", 2, actor=GOVERNOR),
    Case("approvals approve $approval", 3, "--as", actor=None),
    Case("approvals approve $approval", 6, DENIED, actor="a1"),
    Case("approvals approve $approval", 6, DENIED, actor="a2"),
    Case("approvals show ghost", 4, "ghost"),
    Case("approvals show $approval", 3, "--as", actor=None),
    Case("approvals show $approval", 6, DENIED, actor="a2"),
    # -- policy
    Case("policy test --dir $missing_file", 2),
    Case("policy test --dir $broken", 3, "task.yaml"),
    Case("policy test --junit $dir", 2),
    Case("policy reload --dir $missing_file", 2),
    Case("policy reload --dir $broken", 3, "policy_rejected", actor=GOVERNOR),
    Case("policy explain task t-open fly --principal a1", 3, "ACTION"),
    Case("policy explain bogus x read --principal a1", 3, "KIND"),
    Case("policy explain task t-open read", 2),
    Case("policy explain task ghost read --principal a1", 4, "ghost", actor=GOVERNOR),
    Case("policy explain task t-open read --principal ghost", 4, "ghost", actor=GOVERNOR),
    Case("policy history --limit 0", 2),
    Case("policy history --limit many", 2),
    Case("policy shadow", 2),
    Case("policy shadow --dir $missing_file", 2),
    Case("policy shadow --dir $dir --limit 0", 2),
    Case("policy shadow --dir $broken", 6, DENIED),
    Case("policy shadow --dir $broken", 3, "policy_rejected", actor=GOVERNOR),
    # -- the decision log
    Case("audit --effect MAYBE", 3, "effect", actor=GOVERNOR),
    Case("audit --since yesterday", 3, "--since", actor=GOVERNOR),
    Case("audit --limit 0", 2, actor=GOVERNOR),
    Case("audit", 6, DENIED),
    Case("audit", 3, "--as", actor=None),
    Case("metrics", 6, DENIED),  # a1 is a worker: the §31 metrics are a governance read
    Case("metrics", 3, "--as", actor=None),
    Case("metrics extra", 2, actor=GOVERNOR),
    # -- tokens
    Case("tokens issue a2", 6, "policy_denied"),
    Case("tokens issue ghost", 4, "ghost", actor=GOVERNOR),
    Case("tokens issue a2 --expires 3y", 3, "--expires", actor=GOVERNOR),
    Case("tokens issue a2 --scope admin", 3, "scope", actor=GOVERNOR),
    Case("tokens revoke tok_ghost", 4, "tok_ghost", actor=GOVERNOR),
    Case(f"tokens revoke '{BAD_ID}'", 3, "token_id", actor=GOVERNOR),
    Case("tokens list --agent ghost", 4, "ghost", actor=GOVERNOR),
    Case("tokens list", 3, "--as", actor=None),
    # -- the server and its clients
    Case("serve --host 10.1.2.3", 3, "--allow-remote", actor=GOVERNOR),
    Case("serve --port 70000", 2, actor=GOVERNOR),
    Case("serve --lease-seconds 0", 2, actor=GOVERNOR),
    Case("serve --role leader", 3, "--role", actor=GOVERNOR),
    Case("serve --pdp x", 3, "--pdp", actor=GOVERNOR),
    # -- contracts and retention
    Case("contracts check --dir $afile", 2),
    Case("contracts check --dir $bad_contracts", 3, "contract_invalid"),
    Case("contracts list --dir $bad_contracts", 3, "contract_invalid"),
    Case("contracts list extra", 2),
    Case("retention sweep", 3, "--as", actor=None),
    Case("retention sweep --limit 0", 2, actor=GOVERNOR),
    Case("login", 3, "--server", actor=None),
    Case("pull", 3, "--server", actor=None),
    Case("pull --lease-seconds 0", 2, actor=None),
    Case("decide wak_x --decision '{}'", 3, "--server", actor=None),
    Case("decide wak_x --decision '[1'", 3, "--decision", actor=None),
    Case("decide wak_x", 2, actor=None),
    Case("mcp --server http://127.0.0.1:9", 10, "PMW_TOKEN", actor=None),  # no token: refused before serving
    Case("backup $dir", 5, "already_exists", actor=None),
    Case("backup $afile", 5, "already_exists", actor=None),
    Case("backup", 2, actor=None),
    # -- the run loop: worker, trace, rules
    Case("worker --agent bob --until-idle", 3, "--agent", actor=GOVERNOR),
    Case("worker --agent bob=nowhere.module:x --until-idle", 3, "--agent", actor=GOVERNOR),
    Case("worker --until-idle", 3, "--as", actor=None),
    Case("worker --max-rounds 0", 2, actor=GOVERNOR),
    Case("worker --rules $missing_file --until-idle", 3, "rule_file_invalid", actor=GOVERNOR),
    Case("trace ghost", 4, "ghost"),
    Case(f"trace '{BAD_ID}'", 3, "wake_id"),
    Case("trace", 3, "--as", actor=None),
    Case(f"trace --agent '{BAD_ID}'", 3, "agent_id"),
    Case("rules check $missing_file", 3, "no rule files"),
    Case("rules check $broken", 3, "rule_file_invalid"),
    Case("rules shadow $missing_file", 3, "no rule files"),
    Case("rules shadow $dir", 3, "--as", actor=None),
    Case("rules shadow", 2),
    # -- rooms
    Case("rooms create goal --stop 'when done'", 3, "stop_condition"),
    Case(f"rooms create goal --member '{BAD_ID}'", 3, "members"),
    Case("rooms create goal", 3, "--as", actor=None),
    Case("rooms create goal --member ghost", 4, "ghost"),
    Case("rooms show ghost", 4, "ghost"),
    Case(f"rooms show '{BAD_ID}'", 3, "room_id"),
    Case("rooms members ghost", 4, "ghost"),
    Case("rooms join ghost", 4, "ghost"),
    Case("rooms join ghost", 3, "--as", actor=None),
    Case("rooms leave ghost", 4, "ghost"),
    Case("rooms say ghost hello", 4, "ghost"),
    Case("rooms say ghost $big_text", 3, "body"),
    Case("rooms discussion ghost", 4, "ghost"),
    Case("rooms discussion ghost --limit 0", 2),
    Case("rooms answer ghost 'my answer'", 4, "ghost"),
    Case("rooms answer ghost 'my answer' --confidence 2", 3, "confidence"),
    Case("rooms answers ghost", 4, "ghost"),
    Case("rooms distill ghost 'a summary' --source m-priv", 4, "ghost"),
    Case("rooms distill ghost 'a summary'", 2),
    Case("rooms close ghost", 4, "ghost"),
    Case("rooms close-stale", 3, "--as", actor=None),
    Case("rooms invite ghost a2", 4, "ghost"),
    Case("rooms invite ghost a2", 3, "--as", actor=None),
    Case("rooms invite ghost", 2),
    # -- the command registry: commands, exec
    Case("commands ghost", 3, "ghost"),
    Case("commands --schema", 3, "--schema"),
    Case("exec ghost", 3, "ghost"),
    Case("exec record_decision", 3, "record_decision"),
    Case("exec create_task --json '[]'", 3, "--json"),
    Case("exec create_task --json '{\"goal\": \"x\"}'", 3, "--as", actor=None),
    Case("exec create_task --json '{\"goal\": \"x\"}'", 6, DENIED, actor="a5"),
    Case("exec", 2),
    # -- simulate
    Case("simulate $missing_file", 2),
    Case("simulate $file", 3, "scenario_invalid"),
    # -- tasks create --sensitivity / --priority (constraints.sensitivity 0..5, constraints.priority 0..9)
    Case("tasks create goal --sensitivity 6", 3, "--sensitivity"),
    Case("tasks create goal --sensitivity -1", 3, "--sensitivity"),
    Case("tasks create goal --sensitivity high", 2),
    Case("tasks create goal --sensitivity 2 --constraints '{\"sensitivity\": 3}'", 3, "--sensitivity"),
    Case("tasks create goal --constraints '{\"sensitivity\": 6}'", 3, "constraints.sensitivity"),
    Case("tasks create goal --priority 10", 3, "--priority"),
    Case("tasks create goal --priority -1", 3, "--priority"),
    Case("tasks create goal --priority 1.5", 2),
    Case("tasks create goal --priority 4 --constraints '{\"priority\": 5}'", 3, "--priority"),
    Case("tasks create goal --constraints '{\"priority\": \"high\"}'", 3, "constraints.priority"),
    Case("tasks create goal --priority 3 --constraints '{\"priority\": true}'", 3, "--priority"),
    Case("tasks create goal --priority 3", 6, DENIED, actor="a5"),
]


@functools.cache
def command_tree() -> dict[str, set[str]]:
    """Every top-level command of the app and its subcommands (empty for a leaf command)."""
    root: dict[str, object] = getattr(typer.main.get_command(app), "commands", {})
    return {name: set(getattr(cmd, "commands", {})) for name, cmd in root.items()}


def all_commands() -> set[str]:
    """Every leaf command, as ``group command`` or ``command``."""
    return {f"{g} {s}" if s else g for g, subs in command_tree().items() for s in (subs or {""})}


def covered(case: Case) -> str:
    """The leaf command a case exercises."""
    words = shlex.split(case.argv)
    return " ".join(words[:2]) if command_tree()[words[0]] else words[0]


def seed(directory: Path, pdp: Pdp) -> dict[str, str]:
    """A world with something of every kind, under ``pdp``; returns the generated ids the cases refer to.

    ``gov`` is the governor; a1, a2 (reviewer), a3 (reviewer) hold every capability the commands need;
    a4 is attached on a1's terminal; a5 is active but holds no capability at all."""
    url = f"sqlite:///{directory / 'world.db'}"
    with Runtime.open(pdp.settings(url), ids=SeededIds(11)) as runtime:
        w = runtime.world
        runtime.book.bootstrap_governor(GOVERNOR, "Governor", f"t-{GOVERNOR}")
        setup_agents(w, ["a1", "a2", "a3"], roles={"a2": "reviewer", "a3": "reviewer"},
                     terms={a: f"t-{a}" for a in ("a1", "a2", "a3")})
        w.register_agent("a4", "A4", "tester", "t-a1")  # attached on a1's terminal
        setup_agents(w, ["a5"], caps=(), terms={"a5": "t-a5"})
        w.create_task("a1", "open work", task_id="t-open")
        w.create_task("a1", "claimed work", task_id="t-claimed")
        w.create_task(GOVERNOR, "secret work", task_id="t-secret", constraints={"sensitivity": 3})
        w.claim_task("a2", "t-claimed")
        w.compare_and_set_state("a1", "k", 0, {"v": 1})
        w.store_memory("a1", "private thought", "hypothesis", memory_id="m-priv")
        w.store_memory("a1", "a candidate", "inference", memory_id="m-cand")
        w.propose_memory("a1", "m-cand")
        w.review_memory("a3", "m-cand")
        w.store_memory("a1", "a shared fact", "observation", memory_id="m-shared")
        w.propose_memory("a1", "m-shared")
        w.promote_memory("a2", "m-shared")
        done = w.enqueue_wake("a1", "a2", "ping", "k-done").wake
        w.claim_wake("a2", agent_id="a2")
        receipt = w.ack_wake("a2", done.wake_id, "no_action")
        pending = w.enqueue_wake("a1", "a3", "ping", "k-pending").wake
        handoff = w.create_handoff("a2", "a3", "t-claimed", "take over")
        w.register_artifact("a1", "doc", b"artifact one", artifact_id="art1")
        bad = w.register_artifact("a1", "doc", b"to be tampered with", artifact_id="art-bad")
        w.set_topology_edge("a1", "a1", "a2", "info")
        approval = w.request_approval("a1", "tool", "search")
        assert w.artifact_dir is not None
        (w.artifact_dir / bad.location).write_bytes(b"tampered")
    return {"wake_done": done.wake_id, "wake_pending": pending.wake_id, "handoff": handoff.handoff_id,
            "receipt": receipt.receipt_id, "approval": approval.approval_id}


def broken_policies(directory: Path) -> Path:
    """A copy of the repository's policies with a YAML error in ``resources/task.yaml``."""
    target = directory / "broken-policies"
    shutil.copytree(POLICY_DIR, target)
    task = target / "resources" / "task.yaml"
    task.write_text(task.read_text().replace("  rules:\n", "  rules:\n    - name: [unclosed\n", 1))
    return target


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, pdp: Pdp) -> tuple[str, dict[str, str]]:
    """The module's one seeded world (failures leave it as it was) and what ``$name`` placeholders expand to."""
    root = tmp_path_factory.mktemp("seeded")
    directory = root / "world"
    directory.mkdir()
    ids = seed(directory, pdp)
    (root / "content.txt").write_text("new content")
    (root / "afile").write_text("a regular file, not a directory")
    (root / "bad-contracts" / "actions").mkdir(parents=True)
    (root / "bad-contracts" / "actions" / "x.yaml").write_text("action: x\nbogus: 1\n")
    url = f"sqlite:///{directory / 'world.db'}"
    values = {**ids, "url": url, "big_json": BIG_JSON, "big_text": BIG_TEXT, "file": str(root / "content.txt"),
              "missing_file": str(root / "nope.txt"), "dir": str(root), "afile": str(root / "afile"),
              "bad_contracts": str(root / "bad-contracts"),
              "broken": str(broken_policies(root))}
    return url, values


def test_every_command_has_bad_input_cases() -> None:
    assert all_commands() - {covered(c) for c in CASES} == set()


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_input_fails_cleanly_and_changes_nothing(case: Case, as_json: bool, pdp: Pdp,
                                                     seeded: tuple[str, dict[str, str]]) -> None:
    url, values = seeded
    before = counts(url)
    db = Template(case.db).safe_substitute(values) if case.db else url
    result = invoke(db, *case.args(values), actor=case.actor, as_json=as_json, env=pdp.env)
    assert_clean_failure(result, case.code)
    assert case.fragment in result.stderr, result.stderr
    assert result.stdout == ""
    if as_json and case.code != 2:
        error = json.loads(result.stderr)
        assert error["code"] in CODES[case.code], error
        assert error["message"]
        if case.fragment == DENIED:
            assert error["code"] == DENIED
    if case.fragment == DENIED:
        assert case.actor is not None
        assert_one_denial(before, url, case.actor)
    else:
        assert counts(url) == before
