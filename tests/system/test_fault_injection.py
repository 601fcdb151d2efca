"""The suites' power, measured: faults injected into the real runtime must be caught.

``tests/faults/etb_fault_shim.cpp`` is built here against the wheel's headers and
put in front of the host agent with ``LD_PRELOAD`` (profile ``agent.env``). It
interposes the runtime's dispatch on every load path (``Program::load_method``,
``Module::load``, ``Module::load_method``) and, through ``get_backend_class``, each
backend's ``init``, ``set_option`` and ``get_option``; ``ETB_FAULT`` picks one fault.
For every fault the device suites run on the host and must fail with a delivery
difference (a verdict that is not exact), never with an infrastructure error; with
the shim loaded and no fault they must pass. Nine faults strike only the real
backends (XnnpackBackend, QnnBackend, OpenvinoBackend), five of them faults a real
backend accepts silently (a valid value changed, an extra key, part of the list, the
list reordered, another model's specs: it loads and computes the same) and one a value
changed between the backend's get_option and its caller; the agent's records of the
real backends (both ends of a get_option) make every one a delivery difference, and
they run only the real-backend suites (``REAL_SUITES``). Four strike the seam between models, loads
and threads (specs that stick to a backend and reach the next model, global values that
leak into specs, a loading thread handed another thread's map, or the specs of the init
that raced it), caught by the multi-model suites (suites/test_models*.py); the two thread
faults touch only models loaded CONCURRENT, so only the concurrent cases catch them. Each
fault's device stops at its first failing test (``tests/faults/first_catch.py``); a table of
fault -> the test that caught it is printed (``-s`` shows it). Only the faults of the
selected tests run: ``-k real_get_value_changed`` runs that fault's suites alone.
"""

from __future__ import annotations

import collections
import concurrent.futures
import fcntl
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import power_runs
import pytest
from faults.first_catch import SKIPPED
from prerequisites import require

