"""Where a client's token comes from: ``PMW_TOKEN``, else the credentials file.

The credentials file (``PMW_CREDENTIALS``, default ``~/.config/pmw/credentials.json``, mode 600) maps
server URLs to tokens: ``{"servers": {"http://127.0.0.1:8765": "pmw_tok_..._..."}}``. ``pmw login`` writes
it. A file readable by others is refused (the token is a password).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from engine.errors import InvalidInput

DEFAULT_PATH = Path("~/.config/pmw/credentials.json")


def credentials_path() -> Path:
    return Path(os.environ.get("PMW_CREDENTIALS") or DEFAULT_PATH).expanduser()


def _key(server: str) -> str:
    return server.rstrip("/")


def read_credentials(path: Path | None = None) -> dict[str, str]:
    """The file's server -> token map (``{}`` when there is no file). A file others may read, or one that
    is not the expected JSON, is ``InvalidInput`` naming it."""
    path = path or credentials_path()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return {}
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInput("PMW_CREDENTIALS", f"{path} is readable by others: chmod 600 it (it holds tokens)")
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput("PMW_CREDENTIALS", f"{path} is not a credentials file: {exc}") from None
    servers = found.get("servers") if isinstance(found, dict) else None
    if not isinstance(servers, dict) or not all(isinstance(v, str) for v in servers.values()):
        raise InvalidInput("PMW_CREDENTIALS", f'{path}: expected {{"servers": {{"URL": "TOKEN"}}}}')
    return {_key(str(k)): v for k, v in servers.items()}


def token_for(server: str) -> str | None:
    """``PMW_TOKEN`` if set, else the credentials file's token for ``server`` (None: no token; the server
    then answers 401)."""
    token = os.environ.get("PMW_TOKEN")
    if token:
        return token
    return read_credentials().get(_key(server))


def save_token(server: str, token: str, path: Path | None = None) -> Path:
    """Record ``token`` for ``server`` in the credentials file (created 600, its directory 700)."""
    path = path or credentials_path()
    servers = read_credentials(path)
    servers[_key(server)] = token
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"servers": servers}, handle, indent=2, sort_keys=True)
    tmp.replace(path)
    return path


__all__ = ["credentials_path", "read_credentials", "save_token", "token_for"]
