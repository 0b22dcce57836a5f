"""A server's queued wakes for one agent, as a wake feed for ``pmw mcp`` against that server.

:class:`RemoteWakeFeed` reads the agent's wake stream (``GET /v1/agents/{id}/wakes/stream``, through
``engine.client.sse.WakeStream``: resumed by ``Last-Event-ID`` when the connection drops) on one daemon
thread, once a listener is added, and tells its listeners of each wake, as the server's own feed does for
``/mcp`` (``engine.service.wake_feed``). The stream starts where the log is when it opens (earlier wakes
are not replayed: a subscriber reads its resources after subscribing). A refusal (a revoked or expired
token) ends it, logged on stderr; a server that went away is tried again every :data:`RETRY_S`.
"""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.client.http import ServerClient
from engine.errors import NotPermitted, PMWError, Unauthenticated

logger = logging.getLogger(__name__)
RETRY_S = 1.0
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class RemoteNotice:
    """A wake for ``agent_id`` was queued on the server (log position ``seq``, when the stream named it)."""

    agent_id: str
    seq: int | None = None


class RemoteWakeFeed:
    """``agent_id``'s wakes on the server at ``server``, read with ``token``."""

    def __init__(self, server: str, token: str, agent_id: str) -> None:
        self.server = server
        self.token = token
        self.agent_id = agent_id
        self._listeners: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None

    def add_listener(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Tell ``callback`` (on the feed's thread) of every wake from now on; the function returned removes
        it, and stops the stream once no listener is left."""
        with self._lock:
            self._listeners.append(callback)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pmw-mcp-wakes", daemon=True)
                self._thread.start()

        def remove() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)
                last = not self._listeners
            if last:
                self.stop()
        return remove

    def stop(self) -> None:
        """End the stream and its thread (bounded wait). Idempotent."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT_S)

    def _run(self) -> None:
        from engine.client.sse import WakeStream

        while not self._stop.is_set():
            stream = WakeStream(ServerClient(self.server, self.token), self.agent_id, models=False)
            self._stream = stream
            try:
                for _wake in stream:
                    if self._stop.is_set():
                        break
                    notice = RemoteNotice(self.agent_id, stream.last_seq)
                    with self._lock:
                        listeners = list(self._listeners)
                    for listener in listeners:
                        listener(notice)
            except (Unauthenticated, NotPermitted) as exc:
                logger.warning("the wake stream was refused (%s): no more wake notifications", exc.code)
                return
            except (PMWError, OSError, ValueError, http.client.HTTPException) as exc:
                logger.warning("the wake stream ended (%s); trying again", exc)
            finally:
                stream.close()
            self._stop.wait(RETRY_S)


__all__ = ["RemoteNotice", "RemoteWakeFeed"]
