"""Turning messages and files into bytes and text: the binary wire codec (``wire``), the
readable JSON form of its messages (``readable``)."""
