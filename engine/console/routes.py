"""The console's routes under ``/console`` on ``pmw serve``'s app (``mount(app, service)``).

Every page but the sign-in form needs a token (the session cookie set at sign-in, or ``Authorization:
Bearer``) proven as the API proves it, and a governor or reviewer (``engine.console.viewer``): refusals have
the API's statuses (401, 403). Every state-changing form (sign-in, sign-out, deploy, rollback, approve, deny)
carries a CSRF secret checked on the server before anything is read: the session's, or, for the sign-in
form, a double-submit cookie. Actions are the calls any client makes (``GovernanceCalls.reload``,
``World.approve``, ``World.deny_approval``), so the PDP, the token's scope and the gateway refuse what
they refuse elsewhere (a reviewer's deploy is ``PolicyDenied``).

The session cookie is HttpOnly, SameSite=Strict, ``Secure`` when the request came over https, and path
``/console``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from engine.console import page_data
from engine.console.calls import PrincipalCalls, Refused, as_principal
from engine.console.pages import HEADERS, STATIC, refusal, render, status_of
from engine.console.policy_files import rollback_dir
from engine.console.reports import list_runs, report_file, report_metrics, report_text, run_of
from engine.console.sessions import COOKIE, PRE_COOKIE, SessionStore, check_csrf, new_secret
from engine.console.viewer import Viewer, standing_of, viewer_of
from engine.errors import ApprovalInvalid, InvalidInput, NotFound, PMWError
from engine.service.http_app import MAX_BODY_BYTES, body_of

if TYPE_CHECKING:
    from engine.service.host import Service

PREFIX = "/console"
STATIC_FILES = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
MAX_FORM_BYTES = min(MAX_BODY_BYTES, 64 * 1024)


class Console:
    """The console of one service: its sessions and its reports directory."""

    def __init__(self, service: Service, reports: Path) -> None:
        self.service = service
        self.sessions = SessionStore()
        self.reports = reports

    async def viewer(self, request: Request) -> Viewer:
        return await to_thread.run_sync(viewer_of, request, self.service.dispatch, self.sessions)

    async def page(self, request: Request, template: str, read: Callable[[PrincipalCalls], dict[str, Any]],
                   status: int = 200, **extra: Any) -> Response:
        """``template`` with what ``read`` gathers as the request's viewer (refusals as the API answers them)."""
        try:
            viewer = await self.viewer(request)
            context = await to_thread.run_sync(as_principal, self.service, viewer.principal, read)
        except PMWError as exc:
            return self.refused(exc)
        return render(template, status, viewer=viewer, **context, **extra)

    def refused(self, exc: PMWError) -> Response:
        """A refusal page; a 401 is the sign-in form with a fresh double-submit secret."""
        pre = new_secret()
        answer = refusal(exc, pre_csrf=pre)
        if answer.status_code == 401:
            set_cookie(answer, PRE_COOKIE, pre, secure=False)
        return answer


def set_cookie(response: Response, name: str, value: str, *, secure: bool) -> None:
    response.set_cookie(name, value, httponly=True, samesite="strict", secure=secure, path=PREFIX)


async def form_of(request: Request) -> dict[str, str]:
    """A urlencoded form body (bounded), its last value per field."""
    from urllib.parse import parse_qsl

    raw = await body_of(request)
    if len(raw) > MAX_FORM_BYTES:
        raise InvalidInput("body", f"a console form is at most {MAX_FORM_BYTES} bytes")
    try:
        return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput("body", f"not a form: {exc}"[:200]) from None


def query_of(request: Request) -> dict[str, str]:
    return {k: v[:2000] for k, v in request.query_params.items()}


