"""Reading and checking what other people wrote, below every layer that reads it.

- :mod:`.reading`: files read within bounds (:func:`~.reading.read_bounded_text`) and
  untrusted values shortened for messages (:func:`~.reading.brief`);
- :mod:`.value_rules`: the rules host names, users, ports, argv words, paths and time
  bounds must pass before anything runs;
- :mod:`.trust`: which files the user vouches for as code.

The transport layer uses these too, so they sit below ``config/`` (which imports the
agent's and transports' settings types), not in it.
"""
