"""One door for every transport: a request's token, proven, becomes the principal of one call of the World
(or of another facade), made one at a time.

Every transport of ``pmw serve`` (the ``/v1`` API, the REST resources, the MCP tools, the SSE streams) and
``pmw mcp`` on an embedded world go through a :class:`Dispatcher`: :meth:`Dispatcher.run` authenticates the
bearer token against the store (``engine.auth.tokens``: every call, never from a cache) and runs the work
under the one lock of the world,
so that a call is decided and committed before the next begins (what one SQLite writer allows anyway). A
write refused because another process reloaded the policy (``PolicyEpochChanged``) is decided again once,
under the new epoch: nothing of the refused write was committed. :meth:`Dispatcher.world_call` binds a
call's arguments with :func:`engine.service.calls.bind` (the principal forced from the token) and invokes
it. Nothing here knows a wire format: results are the World's own models, errors its own typed errors.

:meth:`Dispatcher.gate` is the check a transport makes before it reads a request's body, on the event loop:
a proof made from the store within the last second (``engine.auth.tokens.ProofCache``; out at once when this
process revokes a token or changes an agent), else None and the transport proves the token on a worker
thread (:meth:`Dispatcher.principal`). It spares a request one trip to a thread; it never decides a call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from engine.auth.tokens import ProofCache, authenticate
from engine.errors import PolicyEpochChanged, Unauthenticated
from engine.models.tokens import TokenPrincipal
from engine.service.calls import WORLD_CALLS, bind, invoke, spec_of

if TYPE_CHECKING:
    from engine.runtime import Runtime

T = TypeVar("T")


class Dispatcher:
    """Calls of one runtime's world, one at a time, each as the principal its token proves."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.lock = threading.Lock()
        #: recent proofs, for :meth:`gate` only (stale once this process commits a token or agent change)
        self.proofs = ProofCache()
        runtime.store.on_commit(self.proofs.commit_hook)

    def gate(self, token: str | None) -> TokenPrincipal | None:
        """Who ``token`` was proven to be from the store within the last second, with nothing of it revoked or
        changed by this process since; None: not known, prove it (:meth:`principal`). No store read: safe on
        the event loop. For the check before a body is read only: a call is made with :meth:`run`, which
        proves the token from the store again (a revocation by another process bites on the next call)."""
        return self.proofs.get(token, self.runtime.book.clock.now_us())

    def principal(self, token: str | None) -> TokenPrincipal:
        """The principal ``token`` proves now (``Unauthenticated`` when it proves nothing). Reads only, on
        the calling thread's own connection, outside the world's lock: a caller without a valid token never
        waits for (nor delays) another's call."""
        return self._authenticate(token)

    def run(self, token: str | None, work: Callable[[TokenPrincipal], T]) -> T:
        """Authenticate ``token`` (outside the lock), then ``work(principal)`` under the world's lock; a
        write refused for a policy reloaded elsewhere is decided once more under the new epoch. Blocking: call
        it from a worker thread in async code. Errors pass unchanged (typed ``PMWError`` s). A token revoked
        between its check and the work is refused by the next call (the check reads the store each time)."""
        return self.run_as(self._authenticate(token), work)

    def run_as(self, principal: TokenPrincipal, work: Callable[[TokenPrincipal], T]) -> T:
        """``work(principal)`` under the world's lock for a principal :meth:`principal` has just proven (a
        transport that proves the token before it reads the request's body); as :meth:`run` otherwise."""
        with self.lock:
            try:
                return work(principal)
            except PolicyEpochChanged:
                self.runtime.follow_policy()
                return work(principal)

    def world_call(self, principal: TokenPrincipal, name: str, arguments: Mapping[str, Any],
                   positional: Sequence[Any] = ()) -> Any:
        """``World.<name>`` with ``arguments`` bound for ``principal`` (``engine.service.calls``): an unknown
        or private call is ``NotFound``; a principal parameter naming another agent ``NotPermitted``; bad
        arguments ``InvalidInput``; all before anything is read. Call it inside :meth:`run`'s work."""
        spec = spec_of(WORLD_CALLS, "world", name)
        world = self.runtime.world
        return invoke(world, spec, bind(spec, principal, arguments, positional, target=world))

    def _authenticate(self, token: str | None) -> TokenPrincipal:
        runtime, proofs = self.runtime, self.proofs
        epoch, proven_at = proofs.epoch, proofs.stamp()  # before the read: a change committed meanwhile is seen
        try:
            principal = authenticate(runtime.store.read, token, runtime.book.clock.now_us())
        except Unauthenticated:
            proofs.forget(token)  # refused from the store: the gate forgets it too
            raise
        if token is not None:
            proofs.put(token, principal, proven_at, epoch)
        return principal


__all__ = ["Dispatcher"]
