"""A private sshd on 127.0.0.1 for the SSH path: its own config, host key and authorized key.

It is the hypervisors' SSH: the tests reach lab daemons through it with qemu+ssh:// URIs
(proxy=netcat, socket=...) and run modules over Ansible's ssh connection.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LoopbackSshd:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.port = _free_port()
        self.host_key = self.dir / "host_key"
        self.client_key = self.dir / "client_key"
        self.known_hosts = self.dir / "known_hosts"
        self.pidfile = self.dir / "sshd.pid"
        self.pid: int | None = None

    def _keygen(self, path: Path) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)

    def start(self) -> LoopbackSshd:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._keygen(self.host_key)
        self._keygen(self.client_key)
        authorized = self.dir / "authorized_keys"
        authorized.write_text(self.client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o600)
        host_public = self.host_key.with_suffix(".pub").read_text().split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {' '.join(host_public)}\n")
        config = self.dir / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress 127.0.0.1:{self.port}",
            f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {authorized}",
            f"PidFile {self.pidfile}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "",
        ]))
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
        subprocess.run([SSHD, "-f", str(config), "-E", str(self.dir / "sshd.log")], check=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.pidfile.exists() and self.pidfile.read_text().strip():
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    self.pid = int(self.pidfile.read_text())
                    return self
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(self.dir / 'sshd.log').read_text()}")

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.pid = None

    def uri(self, socket_path: str | Path, scheme: str = "qemu+ssh", **params: str) -> str:
        """A URI to the lab daemon listening on socket_path, through this sshd."""
        query = {"socket": str(socket_path), "proxy": "netcat", **params}
        return (f"{scheme}://root@127.0.0.1:{self.port}/system?"
                + "&".join(f"{key}={value}" for key, value in query.items()))
