"""``pmw mcp``: PMW's MCP server over stdio (``engine.service.mcp_stdio``), one line in a desktop client's
configuration."""

import os
from typing import Annotated

import typer

from engine.cli.runtime import invocation


def mcp(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Option(
        "--server", metavar="URL", help="The pmw serve to call (default: the global --server / PMW_SERVER); "
                                        "without one the world of --db is opened here.")] = None,
) -> None:
    """Serve PMW's MCP tools and resources on stdin/stdout (JSON-RPC only on stdout; logs on stderr) as the
    agent of PMW_TOKEN (or, with a server, of the credentials file's token for it). With --server /
    PMW_SERVER every call goes to that server; otherwise the world of --db is opened here with its own PDP
    and the token is checked against it. A missing or refused token exits 10 before anything is served."""
    with invocation(ctx) as run:
        from engine.service.mcp_stdio import log_to_stderr, serve_embedded, serve_remote

        log_to_stderr()
        url = server or run.options.server
        if url:
            from engine.client.credentials import token_for
            from engine.client.http import ServerClient

            ServerClient(url, None)  # a bad URL is refused (exit 3) before any token is looked up
            serve_remote(url, token_for(url))
        else:
            serve_embedded(run.settings(), os.environ.get("PMW_TOKEN") or None)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
