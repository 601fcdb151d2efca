"""The serial link's retransmission timeout, from the round trips it measures (RFC 6298).

A DATA frame's round trip is the time to its ACK; the timeout follows the smoothed round
trip and its variation, doubled after each silence, within the bounds the link's
configuration sets.
"""

from __future__ import annotations

__all__ = ["RetransmitTimer"]


class RetransmitTimer:
    """How long the link waits for an ACK (:attr:`timeout`), between ``least`` and
    ``most`` seconds; it starts at ``most``."""

    def __init__(self, least: float, most: float) -> None:
        self._least, self._most = least, most
        self._srtt: float | None = None  # smoothed round trip of a DATA frame and its ACK
        self._rttvar = 0.0
        self.timeout = most

    def sample(self, round_trip: float) -> None:
        """Take one measured round trip into the timeout."""
        if self._srtt is None:
            self._srtt, self._rttvar = round_trip, round_trip / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - round_trip)
            self._srtt = 0.875 * self._srtt + 0.125 * round_trip
        self.timeout = min(self._most, max(self._least, self._srtt + 4 * self._rttvar))

    def back_off(self) -> None:
        """Double the timeout after a silence (at most ``most``)."""
        self.timeout = min(self._most, self.timeout * 2)
