"""Every CRC variant of the C codec (slicing-by-8, byte table, nibble table) equals zlib's
CRC-32."""

from __future__ import annotations

import random
import subprocess
import zlib
from pathlib import Path

import pytest

CODEC = Path(__file__).resolve().parents[2] / "agent" / "codec"

PROGRAM = r"""
#include <stdio.h>
#include "etb/wire.h"
int main(void) {
  static unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, stdin);
  /* In two pieces, to show that feeding the result back continues the CRC. */
  uint32_t crc = etb_crc32(etb_crc32(0, buf, n / 3), buf + n / 3, n - n / 3);
  printf("%08x\n", (unsigned)crc);
  return 0;
}
"""


@pytest.mark.parametrize(
    "variant",
    [[], ["-DETB_CRC_BYTE"], ["-DETB_CRC_SMALL"], ["-ffreestanding"]],
    ids=["default-slice8", "byte-table", "small", "freestanding-default"],
)
def test_crc_matches_zlib(tmp_path, variant):
    source = tmp_path / "crc.c"
    source.write_text(PROGRAM)
    binary = tmp_path / "crc"
    subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            *variant,
            f"-I{CODEC / 'include'}",
            str(source),
            str(CODEC / "src" / "wire_common.c"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    rng = random.Random(7)
    for data in [b"", b"123456789", bytes(range(256)) * 3, rng.randbytes(40000)]:
        out = subprocess.run([binary], input=data, capture_output=True, check=True).stdout
        assert int(out, 16) == zlib.crc32(data)
