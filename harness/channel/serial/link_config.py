"""The serial link's host-side timeouts and limits (:class:`LinkConfig`) and the counters
it keeps since it was opened (:class:`LinkStats`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinkConfig", "LinkStats"]


@dataclass(frozen=True)
class LinkConfig:
    """Timeouts and limits of the host side. Seconds unless noted."""

    hello_timeout: float = 5.0  # the handshake: HELLO_REQUEST until a HELLO answers
    hello_interval: float = 0.25  # between HELLO_REQUESTs while waiting
    wait_boot: bool = False  # first wait for the HELLO the device sends at boot
    boot_timeout: float = 5.0  # ... for this long
    ack_timeout: float = 0.5  # silence after which frames are resent or polled for, at most
    min_ack_timeout: float = 0.02  # ... at least; in between it follows the measured round trip
    max_retries: int = 8  # consecutive resends or polls without progress
    request_timeout: float = 20.0  # one request, all attempts together
    attempts: int = 3  # times one request is sent (resynchronising in between)
    max_frame: int = 1024  # the host's own limit on frames it sends
    window: int = 8  # the host's own limit on frames in flight


@dataclass(frozen=True)
class LinkStats:
    """Counters since the link was opened."""

    frames_sent: int = 0
    frames_received: int = 0
    bad_frames: int = 0
    resent_frames: int = 0
    polls: int = 0
    naks_sent: int = 0
    duplicates: int = 0
    resyncs: int = 0
    request_retries: int = 0
    stale_reports: int = 0
    max_in_flight: int = 0  # most DATA frames ever unacknowledged at once
