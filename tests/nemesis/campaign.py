"""A fault campaign: a cluster in network namespaces, clients recording a history, a
nemesis injecting faults drawn from a seed, and the checker reading the outcome.

The cluster: one broker, three daemons, three node agents, two offsets clients, one
controller-operations client, six group members and the campaign's own probe, each in a
host of its own (:mod:`tests.nemesis.netlab`). After each fault heals the probe waits for
the controller and every group shard to answer (its time is the fault's recovery), then
the next fault comes. At the end every fault is healed, the clients stop, the probe reads
every key, and :func:`tests.nemesis.checker.check` reads the whole history.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from kafkacoord.storage.broker import EmbeddedBroker
from kafkacoord.storage.kafka_broker import KafkaBroker
from tests.failures.patching import SOURCES_ENV
from tests.integration.cluster import DaemonProcess, fast_daemon_env

from .checker import check
from .history import Fault, now_ns, read_history
from .netlab import Host, NetLab
from .timeline import plot

ROOT = Path(__file__).resolve().parents[2]
BROKER_PORT = 9092
LISTEN_PORT = 9400
AGENT_IDS = (101, 102, 103)
WRITER_THREADS = 4
WRITER_PARTITIONS = 4
SHARDS = 6
# After a heal, the controller and every shard must serve within this.
RECOVERY_BOUND_S = 90.0

PARTITIONS = (
    "partition-daemon-broker",
    "partition-client-daemon",
    "partition-client-broker",
    "partition-daemon-daemon",
    "partition-majority",
    "partition-one-way",
)
PAUSES = ("pause-daemon", "pause-agent", "pause-broker")
KILLS = ("kill-daemon", "kill-agent", "kill-broker")
CLOCKS = ("clock-jump", "clock-strobe")
KINDS = PARTITIONS + PAUSES + KILLS + CLOCKS
# tansu keeps its log in memory: a restart empties every topic, acknowledged offsets
# with them, so a broker kill there tests nothing but that.
TANSU_KINDS = tuple(k for k in KINDS if k != "kill-broker")


@dataclass(frozen=True)
class Step:
    """One fault of the schedule: ``quiet_s`` of calm, then ``kind`` on ``target``."""

    quiet_s: float
    kind: str
    target: str
    hold_s: float
    detail: str = ""


def schedule(seed: int, count: int, kinds: tuple[str, ...]) -> list[Step]:
    """The faults a seed draws: every kind once in a shuffled first round, then at random."""
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    order = first[:count] + [rng.choice(kinds) for _ in range(max(0, count - len(first)))]
    steps = []
    for kind in order:
        daemon = f"d{rng.randrange(3) + 1}"
        if kind == "partition-client-daemon":
            target = f"c{rng.randrange(2) + 1}|{daemon}"
        elif kind == "partition-client-broker":  # its routes stay as they were
            target = f"c{rng.randrange(2) + 1}|broker"
        elif kind == "partition-daemon-daemon":
            other = rng.choice([d for d in ("d1", "d2", "d3") if d != daemon])
            target = f"{daemon}|{other}"
        elif kind == "partition-majority":
            target = f"{daemon}|a{rng.randrange(3) + 1}|c{rng.randrange(2) + 1}"
        elif kind == "partition-one-way":
            target = rng.choice([f"broker>{daemon}", f"{daemon}>broker"])
        elif kind.endswith("-agent"):
            target = f"a{rng.randrange(3) + 1}"
        elif kind in ("pause-broker", "kill-broker"):
            target = "broker"
        else:
            target = daemon
        detail = ""
        # libfaketime's offsets need their sign: "41s" would end the daemon. Steps stay
        # within what a time daemon steps by (chrony and ntpd step past 1 s and 128 ms):
        # a step of minutes back stalls librdkafka's timed waits, which follow the wall
        # clock, by as much (docs/operations.md).
        if kind == "clock-jump":
            detail = f"{rng.choice([-1, 1]) * rng.randrange(1, 31):+d}s"
        elif kind == "clock-strobe":
            detail = f"{rng.randrange(1, 11):+d}s"
        steps.append(Step(rng.uniform(1.0, 4.0), kind, target, rng.uniform(3.0, 10.0), detail))
    return steps


def faketime_library() -> Path:
    spec = importlib.util.find_spec("libfaketime")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the libfaketime wheel is not installed (pip install libfaketime)")
    base = Path(next(iter(spec.submodule_search_locations)))
    return base / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"


def faketime_env(clock: Path) -> dict[str, str]:
    """A process's environment for a wall clock offset by what ``clock`` holds ("+5s")."""
    return {
        "LD_PRELOAD": str(faketime_library()),
        "FAKETIME_TIMESTAMP_FILE": str(clock),
        "FAKETIME_NO_CACHE": "1",
        # Only the wall clock moves, as an NTP step would move it.
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


@dataclass
class Result:
    broker: str
    seconds: float
    seed: int
    faults: dict[str, int]
    ops_ok: int
    ops_failed: int
    ops_unknown: int
    anomalies: dict[str, int]
    recovery_s_max: float
    recovery_s_by_kind: dict[str, float] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    def line(self) -> dict[str, Any]:
        return {
            "broker": self.broker, "seconds": self.seconds, "seed": self.seed,
            "faults": self.faults, "ops_ok": self.ops_ok, "ops_failed": self.ops_failed,
            "ops_unknown": self.ops_unknown, "anomalies": self.anomalies,
            "recovery_s_max": self.recovery_s_max, "recovery_s_by_kind": self.recovery_s_by_kind,
        }  # fmt: skip


class Campaign:
    """Builds the cluster in :meth:`start`; :meth:`run` drives it; :meth:`close` ends it."""

    def __init__(
        self,
        broker: str,
        out: Path,
        *,
        seed: int,
        log: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
        daemon_module: str = "kafkacoord",
        kinds: tuple[str, ...] | None = None,
        readers: frozenset[str] = frozenset(),
    ) -> None:
        self.broker_kind = broker
        self.out = out
        self.seed = seed
        self.log = log
        self.daemon_module = daemon_module
        # Offsets clients that only fetch: nothing of theirs waits on an append.
        self.readers = readers
        self.kinds = kinds or (KINDS if broker == "kafka" else TANSU_KINDS)
        self.prefix = f"__kn{seed % 10_000}_"
        self.lab = NetLab()
        self.hosts: dict[str, Host] = {}
        self.broker: EmbeddedBroker | KafkaBroker | None = None
        self.daemons: dict[str, DaemonProcess] = {}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        # Every daemon process started, restarts included: their logs are kept at the end.
        self.daemon_runs: list[tuple[str, DaemonProcess]] = []
        self.probe: subprocess.Popen[str] | None = None
        self.faults: list[Fault] = []
        self.recoveries: list[float] = []
        self.recovery_by_kind: dict[str, float] = {}
        self.liveness: list[str] = []
        self._files: list[IO[bytes]] = []
        self._strobe: threading.Event | None = None

    # -- building ----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.hosts['broker'].address}:{BROKER_PORT}"

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        names = ["broker", "d1", "d2", "d3", "a1", "a2", "a3", "c1", "c2", "c3", "ctl"]
        for name in names:
            self.hosts[name] = self.lab.add_host(name)
        self._start_broker()
        for name in ("d1", "d2", "d3"):
            self._start_daemon(name)
        self.log(f"nemesis: broker {self.bootstrap}, daemons up")
        self.probe = self._spawn_probe()
        first = self.serve(180.0)
        if first["waiting"]:
            raise RuntimeError(f"the cluster never served: {first}")
        for index, node in enumerate(AGENT_IDS):
            self._start_worker(f"a{index + 1}", "agent", "--node-id", str(node))
        for client in ("c1", "c2"):
            reads = ("--read-only",) if client in self.readers else ()
            self._start_worker(client, "offsets", "--writers", "c1,c2",
                               "--threads", str(WRITER_THREADS), *reads)  # fmt: skip
        self._start_worker("c3", "members", "--threads", "3", name="m")
        for client in ("c1", "c2"):
            self.wait_ok(client, 20)
        self._start_worker("c1", "controller", "--nodes", ",".join(map(str, AGENT_IDS)),
                           "--pause-s", "0.5", name="ops")  # fmt: skip

    def _start_broker(self) -> None:
        host = self.hosts["broker"]
        with self.lab.inside(host):
            if self.broker is None:
                if self.broker_kind == "kafka":
                    self.broker = KafkaBroker(
                        self.out / "kafka", host=host.address, port=BROKER_PORT,
                        controller_port=BROKER_PORT + 1,
                    )  # fmt: skip
                else:
                    self.broker = EmbeddedBroker(host=host.address, port=BROKER_PORT,
                                                 log_path=self.out / "tansu.log")  # fmt: skip
            self.broker.start()

    def _clock_file(self, name: str) -> Path:
        return self.out / f"clock-{name}"

    def _start_daemon(self, name: str) -> None:
        host = self.hosts[name]
        node = int(name[1:])
        env = fast_daemon_env(self.bootstrap, self.prefix, SHARDS)
        env.update({
            "KAFKACOORD_NODE_ID": str(node),
            "KAFKACOORD_DATA_DIR": str(self.out / name),
            "KAFKACOORD_LISTEN": f"{host.address}:{LISTEN_PORT}",
            # A lab network of its own, reached only by the campaign's workers.
            "KAFKACOORD_ALLOW_PLAINTEXT_ADMIN": "true",
            "PYTHONPATH": str(ROOT),  # a test's daemon module may live under tests/
        })  # fmt: skip
        if self.daemon_module != "kafkacoord":
            env.update(SOURCES_ENV)  # a broken build made by patching
        if any(kind.startswith("clock") for kind in self.kinds):
            clock = self._clock_file(name)
            clock.write_text("+0\n")
            env.update(faketime_env(clock))
        with self.lab.inside(host):
            self.daemons[name] = DaemonProcess(env, module=self.daemon_module)
        self.daemon_runs.append((name, self.daemons[name]))

    def _worker_argv(self, role: str, name: str, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "tests.nemesis.worker", role, "--name", name,
            "--out", str(self.out / "history" / f"{name}.jsonl"),
            "--bootstrap", self.bootstrap, "--prefix", self.prefix,
            "--shards", str(SHARDS), "--partitions", str(WRITER_PARTITIONS),
            "--seed", str(self.seed), *extra,
        ]  # fmt: skip

    def _start_worker(self, host: str, role: str, *extra: str, name: str | None = None) -> None:
        name = name or host
        (self.out / "logs").mkdir(exist_ok=True)
        log = (self.out / "logs" / f"{name}.log").open("ab")
        self._files.append(log)
        with self.lab.inside(self.hosts[host]):
            self.workers[name] = subprocess.Popen(
                self._worker_argv(role, name, *extra), cwd=ROOT, stdout=log, stderr=log,
                stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip

    def ok_ops(self, name: str) -> int:
        path = self.out / "history" / f"{name}.jsonl"
        with contextlib.suppress(FileNotFoundError), path.open() as lines:
            return sum('"outcome":"ok"' in line for line in lines)
        return 0

    def wait_ok(self, name: str, count: int, timeout_s: float = 90.0) -> None:
        """Until client ``name`` has ``count`` acknowledged calls: its routes are known."""
        deadline = time.monotonic() + timeout_s
        while self.ok_ops(name) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"client {name} had no {count} calls acknowledged in time")
            time.sleep(0.2)

    def _spawn_probe(self) -> subprocess.Popen[str]:
        (self.out / "logs").mkdir(exist_ok=True)
        log = (self.out / "logs" / "probe.log").open("ab")
        self._files.append(log)
        with self.lab.inside(self.hosts["ctl"]):
            return subprocess.Popen(
                self._worker_argv("probe", "probe"), cwd=ROOT, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip

    # -- the probe -----------------------------------------------------------------------

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.probe is not None and self.probe.stdin and self.probe.stdout
        self.probe.stdin.write(json.dumps(command) + "\n")
        self.probe.stdin.flush()
        line = self.probe.stdout.readline()
        if not line:
            raise RuntimeError(f"the probe exited ({self.probe.poll()}); see logs/probe.log")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def serve(self, within_s: float = RECOVERY_BOUND_S) -> dict[str, Any]:
        return self._ask({"do": "serve", "within_s": within_s})

    def replicated(self, within_s: float = RECOVERY_BOUND_S) -> dict[str, Any]:
        return self._ask({"do": "replicated", "within_s": within_s})

    # -- faults ------------------------------------------------------------------------

    def _pid(self, target: str) -> int:
        if target == "broker":
            assert self.broker is not None and self.broker.pid is not None
            return self.broker.pid
        if target in self.daemons:
            return self.daemons[target].process.pid
        return self.workers[target].pid

    @contextlib.contextmanager
    def fault(self, step: Step) -> Iterator[None]:
        """The fault is in force for the block; leaving it heals it."""
        kind, target = step.kind, step.target
        h = self.hosts
        if kind.startswith("partition"):
            if kind == "partition-one-way":
                sender, receiver = target.split(">")
                self.lab.drop(h[sender], h[receiver])
            elif kind == "partition-majority":
                minority = set(target.split("|"))
                for a in minority:
                    for b in set(h) - minority:
                        self.lab.cut(h[a], h[b])
            elif kind == "partition-daemon-broker":
                self.lab.cut(h[target], h["broker"])
            else:
                a, b = target.split("|")
                self.lab.cut(h[a], h[b])
        elif kind.startswith("pause"):
            os.kill(self._pid(target), signal.SIGSTOP)
        elif kind.startswith("kill"):
            self._kill(target)
        elif kind == "clock-jump":
            self._clock_file(target).write_text(f"{step.detail}\n")
        elif kind == "clock-strobe":
            self._strobe = threading.Event()
            threading.Thread(target=self._strobing, args=(target, step.detail, self._strobe),
                             daemon=True).start()  # fmt: skip
        t0 = now_ns()
        try:
            yield
        finally:
            self._heal(step)
            self.faults.append(Fault(kind, target, t0, now_ns()))

    def _strobing(self, target: str, offset: str, stop: threading.Event) -> None:
        skewed = False
        while not stop.wait(0.25):
            skewed = not skewed
            self._clock_file(target).write_text(f"{offset if skewed else '+0'}\n")

    def _kill(self, target: str) -> None:
        if target == "broker":
            assert self.broker is not None and self.broker._process is not None
            self.broker._process.kill()
            self.broker._process.wait(30)
        elif target in self.daemons:
            self.daemons[target].kill()
        else:
            self.workers[target].kill()
            self.workers[target].wait(30)

    def _heal(self, step: Step) -> None:
        kind, target = step.kind, step.target
        if kind.startswith("partition"):
            self.lab.heal()
        elif kind.startswith("pause"):
            os.kill(self._pid(target), signal.SIGCONT)
        elif kind.startswith("kill"):
            if target == "broker":
                assert self.broker is not None
                self.broker._process = None
                self._start_broker()
            elif target in self.daemons:
                self._start_daemon(target)
            else:
                node = AGENT_IDS[int(target[1:]) - 1]
                self._start_worker(target, "agent", "--node-id", str(node))
        elif kind.startswith("clock"):
            if self._strobe is not None:
                self._strobe.set()
                self._strobe = None
            self._clock_file(target).write_text("+0\n")

    # -- running -----------------------------------------------------------------------

    def run(self, seconds: float) -> Result:
        started = time.monotonic()
        steps = schedule(self.seed, max(8, int(seconds / 8)), self.kinds)
        lines = [
            f"  {i:3d} after {s.quiet_s:4.1f}s {s.kind:<24} {s.target:<12} {s.detail:>6} "
            f"for {s.hold_s:4.1f}s"
            for i, s in enumerate(steps)
        ]
        self.log(f"nemesis schedule (seed {self.seed}):\n" + "\n".join(lines))
        for index, step in enumerate(steps):
            if time.monotonic() - started + step.quiet_s + step.hold_s > seconds:
                break
            time.sleep(step.quiet_s)
            with self.fault(step):
                time.sleep(step.hold_s)
            answer = self.serve()
            self.recoveries.append(answer["seconds"])
            self.recovery_by_kind[step.kind] = max(
                answer["seconds"], self.recovery_by_kind.get(step.kind, 0.0)
            )
            waiting = f"; still waiting for {answer['waiting']}" if answer["waiting"] else ""
            self.log(f"nemesis: {index:3d} {step.kind} {step.target} healed; serving after "
                     f"{answer['seconds']:.1f}s{waiting}")  # fmt: skip
            if answer["waiting"]:
                self.liveness.append(f"after {step.kind} on {step.target}: {answer['waiting']} "
                                     f"not serving within {RECOVERY_BOUND_S:.0f}s")  # fmt: skip
        elapsed = time.monotonic() - started
        return self.finish(round(elapsed, 1))

    def finish(self, elapsed: float) -> Result:
        self._stop_clients()
        final = self._ask({"do": "final", "writers": ["c1", "c2"], "threads": WRITER_THREADS,
                           "partitions": WRITER_PARTITIONS})  # fmt: skip
        if final["unread"]:
            self.liveness.append(f"final read failed for {len(final['unread'])} keys")
        entries = read_history(sorted((self.out / "history").glob("*.jsonl")))
        checked = check(entries)
        anomalies = checked.counts()
        anomalies["liveness"] = len(self.liveness)
        details = [f"{a.kind} {a.key}: {a.message}" for a in checked.anomalies] + self.liveness
        (self.out / "anomalies.txt").write_text("\n".join(details) + "\n")
        with (self.out / "faults.jsonl").open("w") as windows:
            windows.writelines(json.dumps(asdict(f)) + "\n" for f in self.faults)
        plot(entries, self.faults, self.out / "timeline.png",
             f"kafkacoord on {self.broker_kind}, seed {self.seed}")  # fmt: skip
        return Result(
            broker=self.broker_kind, seconds=elapsed, seed=self.seed,
            faults=dict(Counter(f.kind for f in self.faults)),
            ops_ok=checked.ops_ok, ops_failed=checked.ops_failed, ops_unknown=checked.ops_unknown,
            anomalies=anomalies, recovery_s_max=max(self.recoveries, default=0.0),
            recovery_s_by_kind=dict(sorted(self.recovery_by_kind.items())),
            details=details,
        )  # fmt: skip

    def _stop_clients(self) -> None:
        """Every client stops after its calls in flight; one that does not is a liveness fault."""
        for process in self.workers.values():
            if process.poll() is None:
                process.terminate()
        for name, process in self.workers.items():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                self.liveness.append(f"client {name} did not stop within 30s of SIGTERM")
                process.kill()
                process.wait()

    def close(self) -> None:
        if self._strobe is not None:
            self._strobe.set()
        for process in self.workers.values():
            if process.poll() is None:
                process.kill()
        if self.probe is not None and self.probe.poll() is None:
            self.probe.kill()
        for daemon in self.daemons.values():
            with contextlib.suppress(Exception):
                os.kill(daemon.process.pid, signal.SIGCONT)
            daemon.stop()
        if self.broker is not None:
            with contextlib.suppress(Exception):
                if self.broker.pid is not None:
                    os.kill(self.broker.pid, signal.SIGCONT)
            self.broker.stop()
        for file in self._files:
            file.close()
        self.lab.close()
        for run, (name, daemon) in enumerate(self.daemon_runs):
            with (self.out / "logs" / f"{name}-{run}.jsonl").open("w") as events:
                events.writelines(json.dumps(event) + "\n" for event in daemon.events)
