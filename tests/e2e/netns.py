"""Hosts for multi-host e2e tests: Linux network namespaces on one private switch.

`Network(["master", "pool", "a", "b"])` builds, on `__enter__`, one namespace per host plus a
switch namespace holding a bridge; each host gets a veth pair, its end named `eth0` with the
address `10.201.0.<n>/24` (n = 1, 2, ... in list order) and `lo` up. Nothing is created in the
caller's namespace and no host has a default route, so traffic can only reach the other hosts
and each host's loopback. `__exit__` kills what still runs inside the namespaces and deletes
them, also when the body raised.

`Host.argv(cmd)` wraps a command to run on that host (`ip netns exec NAME ...`, which execs in
place: process groups and inherited descriptors survive); `Host.python_wrapper()` writes an
executable that starts this interpreter on the host, for `EngineProcess(python=...)`.
`Network.cut(host)` / `Network.restore(host)` take the host's switch port down / up: the host
drops off the network (packets to and from it vanish) while its processes keep running.

Needs root (CAP_NET_ADMIN) and `ip` from iproute2; `probe()` says why it cannot run, for skips.
Namespace names are `vam<pid>-<host>`; namespaces left behind by a killed run (their pid gone)
are removed on the next `__enter__`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Host", "Network", "NetnsError", "probe"]

SUBNET = "10.201.0"
PREFIX_LEN = 24
_IP_TIMEOUT_S = 20.0
_NAME_RE = re.compile(r"^vam(\d+)-")


class NetnsError(RuntimeError):
    """An `ip` command failed (message: the command and its stderr)."""


def _ip_binary() -> str:
    return shutil.which("ip") or "/usr/sbin/ip"


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(
        [_ip_binary(), *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False
    )
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def probe() -> str | None:
    """None when namespaces can be made here, else the reason (for `pytest.skip`)."""
    if shutil.which("ip") is None and not os.path.exists("/usr/sbin/ip"):
        return "`ip` (iproute2) is not installed"
    name = f"vam{os.getpid()}-probe"
    try:
        _ip("netns", "add", name)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot create a network namespace (needs root / CAP_NET_ADMIN): {exc}"
    try:
        _ip("-n", name, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
    except NetnsError as exc:
        return f"cannot create a veth pair: {exc}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


def _ours() -> list[str]:
    # `ip netns list` prints "name" or "name (id: N)".
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if _NAME_RE.match(line)]


def _remove_stale() -> None:
    for name in _ours():
        match = _NAME_RE.match(name)
        assert match is not None
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _delete_namespace(name)
        except PermissionError:
            continue


def _delete_namespace(name: str) -> None:
    # A namespace outlives `ip netns del` while processes still run in it: end them first
    # (only processes inside this namespace, which the tests started there).
    for pid in _ip("netns", "pids", name, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("netns", "del", name, check=False)


@dataclass(frozen=True)
class Host:
    """One host: a namespace `name` reachable at `address` on the switch."""

    role: str
    name: str
    address: str
    port: str  # the switch-side end of its veth pair

    def argv(self, cmd: list[str]) -> list[str]:
        """`cmd` run inside this host's namespace."""
        return [_ip_binary(), "netns", "exec", self.name, *cmd]

    def python_wrapper(self, folder: str | os.PathLike[str]) -> str:
        """Write `folder/python-<role>`, which runs this interpreter on this host; its path."""
        path = Path(folder) / f"python-{self.role}"
        path.write_text(
            f'#!/bin/sh\nexec {_ip_binary()} netns exec {self.name} {sys.executable} "$@"\n',
            encoding="utf-8",
        )
        path.chmod(0o755)
        return str(path)

    def run(self, cmd: list[str], timeout_s: float = 30.0) -> str:
        """Run `cmd` on this host and return its stdout.

        Raises:
            subprocess.CalledProcessError: it exited non-zero.
            subprocess.TimeoutExpired: it ran past `timeout_s`.
        """
        done = subprocess.run(
            self.argv(cmd), capture_output=True, text=True, timeout=timeout_s, check=True
        )
        return done.stdout

    def http_get(self, url: str, timeout_s: float = 10.0) -> str:
        """The body of `url`, fetched from this host (the caller may sit on no network)."""
        script = (
            "import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
        )
        return self.run([sys.executable, "-c", script, url], timeout_s)

    def listening(self) -> list[tuple[str, int]]:
        """`(address, port)` of every TCP socket listening on this host."""
        out = self.run(["ss", "-Hltn"])
        found = []
        for line in out.splitlines():
            local = line.split()[3]
            address, _, port = local.rpartition(":")
            found.append((address.strip("[]"), int(port)))
        return found


class Network:
    """Hosts joined by one switch (see the module docstring).

    Args:
        roles: host names, in address order (`roles[0]` is `<subnet>.1`).
        subnet: the first three octets of the hosts' /24 (one network per subnet: a caller that
            joins its own namespace to the switch needs a subnet no other run uses).

    Raises:
        NetnsError: an `ip` command failed while building the network (what was built is
            removed first).
    """

    def __init__(self, roles: list[str], subnet: str = SUBNET) -> None:
        tag = f"vam{os.getpid()}"
        self.switch = f"{tag}-sw"
        self.subnet = subnet
        self.hosts = {
            role: Host(role, f"{tag}-{role}", f"{subnet}.{i}", f"p{i}")
            for i, role in enumerate(roles, start=1)
        }

    def __getitem__(self, role: str) -> Host:
        return self.hosts[role]

    @property
    def namespaces(self) -> list[str]:
        return [self.switch, *(h.name for h in self.hosts.values())]

    def __enter__(self) -> Network:
        _remove_stale()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for host in self.hosts.values():
            _ip("netns", "add", host.name)
            _ip(
                "-n", self.switch, "link", "add", host.port, "type", "veth",
                "peer", "name", "eth0", "netns", host.name,
            )  # fmt: skip
            _ip("-n", self.switch, "link", "set", host.port, "master", "br0", "up")
            _ip("-n", host.name, "addr", "add", f"{host.address}/{PREFIX_LEN}", "dev", "eth0")
            _ip("-n", host.name, "link", "set", "eth0", "up")
            _ip("-n", host.name, "link", "set", "lo", "up")

    def close(self) -> None:
        """Kill what runs in the namespaces and delete them (idempotent)."""
        for name in reversed(self.namespaces):
            _delete_namespace(name)

    def cut(self, role: str) -> None:
        """Take `role`'s switch port down: the host is off the network, its processes run on."""
        _ip("-n", self.switch, "link", "set", self.hosts[role].port, "down")

    def restore(self, role: str, timeout_s: float = 30.0) -> None:
        """Bring `role`'s port back up and wait until the bridge forwards through it.

        Raises:
            NetnsError: the port is not forwarding after `timeout_s`.
        """
        port = self.hosts[role].port
        _ip("-n", self.switch, "link", "set", port, "up")
        deadline = time.monotonic() + timeout_s
        while "state forwarding" not in _ip("-n", self.switch, "-d", "link", "show", port):
            if time.monotonic() > deadline:
                raise NetnsError(f"switch port of {role} not forwarding after {timeout_s:g} s")
            time.sleep(0.1)

    def existing(self) -> list[str]:
        """This network's namespaces that exist right now."""
        present = set(_ours())
        return [n for n in self.namespaces if n in present]
