"""Wire messages as bytes (``wire``: format v2, shared with the C codec) and as readable
JSON dicts (``readable``: the command line's form)."""
