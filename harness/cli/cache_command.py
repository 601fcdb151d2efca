"""``et-harness cache``: what the harness cache holds, per kind (entries, size, last use;
every entry with ``--all``) and, with ``clean``, removing it, all or one kind; entries a
running process holds stay."""

from __future__ import annotations

import argparse
import time
from typing import Any

from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import (
    KINDS,
    LIMIT_ENV,
    EntryInfo,
    entries,
    remove_unless_busy,
    size_limit,
)
from harness.lifecycle.disk import human_size


def add_parser(commands: Any) -> None:
    """The ``cache`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "cache",
        help="list what the harness cache holds (kind, size, last use), or clean it",
        description=__doc__.split("\n\n")[0],
    )
    cmd.add_argument(
        "action", nargs="?", choices=["list", "clean"], default="list", help="(default: list)"
    )
    cmd.add_argument("--kind", choices=KINDS, help="only entries of this kind")
    cmd.add_argument(
        "--all", action="store_true", help="list every entry, the most recently used first"
    )


def run_cache(args: argparse.Namespace) -> int:
    listed = entries(args.kind)
    if args.action == "clean":
        removed = [entry for entry in listed if remove_unless_busy(entry)]
        kept = len(listed) - len(removed)
        freed = sum(entry.size for entry in removed)
        busy = f"; {kept} in use by a running process kept" if kept else ""
        print(f"removed {len(removed)} entries ({human_size(freed)}) from {cache_root()}{busy}")
        return 0
    now = time.time()
    total = sum(entry.size for entry in listed)
    print(
        f"cache {cache_root()}: {_entries(len(listed))}, {human_size(total)} "
        f"(bound {human_size(size_limit())}, ${LIMIT_ENV})"
    )
    kinds: dict[str, list[EntryInfo]] = {}
    for entry in listed:
        kinds.setdefault(entry.kind, []).append(entry)
    width = max((len(kind) for kind in kinds), default=4)
    for kind, mine in sorted(kinds.items()):
        size, last = sum(e.size for e in mine), max(e.last_use for e in mine)
        print(
            f"  {kind:<{width}}  {_entries(len(mine)):>12}  {human_size(size):>9}"
            f"  last used {_ago(now - last)}"
        )
    if not args.all:
        if listed:
            print("every entry: et-harness cache --all")
        return 0
    print("every entry, the most recently used first:")
    for entry in reversed(listed):
        print(
            f"  {entry.kind:<{width}}  {human_size(entry.size):>9}  {_ago(now - entry.last_use):>9}"
            f"  {entry.path.relative_to(cache_root())}"
        )
    return 0


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _ago(seconds: float) -> str:
    for unit, scale in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.0f} {unit} ago"
    return "just now"
