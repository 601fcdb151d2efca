"""Channels: whole wire messages to a device agent and whole reports back.

- :mod:`harness.channel.message_channel` — the :class:`MessageChannel` interface;
- :mod:`harness.channel.stream_channel` — over a transport's byte stream (an agent process's
  stdin and stdout), each report's length read from its header;
- :mod:`harness.channel.serial` — over a serial port to an MCU: COBS frames
  (:mod:`.frame`), go-back-N ARQ with the HELLO handshake (:mod:`.arq`), connecting
  (:mod:`.connect`); the port itself is the serial transport,
  :mod:`harness.transport.serial`.

A channel knows the wire format's header (its length and sequence number), never its
body: numbering requests and decoding reports is the agent session's
(:mod:`harness.session.agent_session`).
"""
