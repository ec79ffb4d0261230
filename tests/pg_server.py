"""A throw-away PostgreSQL server from Debian's packages, for tests and benchmarks.

No systemd here: initdb into a temporary directory and run postgres directly, as the postgres
user (the server refuses to run as root), listening on loopback only, on a free port, with a
password (scram) so that the ledger's password hiding is exercised. ``stop()`` ends the server
by the PID it recorded and removes the directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

START_TIMEOUT_S = 30


def _bindir() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise RuntimeError("PostgreSQL server not installed: run scripts/setup (apt package postgresql-15)")
    return os.path.dirname(found[-1])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="berth-pg-", dir="/tmp")
        self.port = _free_port()
        self.password = secrets.token_hex(8)
        self.user = "berth"
        self.process: subprocess.Popen | None = None
        self._run_as = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    def _demote(self) -> None:
        if self._run_as is not None:
            os.setgid(self._run_as.pw_gid)
            os.setuid(self._run_as.pw_uid)

    def start(self) -> PostgresServer:
        bindir = _bindir()
        data = os.path.join(self.dir, "data")
        pwfile = os.path.join(self.dir, "pwfile")
        with open(pwfile, "w", encoding="utf-8") as handle:
            handle.write(self.password + "\n")
        if self._run_as is not None:
            for path in (self.dir, pwfile):
                os.chown(path, self._run_as.pw_uid, self._run_as.pw_gid)
        subprocess.run(
            [os.path.join(bindir, "initdb"), "-D", data, "-U", self.user, "--pwfile", pwfile,
             "-A", "scram-sha-256", "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, preexec_fn=self._demote, timeout=120,
        )
        # huge_pages=off: PostgreSQL's default (try) maps its shared memory from the machine's 2 MiB
        # pages when any are free, and a lab with huge pages (lab/fleet.py up --huge-pages) reserves
        # exactly its guests' share of that one machine-wide pool: a server started beside it took
        # 74 of them and the lab's next guest could not start.
        self.process = subprocess.Popen(
            [os.path.join(bindir, "postgres"), "-D", data, "-p", str(self.port), "-h", "127.0.0.1",
             "-k", self.dir, "-c", "fsync=off", "-c", "max_connections=200", "-c", "huge_pages=off"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "server.log"), "wb"),
            preexec_fn=self._demote,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"postgres did not listen within {START_TIMEOUT_S} s: {self.log()}")
        self._wait_accepting()
        return self

    def _wait_accepting(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def dsn(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{self.user}:{self.password}@127.0.0.1:{self.port}/{name}"

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log"), encoding="utf-8", errors="replace") as handle:
                return handle.read()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: ends open sessions too
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
