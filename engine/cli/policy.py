"""``pmw policy``: the governance workflow. ``test`` needs no runtime (it runs ``cerbos compile`` and every
test suite); ``reload`` validates, deploys and reloads the PDP under a new epoch; ``explain`` shows one
decision with the derived roles and attributes it was decided on."""

import subprocess
from pathlib import Path
from typing import Annotated

import typer

from engine.cli.permissions import check_kind
from engine.cli.runtime import invocation
from engine.errors import InvalidInput, PolicyRejected, PolicyUnavailable
from engine.models.common import Model
from engine.policy.governance import run_policy_tests
from engine.policy.model import ACTIONS

group = typer.Typer(help="Test, reload and explain the Cerbos policies.", no_args_is_help=True)

PolicyDir = Annotated[Path | None, typer.Option(
    "--dir", metavar="DIR", exists=True, file_okay=False, help="The policy directory (default: PMW_POLICY_DIR, "
                                                               "else the repository's policies/).")]


class PolicyTestResult(Model):
    """A policy set that compiled and passed every test suite."""

    policy_dir: str
    ok: bool
    exit_code: int
    junit_path: str | None
    output: str


@group.command("test")
def run_tests(
    ctx: typer.Context,
    policy_dir: PolicyDir = None,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="FILE", dir_okay=False, help="Also write the suites' results as JUnit XML.")] = None,
) -> None:
    """Compile the policies and run every test suite (no PDP, no database). A compile error or a failing
    test exits 3 with the compiler's file:line output."""
    with invocation(ctx) as run:
        directory = policy_dir or run.settings().policy_dir
        try:
            report = run_policy_tests(directory, junit=junit)
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
                       + (f" (JUnit XML: {junit})" if junit else ""))


@group.command("reload")
def reload(ctx: typer.Context, policy_dir: PolicyDir = None) -> None:
    """Validate and deploy DIR under a new epoch, reload the PDP, wait until it decides under that epoch,
    then re-decide queued wakes and handoffs. A broken set is refused (exit 3) and the epoch stays.

    With an external PDP (PMW_PDP_ADDRESS, PMW_PDP_ADMIN_USER/PASSWORD) the new set stays in force; the
    runtime's own PDP lives for one command only, so set PMW_POLICY_DIR to make a set the default."""
    with invocation(ctx) as run:
        run.show(run.runtime.reload_policies(policy_dir))


@group.command("history")
def history(ctx: typer.Context,
            limit: Annotated[int, typer.Option("--limit", min=1, max=100_000,
                                               help="Show the last LIMIT activations.")] = 100) -> None:
    """Every activation of a policy epoch, oldest first: a rollback shows as an old epoch activated again."""
    with invocation(ctx) as run:
        run.show(run.book.policy_history(limit), columns=["ordinal", "epoch", "activated_at_us", "activated_by",
                                                          "source"])


@group.command("explain")
def explain(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help="The object's kind.")],
    ident: Annotated[str, typer.Argument(metavar="ID", help="The object id.")],
    action: Annotated[str, typer.Argument(metavar="ACTION", help="The action (docs/policy-contract.md).")],
    principal: Annotated[str, typer.Option("--principal", metavar="AGENT_ID", help="The agent asking.")],
) -> None:
    """Decide whether --principal may take ACTION on KIND ID, and show the derived roles and the principal
    and resource attributes the decision was taken on."""
    with invocation(ctx) as run:
        check_kind("KIND", kind)
        if action not in ACTIONS[kind]:
            raise InvalidInput("ACTION", f"{kind!r} has no action {action!r}; one of: {', '.join(ACTIONS[kind])}")
        run.show(run.runtime.explain(principal, kind, ident, action))
