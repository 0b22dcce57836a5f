"""``pmw policy``: the governance workflow. ``test`` needs no runtime (it runs ``cerbos compile`` and every
test suite, ``--verbose`` and ``--test-filter`` passed through); ``reload``, ``history``, ``explain`` and
``shadow`` are governance calls (``run.governance``, ``engine/service/governance.py``): ``--as`` must be a
live governor.

Module imports stay light (stdlib, typer, ``engine.cli.runtime``): the engine is imported inside the
commands, so that ``pmw --help`` does not load it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer

from engine.cli.runtime import invocation, json_object

group = typer.Typer(help="Test, reload, explain and shadow the Cerbos policies; their activation history.",
                    no_args_is_help=True)

PolicyDir = Annotated[Path | None, typer.Option(
    "--dir", metavar="DIR", exists=True, file_okay=False, help="The policy directory (default: PMW_POLICY_DIR, "
                                                               "else the repository's policies/).")]


def _dir_arg(path: Path | None) -> str | None:
    """A directory option as the governance calls take it: an absolute path (a server may run elsewhere)."""
    return str(path.absolute()) if path is not None else None


@group.command("test")
def run_tests(
    ctx: typer.Context,
    policy_dir: PolicyDir = None,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="FILE", dir_okay=False, help="Also write the suites' results as JUnit XML.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Print the engine's evaluation trace of each failing test (cerbos compile --verbose).")]
    = False,
    test_filter: Annotated[list[str] | None, typer.Option(
        "--test-filter", metavar="FILTER", help="Run only the matching tests: 'dimension=glob1,glob2;...' with "
                                                "dimensions suite, test, principal, resource, action "
                                                "(repeatable; cerbos compile --test-filter).")] = None,
) -> None:
    """Compile the policies and run every test suite (no PDP, no database). A compile error or a failing
    test exits 3 with the compiler's file:line output."""
    from engine.errors import InvalidInput, PolicyRejected, PolicyUnavailable
    from engine.policy.governance import PolicyTestResult, run_policy_tests

    with invocation(ctx) as run:
        directory = policy_dir or run.settings().policy_dir
        try:
            report = run_policy_tests(directory, junit=junit, verbose=verbose, test_filters=test_filter or ())
        except subprocess.TimeoutExpired as exc:
            raise PolicyUnavailable(f"cerbos compile did not finish within {exc.timeout} s") from exc
        except OSError as exc:
            raise InvalidInput("--junit", f"cannot write {str(junit)!r}: {exc.strerror}") from exc
        if not report.ok:
            raise PolicyRejected(str(directory), report.output)
        if run.options.json:
            run.show(PolicyTestResult(policy_dir=str(directory), ok=True, exit_code=report.exit_code,
                                      junit_path=str(report.junit_path) if report.junit_path else None,
                                      output=report.output))
        else:
            typer.echo(report.output)
            typer.echo(f"ok: {directory} compiles and passes every test suite"
                       + (" selected" if test_filter else "") + (f" (JUnit XML: {junit})" if junit else ""))


@group.command("reload")
def reload(ctx: typer.Context, policy_dir: PolicyDir = None) -> None:
    """Validate and deploy DIR under its epoch, reload the PDP, wait until it decides under that epoch,
    then re-decide queued wakes and handoffs. A broken set is refused (exit 3) and the epoch stays.
    A governance call: --as must be a live governor."""
    with invocation(ctx, acting=True) as run:
        run.show(run.governance.reload(actor=run.actor, source=_dir_arg(policy_dir)))


@group.command("history")
def history(ctx: typer.Context,
            limit: Annotated[int, typer.Option("--limit", min=1, max=100_000,
                                               help="Show the last LIMIT activations.")] = 100) -> None:
    """Every activation of a policy epoch, oldest first: a rollback shows as an old epoch activated again.
    A governance call: --as must be a live governor."""
    with invocation(ctx, acting=True) as run:
        run.show(run.governance.history(actor=run.actor, limit=limit),
                 columns=["ordinal", "epoch", "activated_at_us", "activated_by", "source"])


@group.command("explain")
def explain(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help="The object's kind.")],
    ident: Annotated[str, typer.Argument(metavar="ID", help="The object id.")],
    action: Annotated[str, typer.Argument(metavar="ACTION", help="The action (docs/policy-contract.md).")],
    principal: Annotated[str, typer.Option("--principal", metavar="AGENT_ID", help="The agent asking.")],
    principal_attr: Annotated[str | None, typer.Option(
        "--principal-attr", metavar="JSON", help="What if: principal attributes replacing the world's "
                                                 "(e.g. '{\"status\": \"offline\"}').")] = None,
    resource_attr: Annotated[str | None, typer.Option(
        "--resource-attr", metavar="JSON", help="What if: resource attributes replacing the world's "
                                                "(e.g. '{\"sensitivity\": 4}').")] = None,
    policy_dir: Annotated[Path | None, typer.Option(
        "--dir", metavar="DIR", exists=True, file_okay=False,
        help="Ask this undeployed policy set (a PDP of its own, stopped after; nothing is deployed).")] = None,
) -> None:
    """Decide whether --principal may take ACTION on KIND ID and show the rule and the policy file that
    decided (the engine's evaluation trace), the derived roles and the attributes it was decided on.
    A governance call: --as must be a live governor."""
    from engine.cli.permissions import check_kind
    from engine.errors import InvalidInput
    from engine.policy.model import ACTIONS

    with invocation(ctx, acting=True) as run:
        check_kind("KIND", kind)
        if action not in ACTIONS[kind]:
            raise InvalidInput("ACTION", f"{kind!r} has no action {action!r}; one of: {', '.join(ACTIONS[kind])}")
        p_attr = json_object("--principal-attr", principal_attr)
        r_attr = json_object("--resource-attr", resource_attr)
        run.show(run.governance.explain(actor=run.actor, principal_id=principal, kind=kind, id=ident, action=action,
                                        principal_attr=p_attr, resource_attr=r_attr,
                                        policy_dir=_dir_arg(policy_dir)))


@group.command("shadow")
def shadow(
    ctx: typer.Context,
    policy_dir: Annotated[Path, typer.Option(
        "--dir", metavar="DIR", exists=True, file_okay=False, help="The candidate policy set.")],
    limit: Annotated[int, typer.Option("--limit", min=1, max=100_000,
                                       help="Replay the newest LIMIT logged checks.")] = 10_000,
) -> None:
    """Replay the recorded decisions of the PDP's decision log under the candidate set DIR (a PDP of its own)
    and list every decision it would change (before -> after), with counts. Nothing is deployed or written.
    A governance call: --as must be a live governor."""
    with invocation(ctx, acting=True) as run:
        run.show(run.governance.shadow(actor=run.actor, policy_dir=_dir_arg(policy_dir), limit=limit))
