"""Device-farm runs end to end: pytest subprocesses on host-like devices with the real agent.

Every device here is the host (transport ``local``) under another name. A relay
wrapper (:data:`RELAY`) sits between the harness and the real agent: it logs
when each agent starts and ends (to check that two runs never use one device at
once) and, after N requests, makes the device die, hang or crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.untrusted.trust import TRUSTED_PROFILES_ENV

RELAY = '''\
"""Test device: runs the agent (last argument) and relays its frames; see --help."""
import argparse
import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
import time

from harness.codec import wire

parser = argparse.ArgumentParser()
parser.add_argument("--log", help='append "start T PID" and "end T PID" per agent')
parser.add_argument("--state", help="file counting requests over every agent of the device")
parser.add_argument("--after", type=int, default=-1, help="misbehave after N requests in all")
parser.add_argument("--then", choices=["die", "hang", "stop", "crash", "crash-every"],
                    default="die",
                    help="die: kill the agent, later starts fail at once; hang: stop "
                    "answering; stop: SIGSTOP the agent (and every later one) at its next "
                    "request; crash: SIGSEGV the agent at request N+1 only, crash-every: at "
                    "every request after N; cores enabled for both")
parser.add_argument("--cwd", help="the agent's working directory")
parser.add_argument("agent")
args = parser.parse_args()


def log(event):
    if args.log:
        with open(args.log, "a") as handle:
            handle.write(f"{event} {time.time():.6f} {os.getpid()}\\n")


def requests_so_far():
    try:
        with open(args.state) as handle:
            return int(handle.read() or 0)
    except (TypeError, FileNotFoundError):
        return 0


if args.then == "die" and 0 <= args.after <= requests_so_far():
    print("test device: powered off", file=sys.stderr)
    sys.exit(1)


def prepare_agent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: ends with the relay
    if args.then.startswith("crash"):
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


log("start")
agent = subprocess.Popen([args.agent], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         cwd=args.cwd, preexec_fn=prepare_agent)


def pump():
    while chunk := os.read(agent.stdout.fileno(), 65536):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


threading.Thread(target=pump, daemon=True).start()
stdin = sys.stdin.buffer
seen = first = requests_so_far()
try:
    while head := stdin.read(wire.HEADER_SIZE):
        body = stdin.read(wire.peek_header(head).length - len(head))
        seen += 1
        if args.state:
            with open(args.state, "w") as handle:
                handle.write(str(seen))
        if (args.then == "crash" and seen == args.after + 1) or (
            args.then == "crash-every" and seen > args.after
        ):
            agent.send_signal(signal.SIGSEGV)
            agent.wait()
            break
        if args.then == "stop" and seen == max(args.after + 1, first + 1):
            agent.send_signal(signal.SIGSTOP)
        if args.then in ("die", "hang") and 0 <= args.after < seen:
            if args.then == "die":
                agent.kill()
                print("test device: lost power", file=sys.stderr)
                break
            while stdin.read(65536):
                pass
            break
        agent.stdin.write(head + body)
        agent.stdin.flush()
finally:
    if agent.poll() is None:
        agent.stdin.close()
        try:
            agent.wait(timeout=5)
        except subprocess.TimeoutExpired:
            agent.kill()
    log("end")
'''

CASES = """\
import pytest

from harness.data.options import OptionsMap


@pytest.mark.parametrize("n", range({count}))
def test_set(et, n):
    options = OptionsMap.from_dict({{"ProbeA": {{"k": n}}, "ProbeB": {{"s": str(n)}}}})
    et.set(options).raise_for_differences()


def test_without_device():
    pass
"""

HOLD_LOCK = """\
import sys
from pathlib import Path

from harness.farm.lock import DeviceLock

