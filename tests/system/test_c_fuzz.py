"""A short, bounded libFuzzer run of the C decoders (agent/codec/fuzz/fuzz_decode.c).

The target decodes every input as request and report, fixes up length and CRC and
decodes again, and aborts if a decoded message does not re-encode to the same bytes.
Seeds are the golden vectors. The longer run is documented in agent/codec/README.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from golden_vectors import VECTORS

ROOT = Path(__file__).resolve().parents[2]
CODEC = ROOT / "agent" / "codec"
# Seeded from the golden vectors, the run covers every edge it will reach (483) within
# about 90,000 inputs, under a second; 5 s is about 850,000 inputs (20 s found 5 more
# features and no more edges). A longer run: agent/codec/README.md, "Fuzzing longer".
FUZZ_SECONDS = 5
SANITIZERS = ["-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"]
ARTIFACT_PREFIXES = ("crash-", "leak-", "timeout-", "oom-")


@pytest.mark.slow
def test_fuzzing_the_decoders_finds_nothing(tmp_path: Path) -> None:
    seeds = sorted(VECTORS.glob("*.bin"))
    assert seeds, f"no golden vectors in {VECTORS} to seed the fuzzer with"
    corpus = tmp_path / "corpus"  # libFuzzer adds inputs here: never the vectors directory
    corpus.mkdir()
    for seed in seeds:
        shutil.copy(seed, corpus / seed.name)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    fuzzer = tmp_path / "fuzz_decode"
    build = subprocess.run(
        [
            "clang",
            "-g",
            "-O1",
            *SANITIZERS,
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{CODEC / 'include'}",
            *map(str, sorted((CODEC / "src").glob("*.c"))),
            str(CODEC / "fuzz" / "fuzz_decode.c"),
            "-o",
            str(fuzzer),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert build.returncode == 0, build.stderr

    run = subprocess.run(
        [
            str(fuzzer),
            f"-max_total_time={FUZZ_SECONDS}",
            "-rss_limit_mb=512",
            "-seed=1",
            "-timeout=5",
            f"-artifact_prefix={artifacts}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 60,
        check=False,
    )

    log_tail = run.stderr[-4000:]
    assert run.returncode == 0, f"libFuzzer exited {run.returncode}:\n{log_tail}"
    found = [p.name for p in artifacts.iterdir() if p.name.startswith(ARTIFACT_PREFIXES)]
    assert not found, f"libFuzzer left crash artifacts {found}:\n{log_tail}"
    done = re.search(r"Done (\d+) runs", run.stderr)
    assert done and int(done.group(1)) > 0, f"libFuzzer ran no inputs:\n{log_tail}"
