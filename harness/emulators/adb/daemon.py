"""adb-emu: a device-side ADB daemon for one private device root, served over TCP.

The real ``adb`` client reaches it with ``adb connect HOST:PORT``. Run it by hand with::

    python -m harness.emulators.adb.daemon --root /tmp/dev1 --port 40555

It prints ``adb-emu listening on HOST:PORT`` once ready, and stops on SIGTERM or
Ctrl-C. Tests start it through :class:`harness.emulators.adb.launcher.AdbEmulator`.
What it implements, and what not: docs/adb-emu.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from harness.emulators.adb.auth import AdbPublicKey, load_adb_keys
from harness.emulators.adb.device_root import DeviceNamespace, prepare_device_root
from harness.emulators.adb.host_connection import AdbConnection, Identity, Service
from harness.emulators.adb.properties import DEFAULT_PROPERTIES, DeviceProperties
from harness.emulators.adb.shell import ShellRequest, serve_shell
from harness.emulators.adb.sync import serve_sync
from harness.errors import UsageError

log = logging.getLogger("adb-emu")

MAX_CONNECTIONS = 8
EMULATOR_SCAN_PORTS = range(5555, 5586)  # the adb server probes these for emulators


class PortInScanRange(ValueError, UsageError):
    """The chosen port is one the adb server scans for emulators."""


def check_port(port: int) -> None:
    """Refuse ports 5555-5585: the adb server would list the device twice."""
    if port in EMULATOR_SCAN_PORTS:
        raise PortInScanRange(
            f"port {port} is in 5555-5585, which every adb server scans for emulators, "
            "so the device would show up twice (also as emulator-NNNN); "
            "use another port, or 0 for a free one"
        )


class AdbDaemon:
    """Serves ADB for one device root; see :meth:`serve`."""

    def __init__(
        self,
        root: Path,
        properties: DeviceProperties = DEFAULT_PROPERTIES,
        adb_keys: tuple[AdbPublicKey, ...] | None = None,
    ) -> None:
        self._root = root
        self._properties = properties
        self._identity = Identity(banner=properties.banner(), adb_keys=adb_keys)
        self._namespace = DeviceNamespace(root)
        self._connections: set[asyncio.Task[None]] = set()

    def find_service(self, name: str) -> Service | None:
        """The handler for an OPEN's service name, or None to refuse it."""
        if name == "sync:":
            return functools.partial(serve_sync, namespace=self._namespace)
        request = ShellRequest.parse(name)
        if request is not None:
            return functools.partial(serve_shell, namespace=self._namespace, request=request)
        return None

    async def serve(
        self, host: str, port: int, ready: Callable[[str, int], None], stop: asyncio.Event
    ) -> None:
        """Listen on ``host:port`` (0: any free port) until ``stop`` is set."""
        check_port(port)
        prepare_device_root(self._root, self._properties)
        self._namespace.start()
        try:
            server = await asyncio.start_server(self._accept, host, port)
            async with server:
                bound = server.sockets[0].getsockname()
                check_port(bound[1])
                ready(bound[0], bound[1])
                await stop.wait()
                server.close()
                for task in list(self._connections):
                    task.cancel()
                await asyncio.gather(*self._connections, return_exceptions=True)
        finally:
            self._namespace.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            log.warning("refusing a connection: already %d", MAX_CONNECTIONS)
            writer.close()
            return
        connection = AdbConnection(reader, writer, self._identity, self.find_service)
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await connection.serve()
        finally:
            self._connections.discard(task)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m harness.emulators.adb.daemon",
        description="adb-emu: an emulated Android device for the real adb client.",
    )
    parser.add_argument(
        "--root", type=Path, required=True, help="the device's private root directory"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="TCP port, not 5555-5585 (default: a free one)"
    )
    parser.add_argument("--model", default=DeviceProperties.model, help="ro.product.model")
    parser.add_argument("--device", default=DeviceProperties.device, help="ro.product.device")
    parser.add_argument("--name", default=DeviceProperties.name, help="ro.product.name")
    parser.add_argument("--abi", default=DeviceProperties.abi, help="ro.product.cpu.abi")
    parser.add_argument("--abilist", help="ro.product.cpu.abilist (default: the --abi value)")
    parser.add_argument(
        "--prop", action="append", default=[], metavar="KEY=VALUE", help="another property"
    )
    parser.add_argument(
        "--adb-keys",
        type=Path,
        help="require AUTH and accept only these host keys (adbkey.pub lines); default: no AUTH",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="log every connection and stream"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run adb-emu until SIGTERM or SIGINT."""
    args = _parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="adb-emu: %(message)s",
        stream=sys.stderr,
    )
    try:
        check_port(args.port)
        extra = dict(prop.split("=", 1) for prop in args.prop if "=" in prop)
        properties = DeviceProperties(
            model=args.model,
            device=args.device,
            name=args.name,
            abi=args.abi,
            abilist=args.abilist or args.abi,
            extra=extra,
        )
        keys = load_adb_keys(args.adb_keys) if args.adb_keys else None
    except (ValueError, OSError) as exc:
        print(f"adb-emu: {exc}", file=sys.stderr)
        return 2

    def ready(host: str, port: int) -> None:
        print(f"adb-emu listening on {host}:{port}", flush=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await AdbDaemon(args.root, properties, keys).serve(args.host, args.port, ready, stop)

    try:
        asyncio.run(run())
    except (OSError, RuntimeError) as exc:
        print(f"adb-emu: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