from harness.results.directory import RESULTS_FILE, read_results
from harness.results.records import CaseResult
from harness.runtime.wheel_sdk import ensure_sdk, host_abi
from harness.untrusted.trust import TRUSTED_PROFILES_ENV

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = ROOT / "tests" / "faults" / "etb_fault_shim.cpp"
# Each fault, and where it strikes.
FAULTS = {
    "drop_backend": "Program::load_method: the first map entry with options arrives empty",
    "swap_backends": "Program::load_method: the first two entries swap their option lists",
    "reorder_options": "Program::load_method: one entry's options arrive reversed",
    "truncate_string": "init: string specs over 100 bytes cut to 100",
    "flip_bool": "init: bool specs false arrive as true",
    "int_as_bool": "init: int specs 0 and 1 arrive as bool",
    "second_init_empty": "init: a backend's second init in one load gets no specs",
    "dangling_caller_map": "Module::load keeps the caller's pointer; the lazy load reads it",
    "stale_map_after_reload": "Module::load(mapB) on a loaded module keeps mapA",
    "ignore_explicit_empty_map": "Module::load_method: explicit empty map taken as none",
    "merge_explicit_with_stored": "Module::load_method: stored entries fill the explicit map",
    "leak_specs_into_get_option": "get_option reads back the last init's runtime specs",
    "set_option_drops_last": "set_option: the last option of a call is not delivered",
    "sticky_specs": "init: a backend's last specs reach a later init (next model) given none",
    "global_leaks_into_specs": "init: options set by set_option fill in keys the specs lack",
    "thread_gets_other_map": "Program::load_method on a loading thread: the previous thread's map",
    "racing_init_specs": "init on a loading thread: the specs of the init that raced it",
    "real_init_without_specs": "init: a real backend (XnnpackBackend, ...) gets no specs",
    "real_set_option_swallowed": "set_option: a real backend is not called, Ok returned",
    "real_get_option_ignored": "get_option: a real backend is not called, values untouched",
    "real_get_value_changed": "get_option: every int OpenvinoBackend left arrives increased by 1",
    "real_value_changed": "init: a real backend's int spec 0..2 arrives as another valid one",
    "real_extra_key": "init: a real backend gets one spec more (num_threads = 1)",
    "real_partial_list": "init: a real backend given two or more specs misses the last",
    "real_reordered": "init: a real backend's two or more specs arrive reversed",
    "real_other_models_specs": "init: a real backend gets the specs of its previous, other init",
}
# What a fault that strikes only the real backends needs to run: their suites.
REAL_SUITES = (
    "suites/test_xnnpack.py",
    "suites/test_openvino.py",
    "suites/test_qnn.py",
    "suites/test_concurrent_xnnpack.py",
    "suites/test_real_backend_records.py",
)
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class FaultRun:
    """One run of the suites with one fault (or none)."""

    fault: str
    results: tuple[CaseResult, ...]
    returncode: int
    output: str
    shim_log: tuple[str, ...]  # one line per agent process: calls per interposed function

    def calls(self, function: str) -> int:
        """How often the agents of this run called ``function`` through the shim."""
        total = 0
        for line in self.shim_log:
            fields = dict(f.split("=", 1) for f in line.split())
            total += int(fields.get(function, 0))
        return total

    @property
    def infra(self) -> list[str]:
        return [r.nodeid for r in self.results if r.outcome in ("infra", "error")]

    @property
    def caught_by(self) -> list[str]:
        """Tests that failed on an assertion (not an infrastructure error)."""
        return [r.name for r in self.results if r.outcome == "failed"]

    @property
    def diff_caught_by(self) -> list[str]:
        """Of those, the ones whose failure is a delivery difference (a verdict not exact)."""
        return [
            r.name
            for r in self.results
            if r.outcome == "failed" and any(not v.ok for v in r.verdicts)
        ]

    @property
    def failed(self) -> list[str]:
        return self.caught_by


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shim, compiled with the compile definitions the wheel's libraries were built with."""
    require("g++")
    sdk = ensure_sdk(host_abi())
    out = tmp_path_factory.mktemp("fault_shim") / "libetb_fault_shim.so"
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-O1",
            "-g",
            "-fPIC",
            "-shared",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-parameter",
            "-Wno-deprecated-declarations",
            "-DC10_USING_CUSTOM_GENERATED_MACROS",
            "-DET_EVENT_TRACER_ENABLED",
            "-DET_USE_THREADPOOL",
            f"-I{sdk.include}",
            f"-I{sdk.include / 'executorch/runtime/core/portable_type/c10'}",
            str(SHIM_SOURCE),
            "-o",
            str(out),
            "-ldl",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def fault_profile(shim: Path, fault: str, base: Path) -> Path:
    """A host profile whose agent runs under the shim with ``fault``; its name is
    ``host-<fault>`` (the profile file's name)."""
    work = base / fault
    work.mkdir()
    env = f"{{LD_PRELOAD: '{shim}', ETB_FAULT: {fault}, ETB_FAULT_SHIM_LOG: '{work / 'shim.log'}'}}"
    profile = work / f"host-{fault.replace('_', '-')}.yaml"
    profile.write_text(
        f"description: host agent under the fault shim, fault {fault}\n"
        "transport:\n  kind: local\n"
        f"work_dir: {work / 'device'}\n"
        "backends: [XnnpackBackend]\n"
        "timeouts:\n  case: 30\n"
        f"agent:\n  env: {env}\n",
        encoding="utf-8",
    )
    return profile


def run_suites(shim: Path, faults: list[str], suites: list[str], base: Path) -> dict[str, FaultRun]:
    """The device suites in one pytest, on one profile per fault (each device its own
    agent, under the shim with its fault): one start-up and collection for them all."""
    profiles = {fault: fault_profile(shim, fault, base) for fault in faults}
    results_dir = base / f"results-{faults[0]}"
    # --tb=line: a traceback per failure costs pytest ~50 ms (it parses the source of
    # every frame), most of a fault run's time, and the verdicts are in results.jsonl.
    command = [
        sys.executable,
        "-m",
        "pytest",
        *suites,
        "-q",
        "--device",
        ",".join(str(profile) for profile in profiles.values()),
        "-p",
        "no:cacheprovider",
        *power_runs.PYTEST_ARGS,
        "--tb=line",
        "--results-dir",
        str(results_dir),
        "--lock-dir",
        str(base / "locks"),
    ]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=power_runs.environment(PYTHONHASHSEED="0", **{TRUSTED_PROFILES_ENV: str(base)}),
        check=False,
    )
    results = read_results(results_dir / RESULTS_FILE)
    output = done.stdout[-4000:] + done.stderr[-2000:]
    runs = {}
    for fault, profile in profiles.items():
        log = profile.parent / "shim.log"
        calls = log.read_text("utf-8").splitlines() if log.is_file() else []
        mine = tuple(r for r in results if r.device == profile.stem)
        runs[fault] = FaultRun(fault, mine, done.returncode, output, tuple(calls))
    return runs


