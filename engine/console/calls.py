"""The console's calls: every read and action of a page goes through the service's one door
(``Dispatcher``), bound for the signed-in principal with the same ``bind`` the API uses, so the PDP, the
token's scope and the gateway decide it exactly as they decide any client's call.

:class:`PrincipalCalls` is used inside ``Dispatcher.run_as`` (the world's lock held), on a worker thread.
:func:`section` turns a refused read into what the page shows instead of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import PMWError
from engine.models.tokens import TokenPrincipal
from engine.service.calls import bind, invoke, spec_of

if TYPE_CHECKING:
    from engine.service.host import Service

T = TypeVar("T")


@dataclass(frozen=True)
class Refused:
    """A part of a page its viewer may not see (or that failed): the error's code and message."""

    code: str
    message: str


@dataclass(frozen=True)
class PrincipalCalls:
    """World and governance calls as one principal (call them under the dispatcher's lock)."""

    service: Service
    principal: TokenPrincipal

    def world(self, name: str, **arguments: Any) -> Any:
        """``World.<name>(**arguments)`` as the principal (``Dispatcher.world_call``)."""
        return self.service.dispatch.world_call(self.principal, name, arguments)

    def governance(self, name: str, **arguments: Any) -> Any:
        """``GovernanceCalls.<name>(**arguments)`` as the principal, bound as ``POST /v1/governance`` binds it."""
        facade = self.service.governance
        spec = spec_of(self.service.governance_calls, "governance", name)
        return invoke(facade, spec, bind(spec, self.principal, arguments, target=facade))


def section(read: Callable[[], T]) -> T | Refused:
    """``read()``, or what refused it (a PMW error: the PDP's denial, a missing object...)."""
    try:
        return read()
    except PMWError as exc:
        return Refused(exc.code, exc.message)


def as_principal(service: Service, principal: TokenPrincipal, work: Callable[[PrincipalCalls], T]) -> T:
    """``work`` with the principal's calls, under the world's lock (blocking: from a worker thread)."""
    return service.dispatch.run_as(principal, lambda p: work(PrincipalCalls(service, p)))


__all__ = ["PrincipalCalls", "Refused", "as_principal", "section"]
