"""The report's page: its style, escaping, and the badges and outcome letters its parts
draw (:mod:`harness.results.html_report`; the history's page, too)."""

from __future__ import annotations

import collections
import html

# Worst first: a cell takes the colour of its worst outcome.
SEVERITY = ("failed", "error", "xpassed", "infra", "passed", "xfailed", "skipped")
SHOWN = ("passed", "failed", "error", "infra", "skipped", "xfailed", "xpassed")
LETTER = {
    "passed": "✓",
    "failed": "✗",
    "error": "E",
    "infra": "I",
    "skipped": "s",
    "xfailed": "x",
    "xpassed": "X",
}

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.suite th { background: #e6e6f0; }
td.backend { padding-left: 1.8em; font-family: monospace; }
a { color: inherit; }
.failed, .error, .xpassed { background: #f6c9c9; }
.infra { background: #fbe3a8; }
.passed { background: #cdeccd; }
.skipped, .xfailed { background: #e4e4e4; }
.none { background: #fff; color: #999; }
.badge { display: inline-block; min-width: 4.5em; padding: 0 .4em; border-radius: 3px;
         text-align: center; font-size: .85em; font-weight: 600; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: .6em; overflow-x: auto;
      white-space: pre; font-size: 12px; }
section.case { border-top: 1px solid #ddd; padding: .4em 0; }
section.case:target, section.cell:target { outline: 3px solid #6b8de3; }
.muted { color: #777; }
p.verdict { font-size: 1.1em; padding: .4em .6em; border-radius: 3px; }
details.probes > summary { cursor: pointer; }
ul.why { font-family: monospace; font-size: 12px; margin: .1em 0 .4em; }
"""


def esc(text: object) -> str:
    """``text`` as HTML text or attribute value."""
    return html.escape(str(text), quote=True)


def html_page(title: str, body: str) -> str:
    """A self-contained HTML document in the report's style: ``title`` and ``body`` (HTML)."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{esc(title)}</h1>",
            body,
            "</body></html>",
        ]
    )


def worst(outcomes: collections.Counter) -> str:
    """The outcome whose colour a cell of these ``outcomes`` takes: its worst."""
    return next((o for o in SEVERITY if outcomes[o]), "none")


def counts_text(outcomes: collections.Counter) -> str:
    """``✓3 ✗1``: each outcome's letter and count."""
    return " ".join(f"{LETTER[o]}{outcomes[o]}" for o in SHOWN if outcomes[o])


def badge(outcome: str) -> str:
    """The outcome's word on its colour."""
    return f'<span class="badge {esc(outcome)}">{esc(outcome)}</span>'


def mark(outcome: str) -> str:
    """A badge, or for a passed test just its letter (thousands of them in a big run)."""
    return LETTER["passed"] if outcome == "passed" else badge(outcome)