def selected_faults(session: pytest.Session) -> set[str]:
    """The faults (and "none", the inert shim) the session's selected tests look at."""
    wanted = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "fault" in callspec.params:
            wanted.add(callspec.params["fault"])
        elif item.name == test_inert_shim_passes_every_suite.__name__:
            wanted.add("none")
    return wanted


@pytest.fixture(scope="module")
def runs(
    shim: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, FaultRun]:
    """The selected tests' faults' runs, made once per session: under pytest-xdist the first
    worker to get here makes them while the others wait on a lock, then read what it kept."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session = session.parent  # the workers' common temporary directory
    kept = session / "fault_runs.pickle"
    with open(session / "fault_runs.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.is_file():
            done: dict[str, FaultRun] = pickle.loads(kept.read_bytes())  # this session's own
        else:
            base = session / "fault_runs"
            base.mkdir()
            wanted = selected_faults(request.session)
            real = [fault for fault in FAULTS if fault.startswith("real_") and fault in wanted]
            rest = [fault for fault in FAULTS if fault not in real and fault in wanted]
            groups = [
                (rest[::2], ["suites"]),
                (rest[1::2], ["suites"]),
                (["none"] if "none" in wanted else [], ["suites"]),
                (real, list(REAL_SUITES)),
            ]  # about as long as each other, but "none"
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                futures = [
                    pool.submit(run_suites, shim, faults, suites, base)
                    for faults, suites in groups
                    if faults
                ]
                done = {name: run for f in futures for name, run in f.result().items()}
            kept.write_bytes(pickle.dumps(done))
    print("\nfault                        caught  diffs  by (failing tests per test function)")
    for name in (fault for fault in FAULTS if fault in done):
        run = done[name]
        functions = collections.Counter(test.split("[", 1)[0] for test in run.caught_by)
        shown = ", ".join(f"{f} x{n}" for f, n in functions.most_common(3))
        more = f", +{len(functions) - 3} more" if len(functions) > 3 else ""
        print(
            f"{name:<28} {len(run.caught_by):>6} {len(run.diff_caught_by):>6}  "
            f"{shown + more or '-- NOT CAUGHT --'}"
        )
    if "none" in done:
        inert = done["none"]
        print(
            f"{'(inert shim)':<28} {len(inert.failed):>6} {len(inert.diff_caught_by):>6}  "
            f"failures in {len(inert.results)} tests"
        )
    return done


def test_inert_shim_passes_every_suite(runs: dict[str, FaultRun]) -> None:
    inert = runs["none"]
    assert inert.returncode == 0 and not inert.failed and not inert.infra, inert.output
    assert sum(r.outcome == "passed" for r in inert.results) > 200
    assert not [r.nodeid for r in inert.results if SKIPPED in r.longrepr]  # it never failed
    # The shim really sat in the agent: every interposed entry point was called.
    for function in (
        "program_load_method",
        "module_load",
        "module_load_method",
        "get_backend_class",
    ):
        assert inert.calls(function) > 0, (function, inert.shim_log)


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_is_caught_by_a_delivery_difference(runs: dict[str, FaultRun], fault: str) -> None:
    """Caught: the suites fail on assertions, never on infrastructure errors, and with a
    verdict's delivery diff: the probes record what they receive, and the agent records
    what the real backends receive."""
    run = runs[fault]
    assert not run.infra, f"{fault}: infrastructure errors, not a diff: {run.infra}\n{run.output}"
    assert run.caught_by, (
        f"fault {fault} ({FAULTS[fault]}) was not caught by any suite\n{run.output}"
    )
    assert run.diff_caught_by, f"{fault}: failures without a delivery diff: {run.caught_by}"
    caught = min(r.started for r in run.results if r.outcome == "failed")
    after = [r for r in run.results if r.started > caught]  # first_catch skipped the rest
    assert all(r.outcome == "skipped" and SKIPPED in r.longrepr for r in after), fault
    assert run.returncode == 1, run.output
