"""One labgrid client session per coordinator and identity in this process (needs labgrid).

labgrid's own :class:`labgrid.remote.client.ClientSession` (its gRPC client) runs on an
event loop in one daemon thread of this process. The coordinator streams every place
and resource change to it; callers wait on those changes (a place allocated to a
reservation, a resource let go by its exporter) rather than polling, and every call is
bounded in time. What the coordinator sends is lab data, read as untrusted input by
:mod:`harness.lab.places` and :mod:`harness.lab.resources`: a session hands
out only copies, never labgrid's own objects.

A coordinator that goes away (a restart) ends the session's stream; the next call
connects again for at most :data:`RECONNECT_S` seconds, then fails with
:class:`CoordinatorLost`. Reservations live only in the coordinator's memory, so a
restart loses them: :attr:`LabSession.generation` tells a caller that it must reserve
again.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from harness.lab.identity import LabIdentity
from harness.transport.base import DeviceUnavailable

CALL_TIMEOUT_S = 30.0  # one request to the coordinator
RECONNECT_S = 30.0  # how long a coordinator that went away is tried again
DEFAULT_COORDINATOR = "127.0.0.1:20408"  # labgrid's own default
# labgrid's own keepalive settings for its client's channel (labgrid/remote/client.py)
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 7500),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.ping_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
]
_RETRY_CONNECT_S = 0.5  # between connection attempts to a coordinator that is down

T = TypeVar("T")


class LabgridError(DeviceUnavailable):
    """The coordinator refused a request or did not answer; the message is labgrid's."""


class CoordinatorLost(LabgridError):
    """The coordinator went away and did not come back within the reconnect time."""


@dataclass(frozen=True)
class Resource:
    """One exported resource, copied out of the session: its path, class and arguments."""

    exporter: str
    group: str
    name: str
    cls: str
    args: tuple[tuple[str, object], ...]
    acquired: str | None  # the place it is acquired for
    available: bool = True  # the exporter says the resource is there


@dataclass(frozen=True)
class RawPlace:
    """One place, copied out of the session as the coordinator sent it (unchecked)."""

    name: str
    tags: tuple[tuple[object, object], ...]
    comment: object
    acquired: object
    reservation: object
    matches: tuple[tuple[str, str, str, str | None], ...]  # exporter, group, cls, name
    acquired_resources: tuple[tuple[str, ...], ...]


