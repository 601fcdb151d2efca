"""The serial channel to an MCU (docs/serial-protocol.md): :mod:`.frame` (COBS frames),
:mod:`.frame_port` (frames read from and written to a byte port), :mod:`.hello` (what a device
announces), :mod:`.arq` (go-back-N link and HELLO handshake), :mod:`.port` (opening a port
from its settings, resetting the board, connecting)."""
