"""A dead run's labgrid hand-over, as its janitor runs it (needs labgrid).

``python -m harness.lab.handback -x COORDINATOR OWNER [TOKEN ...]`` cancels the
reservations ``TOKEN`` and then releases every place that ``OWNER`` (a run's labgrid
identity, ``HOST/USER-pidPID-START``) still holds: the order a live run hands over in
(:mod:`harness.lab.reservation`). The coordinator releases a place "from" a named
holder only while that holder has it, so a place handed back already, or taken by
someone else since, is left alone. Exit status 0 unless the coordinator cannot be reached.
"""

from __future__ import annotations

import argparse
import sys

from harness.lab.client_session import LabgridError, LabSession
from harness.lab.identity import LabIdentity
from harness.untrusted.reading import printable


def hand_back(lab: LabSession, holder: str, tokens: list[str]) -> list[str]:
    """Cancel ``tokens``, then release what ``holder`` holds; the places released."""
    messages = lab.messages()
    for token in tokens:
        try:
            lab.call("cancel", "CancelReservation", messages.CancelReservationRequest(token=token))
        except LabgridError:
            continue  # expired or cancelled already
    raws, _ = lab.snapshot()
    released = []
    for raw in raws:
        if raw.acquired == holder:
            request = messages.ReleasePlaceRequest(placename=raw.name, fromuser=holder)
            lab.call(f"release {printable(raw.name)}", "ReleasePlace", request)
            released.append(raw.name)
    return released


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.lab.handback",
        description="hand back what a dead run held in a labgrid lab",
    )
    parser.add_argument("-x", "--coordinator", required=True, help="host:port")
    parser.add_argument("holder", help="the run's labgrid identity, HOST/USER-pidPID-START")
    parser.add_argument("tokens", nargs="*", help="its reservations")
    args = parser.parse_args(argv)
    lab = LabSession.of(args.coordinator, LabIdentity.this_process())
    try:
        for place in hand_back(lab, args.holder, args.tokens):
            print(f"released {printable(place)} from {printable(args.holder)}")
    except LabgridError as exc:
        print(f"cannot hand back for {printable(args.holder)}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
