"""A TCP proxy between a service and PostgreSQL that can lose a claim's reply (or any reply).

"The claim committed but its rows never reached the worker" is the fault behind a job stuck
`claimed` while its worker lives (issue 12). A random `pg_terminate_backend` lands in that
window only by luck, so the chaos suite also routes the workers through this proxy: when armed,
it waits for the reply to a claim (a statement that sets `status = 'claimed'`), lets the server
finish it (the implicit transaction commits before ReadyForQuery), then drops that reply and
closes both sides, as a network that fails at the worst moment would.

It follows the PostgreSQL wire protocol only as far as it must: the untyped start-up packets,
then typed messages `type | int32 length | body`. Parse ('P') names the statements; Bind ('B')
says which one runs next; the server's reply runs until ReadyForQuery ('Z').
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from collections import deque
from dataclasses import dataclass, field

#: A claim sets the status to claimed; nothing else the worker runs does.
CLAIM_SQL = re.compile(rb"status\s*=\s*'claimed'", re.IGNORECASE)
#: Start-up requests answered by one byte before the real start-up packet.
SSL_REQUEST, GSSENC_REQUEST = 80877103, 80877104


@dataclass
class Cutter:
    upstream_host: str
    upstream_port: int
    cuts: int = 0
    #: Client connections accepted, those linked to PostgreSQL, those refused (PostgreSQL down),
    #: and links open now: when services stop reaching the database, these say where.
    accepted: int = 0
    connections: int = 0
    refused: int = 0
    open_links: int = 0
    _armed: bool = False
    _armed_any: bool = False
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def arm(self) -> None:
        """Lose the reply of the next claim that returns at least one job."""
        self._armed = True

    def arm_any(self) -> None:
        """Lose the reply of the next statement, whatever it is (a request's query)."""
        self._armed_any = True

    @property
    def armed(self) -> bool:
        return self._armed

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        writers = [client_w]
        try:
            try:
                server_r, server_w = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError:
                self.refused += 1
                return  # PostgreSQL is down: the client sees its connection closed
            writers.append(server_w)
            self.connections += 1
            self.open_links += 1
            link = _Link(self)
            try:
                with contextlib.suppress(OSError, asyncio.IncompleteReadError, _Cut):
                    await asyncio.gather(
                        link.client_to_server(client_r, server_w),
                        link.server_to_client(server_r, client_w),
                    )
            finally:
                self.open_links -= 1
        finally:
            for writer in writers:
                writer.close()
            for writer in writers:
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            self._tasks.discard(task)

    def _take_cut(self, is_claim: bool, rows: int) -> bool:
        if is_claim and self._armed and rows > 0:
            self._armed = False
        elif self._armed_any:
            self._armed_any = False
        else:
            return False
        self.cuts += 1
        return True


class _Cut(Exception):
    """This connection has been cut on purpose."""


@dataclass
class _Link:
    cutter: Cutter
    claim_statements: set[bytes] = field(default_factory=set)
    #: Replies the server still owes that may be cut, oldest first: whether each is a claim's.
    watched: deque[bool] = field(default_factory=deque)

    async def client_to_server(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        # Untyped start-up: SSL/GSS requests (answered by one byte), then the start-up packet.
        while True:
            head = await r.readexactly(8)
            length, code = struct.unpack("!ii", head)
            body = await r.readexactly(length - 8)
            w.write(head + body)
            await w.drain()
            if code not in (SSL_REQUEST, GSSENC_REQUEST):
                break
        while True:
            kind = await r.readexactly(1)
            (length,) = struct.unpack("!i", await r.readexactly(4))
            body = await r.readexactly(length - 4)
            if kind == b"P":  # Parse: statement name, query text
                name, _, rest = body.partition(b"\0")
                query = rest.partition(b"\0")[0]
                if CLAIM_SQL.search(query):
                    self.claim_statements.add(name)
                else:  # a name (the unnamed one above all) may be reused for another query
                    self.claim_statements.discard(name)
            elif kind == b"B":  # Bind: portal name, statement name
                statement = body.partition(b"\0")[2].partition(b"\0")[0]
                self._watch(statement in self.claim_statements)
            elif kind == b"Q":  # simple query protocol
                self._watch(bool(CLAIM_SQL.search(body)))
            w.write(kind + struct.pack("!i", length) + body)
            await w.drain()

    def _watch(self, is_claim: bool) -> None:
        # Only replies that may be cut are held back (until ReadyForQuery); the rest stream.
        if is_claim or self.cutter._armed_any:
            self.watched.append(is_claim)

    async def server_to_client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        # The one-byte answers to SSL/GSS requests come before any typed message.
        first = await r.readexactly(1)
        while first in (b"N", b"S", b"G"):
            w.write(first)
            await w.drain()
            first = await r.readexactly(1)
        pending = first
        held: list[bytes] = []
        rows = 0
        while True:
            kind = pending or await r.readexactly(1)
            pending = b""
            head = await r.readexactly(4)
            (length,) = struct.unpack("!i", head)
            message = kind + head + await r.readexactly(length - 4)
            if not self.watched:
                w.write(message)
                await w.drain()
                continue
            # Inside a watched reply: hold it until ReadyForQuery, when the statement's implicit
            # transaction has committed.
            held.append(message)
            if kind == b"D":
                rows += 1
            if kind == b"Z":
                is_claim = self.watched.popleft()
                if self.cutter._take_cut(is_claim, rows):
                    raise _Cut()
                w.write(b"".join(held))
                await w.drain()
                held, rows = [], 0


@contextlib.asynccontextmanager
async def running_cutter(host: str, port: int):  # type: ignore[no-untyped-def]
    cutter = Cutter(host, port)
    listen_port = await cutter.start()
    try:
        yield cutter, listen_port
    finally:
        await cutter.close()
