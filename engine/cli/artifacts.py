"""``pmw artifacts``: content-addressed artifacts; every read verifies the checksum (exit 7 if not)."""

import base64
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.options import ExpectVersion, OpId
from engine.cli.runtime import Run, invocation
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from engine.models.artifacts import ArtifactContent

group = typer.Typer(help="Register, version and read artifacts.", no_args_is_help=True)

ArtifactId = Annotated[str, typer.Argument(metavar="ARTIFACT_ID", help="The artifact id.")]
File = Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False, readable=True,
                                      help="The content file.")]


def read_file(path: Path) -> bytes:
    """The bytes of ``path``; an unreadable file is ``InvalidInput`` naming FILE."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInput("FILE", f"cannot read {str(path)!r}: {exc.strerror}") from None


@group.command("register")
def register(
    ctx: typer.Context,
    file: File,
    artifact_type: Annotated[str, typer.Option("--type", help="The artifact type id, e.g. report.")],
    artifact_id: Annotated[str | None, typer.Option("--id", help="Choose the artifact id.")] = None,
    task_id: Annotated[str | None, typer.Option("--task", help="The task it was produced for.")] = None,
    op_id: OpId = None,
) -> None:
    """Register FILE's content as version 1 of a new artifact owned by the acting agent."""
    with invocation(ctx, acting=True) as run:
        run.embedded_only("pmw artifacts register (its content is bytes)")
        content = read_file(file)
        run.show(run.world.register_artifact(run.actor, artifact_type, content, artifact_id=artifact_id,
                                             task_id=task_id, op_id=op_id))


@group.command("version")
def version(ctx: typer.Context, artifact_id: ArtifactId, file: File, expect_version: ExpectVersion = None,
            op_id: OpId = None) -> None:
    """Commit FILE's content as the artifact's next version."""
    with invocation(ctx, acting=True) as run:
        run.embedded_only("pmw artifacts version (its content is bytes)")
        content = read_file(file)
        run.show(run.world.new_artifact_version(run.actor, artifact_id, content,
                                                expected_version=expect_version, op_id=op_id))


@group.command("show")
def show(ctx: typer.Context, artifact_id: ArtifactId) -> None:
    """Show an artifact's registry entry (head version)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_artifact(artifact_id, actor=run.actor))


@group.command("versions")
def versions(ctx: typer.Context, artifact_id: ArtifactId) -> None:
    """List an artifact's versions."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.artifact_versions(artifact_id, actor=run.actor))


@group.command("get")
def get(
    ctx: typer.Context,
    artifact_id: ArtifactId,
    version_: Annotated[int | None, typer.Option("--version", help="Default: the head version.")] = None,
    out: Annotated[Path | None, typer.Option("--out", dir_okay=False, help="Write the content here.")] = None,
) -> None:
    """Read verified content: to --out (then show the version), else to stdout
    (with --json: the version and ``content_base64``)."""
    with invocation(ctx, acting=True) as run:
        run.embedded_only("pmw artifacts get (its content is bytes)")
        content = run.world.read_artifact(artifact_id, version_, actor=run.actor)
        if out is not None:
            write_file(out, content.content)
            run.show(content.artifact)
        else:
            print_content(run, content)


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``; failure is ``InvalidInput`` naming --out."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise InvalidInput("--out", f"cannot write {str(path)!r}: {exc.strerror}") from None


def print_content(run: Run, content: "ArtifactContent") -> None:
    """Raw bytes on stdout, or (``--json``) the version and the base64 content."""
    if run.options.json:
        run.show({"artifact": content.artifact.model_dump(mode="json"),
                  "content_base64": base64.b64encode(content.content).decode()})
    else:
        typer.echo(content.content, nl=False)
