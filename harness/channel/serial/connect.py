"""Connecting to an MCU: open its serial port, reset the board, complete the HELLO handshake.

The port and its settings are :mod:`harness.transport.serial`; the link on top is
:mod:`harness.channel.serial.arq`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from harness.channel.serial.arq import SerialLink
from harness.channel.serial.link_config import LinkConfig
from harness.transport.serial import ResetLine, SerialSettings, open_port, pulse_reset


def connect(
    config: SerialSettings,
    *,
    name: str = "mcu",
    link: LinkConfig | None = None,
    on_open: Callable[[], None] | None = None,
) -> SerialLink:
    """Open the port, reset the board if configured, and complete the HELLO handshake.

    After a reset (or with ``wait_boot``) the board's boot HELLO must arrive within
    ``boot_timeout``; the handshake then has ``hello_timeout``. Those two come from
    ``config`` when set there, else from ``link``; the rest of ``link`` applies as given.
    ``on_open`` runs once the port is open (opening discards what arrived before), in
    place of a reset: an emulated board's CPU is let run there, so its boot HELLO is read.
    """
    link_config = link or LinkConfig()
    link_config = dataclasses.replace(
        link_config,
        hello_timeout=config.hello_timeout or link_config.hello_timeout,
        boot_timeout=config.boot_timeout or link_config.boot_timeout,
        wait_boot=config.wait_boot or config.reset is not ResetLine.NONE,
    )
    port = open_port(config)
    try:
        pulse_reset(port, config)
        if on_open is not None:
            on_open()
    except BaseException:
        port.close()
        raise
    return SerialLink.open(port, link_config, name=name)
