"""One HTTP POST to a peer a stranger may run (a witness, a timestamp authority), bounded as a
whole in time and in the bytes read (LEDGER.md section 7, "Asking witnesses", "Timestamps").

A socket timeout bounds one read: a peer that answers a byte at a time, each within it, holds
the caller for ever. Here each exchange has one deadline over all of it (the name lookup, the
connection, TLS, the request, the status line, the headers, the body), and ``post_all`` runs
many at once under one deadline, so asking N peers takes as long as the slowest, never their
sum. An exchange still running at the deadline is cut (its socket shut down) and answered
``problem``; its thread ends at its next socket operation (one stuck in the system's name
resolver ends when the resolver gives up), without holding the caller. No redirect is
followed and no proxy is read from the environment. The answer is read up to ``limit + 1``
bytes, so a caller sees that it is over its limit without reading the rest.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

# What an exchange fails with: the socket, an answer that is not HTTP (http.client bounds its
# status line and headers: 65,536-byte lines, 100 headers), a URL whose port is no number.
_ERRORS: Final = (OSError, http.client.HTTPException, ValueError)


@dataclass(frozen=True, slots=True)
class Post:
    url: str  # http:// or https://, checked by the caller
    body: bytes
    media: str  # its Content-Type
    limit: int  # the answer's bytes read at most (one more is read to see it is over)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int = 0
    media: str = ""
    body: bytes = b""  # at most limit + 1 bytes
    problem: str | None = None  # no answer, and why: unreachable, refused, the deadline


class _Exchange:
    def __init__(self, post: Post, deadline: float) -> None:
        self.post = post
        self._deadline = deadline
        self.answer: Answer | None = None
        self.done = threading.Event()
        self._guard = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._cut = False

    def run(self) -> None:
        conn = None
        try:
            parts = urllib.parse.urlsplit(self.post.url)
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no time left")
            kind = (
                http.client.HTTPSConnection
                if parts.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = kind(parts.hostname or "", parts.port, timeout=remaining)
            with self._guard:
                if self._cut:
                    return
                self._conn = conn
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request(
                "POST", target, body=self.post.body, headers={"Content-Type": self.post.media}
            )
            response = conn.getresponse()
            body = response.read(self.post.limit + 1)
            self.answer = Answer(response.status, response.getheader("Content-Type") or "", body)
        except _ERRORS as exc:
            self.answer = Answer(problem=str(exc) or type(exc).__name__)
        finally:
            if conn is not None:
                conn.close()
            self.done.set()

    def cut(self) -> None:
        """Stop the exchange where it is: its socket is shut down, so a read blocked on it
        returns at once."""
        with self._guard:
            self._cut = True
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed


def post_all(posts: Sequence[Post], *, deadline: float) -> list[Answer]:
    """Every post's answer, all sent at once; ``deadline`` is a ``time.monotonic()`` value
    after which an unfinished exchange is cut and answered ``problem``."""
    exchanges = [_Exchange(post, deadline) for post in posts]
    for exchange in exchanges:
        threading.Thread(target=exchange.run, daemon=True).start()
    answers: list[Answer] = []
    for exchange in exchanges:
        exchange.done.wait(max(0.0, deadline - time.monotonic()))
        answer = exchange.answer if exchange.done.is_set() else None
        if answer is None:
            exchange.cut()
            answer = Answer(problem="no whole answer before the deadline")
        answers.append(answer)
    return answers


def post(request: Post, *, timeout: float) -> Answer:
    """One exchange, ``timeout`` seconds for all of it."""
    return post_all([request], deadline=time.monotonic() + timeout)[0]