def mount(app: FastAPI, service: Service) -> None:
    """Add the console's routes to ``app``."""
    console = Console(service, service.settings.console_reports)  # PMW_CONSOLE_REPORTS
    _mount_sign_in(app, console)
    _mount_policies(app, console)
    _mount_pages(app, console)
    _mount_approvals(app, console)
    _mount_reports(app, console)

    @app.get(PREFIX + "/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in STATIC_FILES:
            return console.refused(NotFound("console file", name[:100]))
        return FileResponse(STATIC / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"})


def _mount_sign_in(app: FastAPI, console: Console) -> None:
    @app.get(PREFIX, include_in_schema=False)
    @app.get(PREFIX + "/", include_in_schema=False)
    async def home(request: Request) -> Response:
        try:
            await console.viewer(request)
        except PMWError:
            return RedirectResponse(PREFIX + "/sign-in", status_code=303, headers=HEADERS)
        return RedirectResponse(PREFIX + "/policies", status_code=303, headers=HEADERS)

    @app.get(PREFIX + "/sign-in", include_in_schema=False)
    async def sign_in_form() -> Response:
        pre = new_secret()
        answer = render("sign_in.html", pre_csrf=pre, error=None, page="sign-in")
        set_cookie(answer, PRE_COOKIE, pre, secure=False)
        return answer

    @app.post(PREFIX + "/sign-in", include_in_schema=False)
    async def sign_in(request: Request) -> Response:
        try:
            form = await form_of(request)
            check_csrf(request.cookies.get(PRE_COOKIE), form.get("csrf"))
            token = form.get("token", "").strip()
            dispatch = console.service.dispatch
            principal = await to_thread.run_sync(dispatch.principal, token)
            await to_thread.run_sync(standing_of, dispatch, principal)
        except PMWError as exc:
            return console.refused(exc)
        session = console.sessions.open(token, principal.token_id)
        answer = RedirectResponse(PREFIX + "/policies", status_code=303, headers=HEADERS)
        set_cookie(answer, COOKIE, session.session_id, secure=request.url.scheme == "https")
        answer.delete_cookie(PRE_COOKIE, path=PREFIX)
        return answer

    @app.post(PREFIX + "/sign-out", include_in_schema=False)
    async def sign_out(request: Request) -> Response:
        try:
            viewer = await console.viewer(request)
            viewer.check_form((await form_of(request)).get("csrf"))
        except PMWError as exc:
            return console.refused(exc)
        if viewer.session is not None:
            console.sessions.close(viewer.session.session_id)
        answer = RedirectResponse(PREFIX + "/sign-in", status_code=303, headers=HEADERS)
        answer.delete_cookie(COOKIE, path=PREFIX)
        return answer


def _mount_policies(app: FastAPI, console: Console) -> None:
    @app.get(PREFIX + "/policies", include_in_schema=False)
    async def policies(request: Request) -> Response:
        candidate = query_of(request).get("candidate")
        return await console.page(request, "policies.html", lambda c: page_data.policies(c, candidate))

    async def act(request: Request, work: Callable[[PrincipalCalls, dict[str, str]], Any], what: str) -> Response:
        """A policy action: CSRF first, then ``work`` as the viewer; the policies page with its outcome."""
        try:
            viewer = await console.viewer(request)
            form = await form_of(request)
            viewer.check_form(form.get("csrf"))
        except PMWError as exc:
            return console.refused(exc)

        def run(calls: PrincipalCalls) -> dict[str, Any]:
            try:
                notice: Any = {"what": what, "report": work(calls, form)}
                status = 200
            except PMWError as exc:
                notice, status = {"what": what, "refused": Refused(exc.code, exc.message)}, status_of(exc)
            context = page_data.policies(calls, form.get("candidate") or None)
            return {**context, "notice": notice, "_status": status}
        try:
            context = await to_thread.run_sync(as_principal, console.service, viewer.principal, run)
        except PMWError as exc:
            return console.refused(exc)
        status = context.pop("_status")
        return render("policies.html", status, viewer=viewer, **context)

    @app.post(PREFIX + "/policies/deploy", include_in_schema=False)
    async def deploy(request: Request) -> Response:
        return await act(request, lambda c, form: c.governance("reload", source=form.get("candidate", "")), "deploy")

    @app.post(PREFIX + "/policies/rollback", include_in_schema=False)
    async def rollback(request: Request) -> Response:
        def work(calls: PrincipalCalls, form: dict[str, str]) -> Any:
            history = calls.governance("history", limit=100)
            target = rollback_dir(page_data.deploy_root(calls), form.get("epoch", ""), {h.epoch for h in history})
            return calls.governance("reload", source=str(target))
        return await act(request, work, "rollback")


def _mount_pages(app: FastAPI, console: Console) -> None:
    @app.get(PREFIX + "/decisions", include_in_schema=False)
    async def decisions(request: Request) -> Response:
        query = query_of(request)
        return await console.page(request, "decisions.html", lambda c: page_data.decisions(c, query))

    @app.get(PREFIX + "/explain", include_in_schema=False)
    async def explain(request: Request) -> Response:
        query = query_of(request)
        return await console.page(request, "explain.html", lambda c: page_data.explain(c, query))

    @app.get(PREFIX + "/world", include_in_schema=False)
    async def world(request: Request) -> Response:
        return await console.page(request, "world.html", page_data.world)

    @app.get(PREFIX + "/topology", include_in_schema=False)
    async def topology(request: Request) -> Response:
        query = query_of(request)
        return await console.page(request, "topology.html", lambda c: page_data.topology(c, query))


def _mount_approvals(app: FastAPI, console: Console) -> None:
    @app.get(PREFIX + "/approvals", include_in_schema=False)
    async def approvals(request: Request) -> Response:
        return await console.page(request, "approvals.html", page_data.approvals)

    async def decide(request: Request, work: Callable[[PrincipalCalls, dict[str, str]], Any], done: str) -> Response:
        """A governor's decision on a pending approval: the page again, with the outcome (``done``) or the
        refusal."""
        try:
            viewer = await console.viewer(request)
            form = await form_of(request)
            viewer.check_form(form.get("csrf"))
        except PMWError as exc:
            return console.refused(exc)

        def run(calls: PrincipalCalls) -> dict[str, Any]:
            try:
                notice: Any = {done: work(calls, form)}
                status = 200
            except PMWError as exc:
                notice, status = {"refused": Refused(exc.code, exc.message)}, status_of(exc)
            return {**page_data.approvals(calls), "notice": notice, "_status": status}
        try:
            context = await to_thread.run_sync(as_principal, console.service, viewer.principal, run)
        except PMWError as exc:
            return console.refused(exc)
        status = context.pop("_status")
        return render("approvals.html", status, viewer=viewer, **context)

    @app.post(PREFIX + "/approvals/approve", include_in_schema=False)
    async def approve(request: Request) -> Response:
        return await decide(request, approve_as_seen, "approved")

    @app.post(PREFIX + "/approvals/deny", include_in_schema=False)
    async def deny(request: Request) -> Response:
        return await decide(request, deny_as_seen, "denied")


def check_as_seen(calls: PrincipalCalls, form: dict[str, str]) -> str:
    """The id of the approval the governor saw, still pending with the action hash the page showed under
    the policy epoch the page showed (else ``ApprovalInvalid``)."""
    approval_id = form.get("approval_id", "")
    approval = calls.world("get_approval", approval_id=approval_id)
    current = calls.world("current_policy_epoch")
    epoch_now = current.epoch if current is not None else ""
    problems = [
        (approval.status.value != "pending", f"approval is {approval.status.value}"),
        (approval.action_hash != form.get("action_hash"), "the action's hash is not the one shown"),
        (epoch_now != form.get("policy_epoch"), f"the policy epoch is now {epoch_now}, not the one shown"),
    ]
    for failed, reason in problems:
        if failed:
            raise ApprovalInvalid(calls.principal.agent_id, approval_id, reason)
    return approval_id


def approve_as_seen(calls: PrincipalCalls, form: dict[str, str]) -> Any:
    """``World.approve`` of the approval the governor saw (:func:`check_as_seen`; the approval binds that
    epoch); the approval's expiry is ``ttl_seconds`` from now."""
    approval_id = check_as_seen(calls, form)
    ttl = form.get("ttl_seconds") or "3600"
    try:
        seconds = float(ttl)
    except ValueError:
        raise InvalidInput("ttl_seconds", f"{ttl[:20]!r} is not a number of seconds") from None
    return calls.world("approve", approval_id=approval_id, ttl_seconds=seconds)


def deny_as_seen(calls: PrincipalCalls, form: dict[str, str]) -> Any:
    """``World.deny_approval`` of the approval the governor saw (:func:`check_as_seen`): rejected for good,
    the requester's invocation then fails with ``approval_invalid``."""
    return calls.world("deny_approval", approval_id=check_as_seen(calls, form))


def _mount_reports(app: FastAPI, console: Console) -> None:
    @app.get(PREFIX + "/reports", include_in_schema=False)
    async def reports(request: Request) -> Response:
        root = console.reports
        return await console.page(request, "reports.html", lambda _c: {"runs": list_runs(root), "root": str(root)})

    @app.get(PREFIX + "/reports/{run}", include_in_schema=False)
    async def report(request: Request, run: str) -> Response:
        root = console.reports

        def read(_calls: PrincipalCalls) -> dict[str, Any]:
            found = run_of(root, run)
            text = report_text(root, run, "report.md") if "report.md" in found.files else ""
            return {"run": found, "markdown": text, "metrics": report_metrics(root, run)}
        return await console.page(request, "report.html", read)

    @app.get(PREFIX + "/reports/{run}/{name}", include_in_schema=False)
    async def report_asset(request: Request, run: str, name: str) -> Response:
        try:
            await console.viewer(request)
            path, media = report_file(console.reports, run, name)
        except PMWError as exc:
            return console.refused(exc)
        headers = {**HEADERS, "Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self'; "
                                                         "style-src 'unsafe-inline'"}
        return FileResponse(path, media_type=media, headers=headers)


__all__ = ["PREFIX", "Console", "approve_as_seen", "check_as_seen", "deny_as_seen", "mount"]