lock = DeviceLock(sys.argv[1], Path(sys.argv[2]))
lock.acquire(timeout=10)
print("held", flush=True)
sys.stdin.read()
lock.release()
"""

# Requests a device sees: HELLO; test 0: RESET, REGISTER, SET; test k > 0: RESET, SET.
# So test k's SET is request 2k + 4: a device that fails after 2k + 3 requests fails in
# the call of test k.


def fails_in_call_of(k: int) -> int:
    return 2 * k + 3


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    elapsed: float
    results_dir: Path

    def results(self) -> dict[str, dict[str, Any]]:
        path = self.results_dir / "results.jsonl"
        lines = path.read_text("utf-8").splitlines()
        return {r["nodeid"].split("::")[-1]: r for r in map(json.loads, lines)}


class Farm:
    """A directory of host-like device profiles, and pytest runs against them."""

    def __init__(self, root: Path, work_dir: Path, cases: int = 8) -> None:
        self.root = root
        self.work_dir = work_dir
        self.devices = root / "devices"
        self.devices.mkdir()
        (root / "relay.py").write_text(RELAY, "utf-8")
        (root / "test_cases.py").write_text(CASES.format(count=cases), "utf-8")
        self.runs = 0

    def profile(
        self,
        file: str,
        *,
        name: str | None = None,
        relay: list[str] | None = None,
        case_timeout: float = 30,
        tags: tuple[str, ...] = (),
        work_dir: Path | None = None,
    ) -> str:
        data: dict[str, Any] = {
            "name": name or file,
            "transport": {"kind": "local"},
            "work_dir": str(work_dir or self.work_dir),
            "tags": list(tags),
            "timeouts": {"case": case_timeout},
        }
        if relay is not None:
            data["agent"] = {"wrapper": [sys.executable, str(self.root / "relay.py"), *relay]}
        (self.devices / f"{file}.yaml").write_text(yaml.safe_dump(data), "utf-8")
        return file

    def command(self, *args: str) -> tuple[list[str], Path]:
        self.runs += 1
        results = self.root / f"results-{self.runs}"
        return [
            sys.executable,
            "-m",
            "pytest",
            "test_cases.py",
            "-p",
            "no:cacheprovider",
            "--devices-dir",
            str(self.devices),
            "--lock-dir",
            str(self.root / "locks"),
            "--results-dir",
            str(results),
            *args,
        ], results

    def popen(self, *args: str, **kwargs: Any) -> tuple[subprocess.Popen[str], Path]:
        argv, results = self.command(*args)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}
        env[TRUSTED_PROFILES_ENV] = str(self.devices)  # the relay wrapper runs here
        process = subprocess.Popen(
            argv,
            cwd=self.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            **kwargs,
        )
        return process, results

    def run(self, *args: str, timeout: float = 120) -> Run:
        started = time.monotonic()
        process, results = self.popen(*args)
        stdout, _ = process.communicate(timeout=timeout)
        return Run(process.returncode, stdout, time.monotonic() - started, results)


def child(parent: ET.Element, path: str) -> ET.Element:
    """The first element at ``path`` in ``parent``, where the test expects one."""
    found = parent.find(path)
    assert found is not None, f"no {path} in <{parent.tag}>"
    return found


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One device work directory for the module: the agent is copied there once."""
    return tmp_path_factory.mktemp("device-work")


@pytest.fixture
def farm(tmp_path: Path, work_dir: Path) -> Farm:
    return Farm(tmp_path, work_dir)


