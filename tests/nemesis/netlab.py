"""Test hosts in network namespaces, joined by a bridge, and partitions between them.

Every host is a namespace of its own with one address on a private /24. The bridge lives
in a namespace too, so nothing of the lab touches the machine's own interfaces, and
deleting the namespaces removes every link. Partitions are iptables rules in the
receiving host's INPUT chain, as Jepsen cuts networks: a rule drops what one host sends
another, so a cut both ways is two rules and a one-way drop is one.

A process joins a host through :func:`NetLab.inside`, which moves the calling thread
into the host's namespace (``setns``) for the ``with`` block: a child started there, and
every socket and thread made there, stays in it. A host is Linux root's business, so
:func:`available` says whether this machine can make one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def available() -> str | None:
    """None when namespaces and iptables work here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: iproute2, iptables)"
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str


class NetLab:
    """Hosts on one bridge; :meth:`close` deletes them all."""

    def __init__(self, tag: str | None = None) -> None:
        self.tag = tag or f"{random.randrange(16**4):04x}"
        # A /24 of its own, so labs of two runs on one machine do not meet.
        self._subnet = f"10.{200 + random.randrange(50)}.{random.randrange(256)}"
        self.hosts: dict[str, Host] = {}
        self._switch = f"kcn{self.tag}-sw"
        self._rules: set[tuple[str, str]] = set()
        _run("ip", "netns", "add", self._switch)
        _run("ip", "-n", self._switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self._switch, "link", "set", "br0", "up")

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 2
        namespace = f"kcn{self.tag}-{name}"
        host = Host(name, namespace, f"{self._subnet}.{index}")
        inner, outer = f"kc{self.tag}h{index}", f"kc{self.tag}s{index}"
        _run("ip", "netns", "add", namespace)
        _run("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        _run("ip", "link", "set", inner, "netns", namespace)
        _run("ip", "link", "set", outer, "netns", self._switch)
        _run("ip", "-n", self._switch, "link", "set", outer, "master", "br0", "up")
        _run("ip", "-n", namespace, "addr", "add", f"{host.address}/24", "dev", inner)
        _run("ip", "-n", namespace, "link", "set", inner, "up")
        _run("ip", "-n", namespace, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    @contextlib.contextmanager
    def inside(self, host: Host) -> Iterator[None]:
        """Runs the block in the host's network namespace (this thread only)."""
        home = f"/proc/self/task/{threading.get_native_id()}/ns/net"
        saved = os.open(home, os.O_RDONLY)
        try:
            _setns(f"/var/run/netns/{host.namespace}")
            try:
                yield
            finally:
                if _libc.setns(saved, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back to the home namespace")
        finally:
            os.close(saved)

    def drop(self, sender: Host, receiver: Host) -> None:
        """Packets from ``sender`` to ``receiver`` are lost, until :meth:`heal`."""
        if (sender.name, receiver.name) in self._rules:
            return
        self._iptables(receiver, "-A", sender)
        self._rules.add((sender.name, receiver.name))

    def cut(self, a: Host, b: Host) -> None:
        self.drop(a, b)
        self.drop(b, a)

    def heal(self) -> None:
        for sender, receiver in sorted(self._rules):
            self._iptables(self.hosts[receiver], "-D", self.hosts[sender])
        self._rules.clear()

    @property
    def cuts(self) -> set[tuple[str, str]]:
        return set(self._rules)

    def _iptables(self, receiver: Host, action: str, sender: Host) -> None:
        _run("ip", "netns", "exec", receiver.namespace,
             "iptables", "-w", action, "INPUT", "-s", sender.address, "-j", "DROP")  # fmt: skip

    def close(self) -> None:
        for host in self.hosts.values():
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
        subprocess.run(["ip", "netns", "del", self._switch], capture_output=True)
        self.hosts.clear()

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def clean_stale(prefix: str = "kcn") -> list[str]:
    """Deletes namespaces a killed run left behind (their names start with ``prefix``)."""
    gone = []
    for entry in sorted(Path("/var/run/netns").glob(f"{prefix}*")):
        subprocess.run(["ip", "netns", "del", entry.name], capture_output=True)
        gone.append(entry.name)
    return gone
