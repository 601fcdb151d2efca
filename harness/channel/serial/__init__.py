"""The serial channel to an MCU (docs/serial-protocol.md): :mod:`.frame` (COBS frames),
:mod:`.frame_port` (frames read from and written to a byte port), :mod:`.hello` (what a device
announces), :mod:`.arq` (go-back-N link and HELLO handshake), :mod:`.connect` (opening the port,
resetting the board, the handshake); the port itself is :mod:`harness.transport.serial`."""