def test_two_devices_in_one_run_each_test_id_names_its_device(farm: Farm) -> None:
    farm.profile("alpha")
    farm.profile("beta")
    junit = farm.root / "junit.xml"
    run = farm.run("--device", "alpha,beta", f"--junitxml={junit}")
    assert run.returncode == 0, run.stdout
    results = run.results()
    assert sorted(results) == sorted(
        [f"test_set[{d}-{n}]" for d in ("alpha", "beta") for n in range(8)]
        + ["test_without_device"]
    )
    assert results["test_without_device"]["device"] is None
    assert results["test_set[beta-7]"]["device"] == "beta"
    assert results["test_set[beta-7]"]["facts"]["runtime"].startswith("executorch ")
    assert results["test_set[alpha-0]"]["verdicts"][0]["summary"] == (
        "set: ok, 2 backends as expected"
    )
    assert "== device farm ==" in run.stdout and "backend options delivery on beta" in run.stdout
    suite = child(ET.parse(junit).getroot(), "testsuite")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_set[alpha-3]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["device"] == "alpha" and props["abi"] and props["agent_version"]
    suite_props = {p.get("name"): p.get("value") for p in child(suite, "properties")}
    assert suite_props["devices"] == "alpha,beta"
    page = (run.results_dir / "report.html").read_text("utf-8")
    assert "<th>alpha</th><th>beta</th>" in page
    run_info = json.loads((run.results_dir / "run.json").read_text("utf-8"))
    assert run_info["devices"] == ["alpha", "beta"] and run_info["exit_status"] == 0


def test_with_two_workers_each_device_stays_on_one_worker(farm: Farm) -> None:
    farm.profile("alpha", tags=("pair",))
    farm.profile("beta", tags=("pair",))
    run = farm.run("--device", "tag:pair", "-n", "2", "-v")
    assert run.returncode == 0, run.stdout
    workers: dict[str, set[str]] = {"alpha": set(), "beta": set()}
    for line in run.stdout.splitlines():
        if line.startswith("[gw") and "PASSED" in line and "test_set[" in line:
            device = line.split("test_set[", 1)[1].split("-", 1)[0]
            workers[device].add(line.split("]", 1)[0])
    assert all(len(w) == 1 for w in workers.values()), workers
    assert workers["alpha"] != workers["beta"]
    assert len(run.results()) == 17


def _agent_intervals(log: Path) -> list[tuple[float, float]]:
    starts, intervals = {}, []
    for event, when, pid in (line.split() for line in log.read_text("utf-8").splitlines()):
        if event == "start":
            starts[pid] = float(when)
        else:
            intervals.append((starts.pop(pid), float(when)))
    assert not starts, "an agent never ended"
    return intervals


def test_two_concurrent_runs_never_use_one_device_at_once(farm: Farm) -> None:
    for run in ("1", "2"):
        farm.profile(
            f"shared-{run}", name="shared", relay=["--log", str(farm.root / f"agents-{run}.log")]
        )
    first, _ = farm.popen("--device", "shared-1")
    second, _ = farm.popen("--device", "shared-2")
    for process in (first, second):
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
    one = _agent_intervals(farm.root / "agents-1.log")
    two = _agent_intervals(farm.root / "agents-2.log")
    assert one and two
    assert max(end for _, end in one) <= min(start for start, _ in two) or (
        max(end for _, end in two) <= min(start for start, _ in one)
    ), f"agents of the two runs overlapped: {one} {two}"


