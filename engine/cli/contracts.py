"""``pmw contracts`` (check and list the action contracts) and ``pmw retention sweep``."""

from pathlib import Path
from typing import Annotated

import typer

from engine.cli.runtime import invocation

group = typer.Typer(help="Action contracts (contracts/actions/*.yaml): check and list them.", no_args_is_help=True)
retention_group = typer.Typer(help="Retention: expire memory and artifacts past their time.", no_args_is_help=True)

ContractDir = Annotated[Path | None, typer.Option(
    "--dir", file_okay=False, help="The contracts folder (default: the repository's contracts/).")]


@group.command("check")
def check(ctx: typer.Context, directory: ContractDir = None) -> None:
    """Validate every contract, retention.yaml and attention.yaml; print what loaded, or the first problem as
    file:line: field (exit 3). Reads files only: no world is opened."""
    from engine.attention.table import ATTENTION_FILE, load_attention_table
    from engine.contracts.loader import DEFAULT_CONTRACT_DIR, load_contracts
    from engine.contracts.retention import load_retention

    with invocation(ctx) as run:
        folder = directory or DEFAULT_CONTRACT_DIR
        book = load_contracts(folder)
        rules = load_retention(folder)
        table = load_attention_table(folder)
        from engine.contracts.listing import ContractCheck

        run.show(ContractCheck(source=str(folder), contracts=sorted(book),
                               memory_retention_s={k.value: v for k, v in rules.memory.items()},
                               artifact_retention_s=dict(rules.artifacts),
                               attention_table=str(folder / ATTENTION_FILE) if table is not None else "built-in"))


@group.command("list")
def list_(ctx: typer.Context, directory: ContractDir = None) -> None:
    """Show each contract: side-effect class, idempotency, confirmation, compensation and evidence level."""
    from engine.contracts.loader import DEFAULT_CONTRACT_DIR, load_contracts

    with invocation(ctx) as run:
        book = load_contracts(directory or DEFAULT_CONTRACT_DIR)
        from engine.contracts.listing import ContractSummary

        run.show([ContractSummary(action=c.action, side_effect=c.side_effect.value,
                                  idempotency=c.idempotency.policy.value, confirmation=c.confirmation.value,
                                  compensation=c.compensation.kind.value, evidence=c.evidence.value)
                  for c in book.values()])


@retention_group.command("sweep")
def sweep(ctx: typer.Context, limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help=(
        "At most this many objects expired."))] = 1000) -> None:
    """Expire memory and artifacts past their TTL or retention, invalidating what was derived from them (each
    with an event naming the provenance path). A governance command: --as must be a live governor."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.sweep_retention(run.actor, limit=limit))


def register(app: typer.Typer) -> None:
    """Add ``pmw contracts`` and ``pmw retention`` to ``app``."""
    app.add_typer(group, name="contracts")
    app.add_typer(retention_group, name="retention")
