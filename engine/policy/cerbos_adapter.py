"""The only module that talks to Cerbos: gRPC with an explicit deadline on every call.

Any failure to get a decision (connection refused, deadline exceeded, an error status) is
:class:`~engine.errors.PolicyUnavailable`: the caller fails closed. Attributes the PDP's schemas reject are
:class:`~engine.errors.PolicyInvalidRequest`, never a silent deny. Deadlines are per call (the SDK's
service-config timeout misfires with current grpcio, see notes/cerbos.md §5). A call after :meth:`CerbosPdp.close`
is :class:`~engine.errors.Closed` (grpc's own ``ValueError`` for a closed channel never leaks).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from typing import Any

import grpc
from cerbos.effect.v1 import effect_pb2
from cerbos.engine.v1 import engine_pb2
from cerbos.request.v1 import request_pb2
from cerbos.svc.v1 import svc_pb2_grpc
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import NULL_VALUE, ListValue, Value

from engine.errors import Closed, PolicyInvalidRequest, PolicyUnavailable
from engine.policy.model import (
    Decision,
    PlanExpression,
    PlanFilter,
    PlanOperand,
    PlanValue,
    PlanVariable,
    PrincipalRef,
    ResourceRef,
)
from engine.policy.pdp_process import PdpAddress

MAX_RESOURCES_PER_REQUEST = 500
EPOCH_RULE = "#epoch-marker"
_CLOSED = "policy decision point client"


def _value(v: Any) -> Value:
    """A protobuf Value for a JSON value. Built directly (twice as fast as ParseDict); an empty list is
    constructed as a ListValue so the oneof is set (a mutated empty list would read as null, which the
    schemas reject: notes/cerbos.md §3)."""
    if isinstance(v, bool):
        return Value(bool_value=v)
    if isinstance(v, int | float):
        return Value(number_value=v)
    if isinstance(v, str):
        return Value(string_value=v)
    if isinstance(v, list):
        return Value(list_value=ListValue(values=[_value(x) for x in v]))
    if v is None:
        return Value(null_value=NULL_VALUE)
    return ParseDict(v, Value())


def _principal(p: PrincipalRef) -> engine_pb2.Principal:
    return engine_pb2.Principal(id=p.id, roles=sorted(p.roles), attr={k: _value(v) for k, v in p.attr.items()})


def _resource(r: ResourceRef) -> engine_pb2.Resource:
    return engine_pb2.Resource(kind=r.kind, id=r.id, attr={k: _value(v) for k, v in r.attr.items()})


def _operand(op: Any) -> PlanOperand:
    which = op.WhichOneof("node")
    if which == "expression":
        return PlanExpression(operator=op.expression.operator,
                              operands=[_operand(o) for o in op.expression.operands])
    if which == "variable":
        return PlanVariable(name=op.variable)
    return PlanValue(value=MessageToDict(op.value))


def _translated(exc: grpc.RpcError) -> PolicyInvalidRequest | PolicyUnavailable:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return PolicyInvalidRequest("policy request", str(details))
    return PolicyUnavailable(f"{code.name if code else 'error'}: {details}")


class CerbosPdp:
    """A gRPC client for one PDP address. Thread-safe (one channel, per-call deadlines).

    ``wait_for_ready`` (default): a call waits, up to its deadline, for a channel that is reconnecting (a
    supervised PDP restarting on the same ports). False: a call to a PDP that is known unreachable fails at
    once (``PolicyUnavailable``), which is what a pool of replicas wants, to fail over without waiting."""

    def __init__(self, address: PdpAddress, *, timeout_s: float = 2.0, wait_for_ready: bool = True) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.wait_for_ready = wait_for_ready
        # Reconnect quickly after a PDP restart; each call waits for a ready channel only until its deadline.
        self._channel = grpc.insecure_channel(address.grpc, options=[
            ("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
            ("grpc.max_reconnect_backoff_ms", 500)])
        self._svc = svc_pb2_grpc.CerbosServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._admin = svc_pb2_grpc.CerbosAdminServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._closed = False

    def close(self) -> None:
        """Close the channel; every later call raises :class:`~engine.errors.Closed`. Idempotent."""
        self._closed = True
        self._channel.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _call(self, method: Any, request: Any, **kw: Any) -> Any:
        if self._closed:
            raise Closed(_CLOSED)
        try:
            return method(request, timeout=self.timeout_s, wait_for_ready=self.wait_for_ready, **kw)
        except grpc.RpcError as exc:
            if self._closed:  # cancelled by close() while in flight
                raise Closed(_CLOSED) from exc
            raise _translated(exc) from exc
        except ValueError as exc:  # grpc: "Cannot invoke RPC on closed channel!" (closed by another thread)
            if self._closed:
                raise Closed(_CLOSED) from exc
            raise

    def check(self, principal: PrincipalRef, resources: Sequence[tuple[ResourceRef, Sequence[str]]]
              ) -> list[Decision]:
        """One decision per resource for the given actions, in order (chunked by the PDP's limit)."""
        out: list[Decision] = []
        p = _principal(principal)
        for start in range(0, len(resources), MAX_RESOURCES_PER_REQUEST):
            chunk = resources[start:start + MAX_RESOURCES_PER_REQUEST]
            req = request_pb2.CheckResourcesRequest(
                request_id=str(uuid.uuid4()), principal=p, include_meta=True,
                resources=[request_pb2.CheckResourcesRequest.ResourceEntry(actions=list(acts), resource=_resource(r))
                           for r, acts in chunk])
            resp = self._call(self._svc.CheckResources, req)
            out += [self._decision(entry, r) for entry, (r, _) in zip(resp.results, chunk, strict=True)]
        return out

    @staticmethod
    def _decision(entry: Any, resource: ResourceRef) -> Decision:
        if entry.validation_errors:
            problems = "; ".join(f"{e.path or '/'}: {e.message} ({effect_source(e.source)})"
                                 for e in entry.validation_errors)
            raise PolicyInvalidRequest(f"{resource.kind} attributes", problems)
        epoch = next((o.val.string_value for o in entry.outputs if o.src.endswith(EPOCH_RULE)), None)
        return Decision(kind=resource.kind, id=resource.id,
                        actions={a: e == effect_pb2.EFFECT_ALLOW for a, e in entry.actions.items()},
                        epoch=epoch or None,
                        derived_roles=sorted(entry.meta.effective_derived_roles))

    def plan(self, principal: PrincipalRef, kind: str, action: str) -> PlanFilter:
        """The objects of ``kind`` on which ``principal`` may do ``action``, as a filter."""
        return self.plans(principal, [(kind, action)])[0]

    def plans(self, principal: PrincipalRef, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        """One plan per (kind, action), the requests in flight together (one round trip of latency)."""
        p = _principal(principal)
        reqs = [request_pb2.PlanResourcesRequest(
            request_id=str(uuid.uuid4()), action=action, principal=p,
            resource=engine_pb2.PlanResourcesInput.Resource(kind=kind)) for kind, action in asked]
        if len(reqs) == 1:
            return [self._plan_filter(self._call(self._svc.PlanResources, reqs[0]))]
        futures = [self._call(self._svc.PlanResources.future, r) for r in reqs]
        return [self._plan_filter(self._wait(f)) for f in futures]

    def _wait(self, future: Any) -> Any:
        try:
            return future.result()
        except grpc.RpcError as exc:
            if self._closed:
                raise Closed(_CLOSED) from exc
            raise _translated(exc) from exc

    @staticmethod
    def _plan_filter(resp: Any) -> PlanFilter:
        if resp.validation_errors:
            raise PolicyInvalidRequest("principal attributes", "; ".join(e.message for e in resp.validation_errors))
        f = resp.filter
        if f.kind == engine_pb2.PlanResourcesFilter.KIND_ALWAYS_ALLOWED:
            return PlanFilter(kind="always_allowed")
        if f.kind == engine_pb2.PlanResourcesFilter.KIND_CONDITIONAL:
            return PlanFilter(kind="conditional", condition=_operand(f.condition))
        return PlanFilter(kind="always_denied")

    def reload(self) -> None:
        """Ask the PDP to reload its policy store (admin API). Success says nothing about validity: a
        broken set keeps the old rules, so callers validate first and probe the epoch after."""
        user, password = self.address.admin_user, self.address.admin_password
        if not user or not password:
            raise PolicyUnavailable("this PDP has no admin credentials configured; cannot reload")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._call(self._admin.ReloadStore, request_pb2.ReloadStoreRequest(wait=True),
                   metadata=(("authorization", f"Basic {token}"),))


def effect_source(source: int) -> str:
    return {1: "principal", 2: "resource"}.get(int(source), "request")


__all__ = ["MAX_RESOURCES_PER_REQUEST", "CerbosPdp"]
