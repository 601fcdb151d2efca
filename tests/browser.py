"""Headless Chromium on a report page: its DOM, a screenshot, and what its first screen
shows (the tests of the HTML report)."""

from __future__ import annotations

import html
import json
import subprocess
from pathlib import Path


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` with ``args`` (``--dump-dom``, ``--screenshot=...``)."""
    flags = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    return subprocess.run(
        [*flags, *args, page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )


# Appended to a copy of a report (which itself has no script): once laid out, the text of
# every element on the first screen (the window's height from the top), in page order.
_FIRST_SCREEN = """<script>
addEventListener("load", () => {
  const seen = [];
  for (const e of document.querySelectorAll("h2, h3, th, td, li, p, figure")) {
    const box = e.getBoundingClientRect();
    if (box.top < innerHeight && box.bottom > 0) {
      seen.push(e.tagName.toLowerCase() + ": " + e.textContent.trim().slice(0, 300));
    }
  }
  const out = document.createElement("pre");
  out.id = "first-screen";
  out.textContent = JSON.stringify(seen);
  document.body.append(out);
});
</script>"""


def first_screen(page: Path, tmp_path: Path) -> list[str]:
    """What headless Chromium shows of ``page`` in a 1200 x 900 window before scrolling:
    ``tag: text`` of each heading, cell, item, paragraph and figure at least partly in it
    (nothing inside a closed ``<details>``: it has no box)."""
    probe = tmp_path / f"first-screen-{page.parent.name}.html"
    probe.write_text(page.read_text("utf-8").replace("</body>", _FIRST_SCREEN + "</body>"))
    dom = chromium(probe, tmp_path, "--window-size=1200,900", "--dump-dom").stdout
    shown = dom.split('<pre id="first-screen">', 1)[1].split("</pre>", 1)[0]
    return json.loads(html.unescape(shown))