def address_of(coordinator: str | None) -> str:
    """The coordinator's address: the profile's, else ``$LG_COORDINATOR``, else labgrid's
    default."""
    return coordinator or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """This process's labgrid event loop, in a daemon thread of its own (started once)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="labgrid", daemon=True).start()
            _loop = loop
        return _loop


def _run(coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
    future = asyncio.run_coroutine_threadsafe(coroutine, _event_loop())
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


class LabSession:
    """labgrid's client session against one coordinator as one identity, kept connected."""

    _sessions: ClassVar[dict[tuple[str, str], LabSession]] = {}
    _sessions_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, coordinator: str | None, identity: LabIdentity) -> None:
        self.coordinator = address_of(coordinator)
        self.identity = identity
        self.changed = threading.Condition()  # notified on every update from the coordinator
        self.generation = 0  # one more at each (re)connection
        self._updates = 0  # how many updates came, under ``changed``
        self._session: Any = None
        self._connect_lock = threading.Lock()

    @classmethod
    def of(cls, coordinator: str | None, identity: LabIdentity) -> LabSession:
        """The one session of this process for ``coordinator`` and ``identity``."""
        key = (address_of(coordinator), identity.owner)
        with cls._sessions_lock:
            if key not in cls._sessions:
                cls._sessions[key] = cls(coordinator, identity)
            return cls._sessions[key]

    # ---- the connection ----------------------------------------------------------------

    def notify(self) -> None:
        """Wake the waiters (every update does; so does a change of this process's own)."""
        with self.changed:
            self._updates += 1
            self.changed.notify_all()

    def connected(self) -> Any:
        """labgrid's session, connected (again) if the coordinator went away;
        :class:`CoordinatorLost` after :data:`RECONNECT_S` s without it."""
        with self._connect_lock:
            session = self._session
            if session is not None and not session.stopping.is_set():
                return session
            from labgrid.remote.client import Error

            deadline = time.monotonic() + RECONNECT_S
            while True:
                try:
                    self._session = _run(self._start(), CALL_TIMEOUT_S)
                    self.generation += 1
                    self.notify()
                    return self._session
                except (Error, OSError, TimeoutError) as exc:
                    if time.monotonic() + _RETRY_CONNECT_S > deadline:
                        raise CoordinatorLost(
                            f"labgrid coordinator {self.coordinator} did not answer within "
                            f"{RECONNECT_S:g} s ({type(exc).__name__}: {exc}); start it, or "
                            "give the right address (transport.labgrid.coordinator, "
                            "$LG_COORDINATOR)"
                        ) from None
                time.sleep(_RETRY_CONNECT_S)  # a coordinator that is down gives no notice

    async def _start(self) -> Any:
        import grpc
        from labgrid.remote import client  # labgrid is an extra
        from labgrid.remote.generated import labgrid_coordinator_pb2_grpc
        from labgrid.util.proxy import proxymanager

        notify, identity = self.notify, self.identity

        class Session(client.ClientSession):
            """labgrid's session as this identity, telling waiters of every update."""

            def __attrs_post_init__(self) -> None:
                super().__attrs_post_init__()
                # A connection of its own: the coordinator tells clients apart by their
                # peer address, so two identities of one process must not share one.
                options = [*_CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
                self.channel = grpc.aio.insecure_channel(target=self.address, options=options)
                self.stub = labgrid_coordinator_pb2_grpc.CoordinatorStub(self.channel)

            def gethostname(self) -> str:
                return identity.host

            def getuser(self) -> str:
                return identity.username

            async def on_place_changed(self, place_pb2: Any) -> None:
                await super().on_place_changed(place_pb2)
                notify()

            async def on_place_deleted(self, name: str) -> None:
                await super().on_place_deleted(name)
                notify()

            async def on_resource_changed(self, *args: Any) -> None:
                await super().on_resource_changed(*args)
                notify()

            async def message_pump(self) -> None:
                try:
                    await super().message_pump()
                finally:
                    notify()  # waiters see that the coordinator went away

        address = proxymanager.get_grpc_address(self.coordinator, default_port=20408)
        session = Session(address=address, loop=asyncio.get_running_loop())
        try:
            await session.start()
        except BaseException:
            await session.stop()
            await session.close()
            raise
        return session

    def lost(self) -> bool:
        """Whether the coordinator's stream ended (it went away) since the last connection."""
        session = self._session
        return session is not None and session.stopping.is_set()

    # ---- requests ----------------------------------------------------------------------

    def call(self, what: str, rpc: str, request: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """One request to the coordinator (``rpc`` a method of its gRPC stub), then a sync,
        so that this session has seen every update the request caused; labgrid's
        response. A coordinator that went away is connected again once."""
        import grpc

        for attempt in (1, 2):
            session = self.connected()
            try:
                return _run(self._request(session, rpc, request, timeout), timeout + 5.0)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and attempt == 1:
                    continue
                raise LabgridError(f"{self.coordinator}: {what}: {exc.details()}") from None
            except TimeoutError:
                raise LabgridError(
                    f"{self.coordinator}: {what}: no answer within {timeout:g} s"
                ) from None
        raise AssertionError("unreachable")

    @staticmethod
    async def _request(session: Any, rpc: str, request: Any, timeout: float) -> Any:
        response = await getattr(session.stub, rpc)(request, timeout=timeout)
        await session.sync_with_coordinator()
        return response

    def messages(self) -> Any:
        """labgrid's protocol messages (``labgrid_coordinator_pb2``)."""
        from labgrid.remote.generated import labgrid_coordinator_pb2

        return labgrid_coordinator_pb2

    def snapshot(self) -> tuple[list[RawPlace], list[Resource]]:
        """Copies of every place and resource as this session last heard of them."""
        session = self.connected()

        async def copy() -> tuple[list[RawPlace], list[Resource]]:
            return _copy_places(session.places), _copy_resources(session.resources)

        return _run(copy(), CALL_TIMEOUT_S)

    def wait_for(self, ready: Callable[[], T | None], deadline: float) -> T | None:
        """Wait for updates until ``ready()`` gives something (or ``deadline``, monotonic,
        passes: None). ``ready`` runs at once and after each update (outside the lock: it
        may ask the session, whose thread notifies)."""
        while True:
            with self.changed:
                seen = self._updates
            found = ready()
            remaining = deadline - time.monotonic()
            if found is not None or remaining <= 0:
                return found
            self.wait_update(seen, remaining)

    def wait_update(self, seen: int | None = None, timeout: float = 1.0) -> None:
        """Wait at most ``timeout`` s for an update after the ``seen``-th (None: the next)."""
        with self.changed:
            target = self._updates if seen is None else seen
            self.changed.wait_for(lambda: self._updates != target, timeout)


def _copy_places(places: dict[str, Any]) -> list[RawPlace]:
    copied = []
    for name, place in places.items():
        copied.append(
            RawPlace(
                str(name),
                tuple(dict(place.tags).items()),
                place.comment,
                place.acquired,
                place.reservation,
                tuple((m.exporter, m.group, m.cls, m.name) for m in place.matches),
                tuple(tuple(str(p) for p in path) for path in place.acquired_resources),
            )
        )
    return copied


def _copy_resources(resources: dict[str, Any]) -> list[Resource]:
    copied = []
    for exporter, groups in resources.items():
        for group, entries in groups.items():
            for name, entry in entries.items():
                if "cls" not in entry.data:
                    continue  # deleted
                args = tuple(entry.args.items())
                copied.append(
                    Resource(exporter, group, name, entry.cls, args, entry.acquired, entry.avail)
                )
    return copied
