"""Which deployed policy set a runtime serves when it starts: the world's own, never the working tree.

A world's policy changes only by an explicit reload (``pmw policy reload``, which validates and deploys a
source directory). Every other start serves the last good deployment under ``<deploy root>/current``. The
store's record of activations is the authority on what is in force: if ``current`` points elsewhere (a
reload that deployed and then died before the PDP was seen on the new set and its activation recorded),
``current`` is repaired to the recorded epoch's deployment. Only a world with no deployment at all deploys
its configured source directory, once: its first deployment.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.policy.governance import Deployment, current_deployment, deploy

CURRENT = "current"


def point_current(deploy_root: Path, epoch: str) -> Deployment:
    """Make the deployed set ``epoch`` the one served: an atomic swap of the ``current`` symlink."""
    target = deploy_root / epoch
    if not target.is_dir():
        raise FileNotFoundError(f"no deployment of {epoch} under {deploy_root}")
    tmp_link = deploy_root / f".current-{os.getpid()}"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(target.name)
    tmp_link.replace(deploy_root / CURRENT)
    return Deployment(epoch=epoch, path=target)


def serving_deployment(deploy_root: Path, source: Path, recorded_epoch: str | None) -> tuple[Deployment, bool]:
    """The deployment a starting runtime serves, and whether it had to deploy ``source`` (a world's first
    deployment). ``recorded_epoch`` is the store's current epoch (None: no PDP has governed the world yet).

    - the recorded epoch's deployment exists: it is served (``current`` repaired to it if it pointed elsewhere);
    - else the last deployment under ``current`` is served (its epoch is then recorded by the caller);
    - else ``source`` is validated and deployed (``PolicyRejected`` if it fails; nothing changes then)."""
    current = current_deployment(deploy_root)
    if recorded_epoch is not None and (deploy_root / recorded_epoch).is_dir():
        if current is None or current.epoch != recorded_epoch:
            return point_current(deploy_root, recorded_epoch), False
        return current, False
    if current is not None:
        return current, False
    return deploy(source, deploy_root), True


__all__ = ["point_current", "serving_deployment"]