def test_a_device_held_elsewhere_times_out_naming_the_holder(farm: Farm) -> None:
    farm.profile("shared")
    (farm.root / "hold_lock.py").write_text(HOLD_LOCK, "utf-8")
    holder = subprocess.Popen(
        [sys.executable, str(farm.root / "hold_lock.py"), "shared", str(farm.root / "locks")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        run = farm.run("--device", "shared", "--lock-timeout", "0.5")
    finally:
        holder.communicate("", timeout=30)
    assert run.returncode == 1, run.stdout
    results = run.results()
    first = results["test_set[shared-0]"]
    assert (first["outcome"], first["infra"]["type"]) == ("infra", "DeviceBusy")
    assert f"in use by pid {holder.pid} on " in first["infra"]["message"]
    assert "hold_lock.py shared" in first["infra"]["message"]
    rest = [results[f"test_set[shared-{n}]"]["infra"] for n in range(1, 8)]
    assert {r["type"] for r in rest} == {"DeviceQuarantined"}
    assert "bring-up failed: DeviceBusy" in rest[0]["message"]
    assert results["test_without_device"]["outcome"] == "passed"
    assert " 1 passed, 8 infra" in run.stdout
    assert run.elapsed < 30


def test_a_device_that_dies_mid_run_is_retried_then_quarantined_the_other_goes_on(
    farm: Farm,
) -> None:
    farm.profile(
        "dying",
        relay=[
            "--state",
            str(farm.root / "dying.state"),
            "--after",
            str(fails_in_call_of(3)),
            "--then",
            "die",
        ],
    )
    farm.profile("steady")
    junit = farm.root / "junit.xml"
    run = farm.run("--device", "dying,steady", "-n", "2", f"--junitxml={junit}")
    assert run.returncode == 1, run.stdout
    results = run.results()
    assert all(results[f"test_set[steady-{n}]"]["outcome"] == "passed" for n in range(8))
    assert [results[f"test_set[dying-{n}]"]["outcome"] for n in range(3)] == ["passed"] * 3
    died = results["test_set[dying-3]"]
    assert (died["outcome"], died["infra"]["type"], died["infra"]["phase"]) == (
        "infra",
        "TransportLost",
        "call",
    )
    assert len(died["failed_tries"]) == 2  # the first try and one retry with a fresh agent
    assert "powered off" in died["failed_tries"][1]
    stderr = dict(died["sections"])
    assert any(
        "lost power" in text
        for title, text in stderr.items()
        if title.startswith("agent stderr on dying")
    )
    next_one = results["test_set[dying-4]"]
    assert (next_one["infra"]["type"], next_one["infra"]["phase"]) == ("TransportLost", "setup")
    checked = results["test_set[dying-5]"]["infra"]
    assert checked["type"] == "DeviceQuarantined"
    assert "health check after 2 consecutive infrastructure errors" in checked["message"]
    for n in range(6, 8):
        assert results[f"test_set[dying-{n}]"]["infra"]["type"] == "DeviceQuarantined"
    assert "quarantined: dying:" in run.stdout and "12 passed, 5 infra" in run.stdout
    case = next(
        c
        for c in ET.parse(junit).getroot().iter("testcase")
        if c.get("name") == "test_set[dying-3]"
    )
    assert case.find("failure") is None
    assert child(case, "error").get("type") == "TransportLost"
    assert run.elapsed < 60


def test_a_hung_agent_times_out_and_the_run_timeout_ends_the_rest(
    tmp_path: Path, work_dir: Path
) -> None:
    farm = Farm(tmp_path, work_dir, cases=12)
    farm.profile(
        "hung",
        case_timeout=1,
        relay=[
            "--state",
            str(tmp_path / "hung.state"),
            "--after",
            str(fails_in_call_of(2)),
            "--then",
            "hang",
        ],
    )
    run = farm.run("--device", "hung", "--run-timeout", "4", "--quarantine-after", "100")
    assert run.returncode == 1, run.stdout
    results = run.results()
    assert len(results) == 13  # every test has a result, none was left hanging
    outcomes = {
        name: (r["outcome"], r["infra"] and r["infra"]["type"]) for name, r in results.items()
    }
    assert outcomes["test_set[hung-2]"] == ("infra", "TransportTimeout")
    assert "no answer within 1.0 s" in results["test_set[hung-2]"]["infra"]["message"]
    expired = [n for n, (_, kind) in outcomes.items() if kind == "RunTimeExpired"]
    assert expired and "--run-timeout 4 s" in results[expired[0]]["infra"]["message"]
    assert {o for o, _ in outcomes.values()} == {"passed", "infra"}
    assert run.elapsed < 20


def test_results_survive_a_run_killed_with_sigkill(farm: Farm) -> None:
    farm.profile(
        "stuck",
        case_timeout=120,
        relay=[
            "--state",
            str(farm.root / "stuck.state"),
            "--after",
            str(fails_in_call_of(4)),
            "--then",
            "hang",
        ],
    )
    process, results_dir = farm.popen("--device", "stuck", start_new_session=True)
    assert process.stdout is not None  # a pipe: Farm.popen asks for one
    results_file = results_dir / "results.jsonl"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # wait for tests 0..3 to be written
            if results_file.is_file() and len(results_file.read_text("utf-8").splitlines()) >= 4:
                break
            assert process.poll() is None, process.stdout.read()
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    written = [json.loads(line) for line in results_file.read_text("utf-8").splitlines()]
    names = [r["nodeid"].split("::")[-1] for r in written]
    assert [f"test_set[stuck-{n}]" for n in range(4)] == [n for n in names if "stuck" in n]
    assert {r["outcome"] for r in written} == {"passed"}


def test_core_files_of_a_crashed_agent_are_kept_with_the_result(farm: Farm, tmp_path: Path) -> None:
    # Where the kernel writes the core is the machine's setting, not the harness's: with
    # a plain file name it lands in the agent's directory and must be kept; piped to a
    # crash handler (systemd-coredump, apport), there is none and none may be invented.
    # Collecting itself is tested apart from the kernel in tests/system/test_farm_units.py.
    pattern = Path("/proc/sys/kernel/core_pattern").read_text("utf-8").strip()
    kernel_writes_core_here = not (pattern.startswith("|") or "/" in pattern)
    crash_work = tmp_path / "crash-work"
    farm.profile(
        "crashy",
        work_dir=crash_work,
        relay=[
            "--state",
            str(farm.root / "crashy.state"),
            "--after",
            str(fails_in_call_of(3)),
            "--then",
            "crash",
            "--cwd",
            str(crash_work),
        ],
    )
    run = farm.run("--device", "crashy")
    assert run.returncode == 0, run.stdout  # the retry, on a fresh agent, passed
    crashed = run.results()["test_set[crashy-3]"]
    assert crashed["outcome"] == "passed"
    assert crashed["failed_tries"][0].startswith("TransportLost: ")
    if kernel_writes_core_here:
        assert crashed["artifacts"] == ["artifacts/crashy/test_set_crashy-3_/try-1/core"]
        core = run.results_dir / crashed["artifacts"][0]
        assert core.read_bytes()[:4] == b"\x7fELF"
    else:
        assert crashed["artifacts"] == []
    assert not (crash_work / "core").exists()
    assert "retried" in run.stdout


def test_an_unusable_sdk_prefix_stops_the_run_at_the_start(
    farm: Farm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not a traceback in the setup of every test: one usage error before any test."""
    farm.profile("alpha")
    monkeypatch.setenv("ET_HARNESS_SDK", str(tmp_path / "no-such-prefix"))
    run = farm.run("--device", "alpha")
    assert run.returncode == 4, run.stdout
    assert "ERROR: ET_HARNESS_SDK: " in run.stdout and "is not a directory" in run.stdout
    assert "Traceback" not in run.stdout


def test_modes_that_split_a_device_over_workers_are_refused(farm: Farm) -> None:
    farm.profile("alpha")
    run = farm.run("--device", "alpha", "-n", "2", "--dist", "loadfile")
    assert run.returncode == 4
    assert "--dist loadfile would split a device's tests" in run.stdout
    unknown = farm.run("--device", "nope")
    assert unknown.returncode == 4 and "ERROR: --device: unknown device 'nope'" in unknown.stdout
    untagged = farm.run("--device", "tag:gpu")  # the message names the option once
    assert untagged.returncode == 4 and "ERROR: --device tag:gpu: no profile" in untagged.stdout


def test_an_infra_error_in_a_run_without_devices_is_named_in_the_summary(tmp_path) -> None:
    """No device, so no device tables: the infrastructure error is still named, with its
    test and message, and fails the run."""
    (tmp_path / "test_lost.py").write_text(
        "from harness.transport.base import TransportTimeout\n\n\n"
        "def test_times_out():\n"
        "    raise TransportTimeout('the board stopped answering')\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_lost.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert "1 infra" in done.stdout, done.stdout
    assert (
        "INFRA test_lost.py::test_times_out (call): harness.transport.base."
        "TransportTimeout: the board stopped answering" in done.stdout
    ), done.stdout
