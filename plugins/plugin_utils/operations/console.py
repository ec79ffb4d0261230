"""Console output: the last lines of an instance's serial console log, as Nova's
get-console-output returns them, read from the hypervisor the ledger places it on. What
berth.fleet.console runs. Private to the collection.

The log is the file the domain's serial port writes (roles/instance/templates/domain.xml.j2:
``<log file='SERIAL_LOG_DIR/NAME.serial.log'/>``). Its path is made from the operator's
serial_log_dir and the instance's validated name, never from the domain's XML or the ledger, and
it is read through libvirt (Hypervisor.read_file_tail), never by logging in to the hypervisor.
"""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.limits import CONSOLE_TAIL_BYTES
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils._console_text import console_lines
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import HostSession, serial_log_file
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import known_instance


def check_directory(field: str, value: str) -> str:
    """An absolute, normalised directory path (no ``..``, no ``//``, no NUL): the target of the
    storage pool the log is read through."""
    if not value.startswith("/") or "\0" in value or posixpath.normpath(value) != (value.rstrip("/") or "/") \
            or value.startswith("//"):
        raise InputError(field, f"{field} must be an absolute directory path without '..', '.' or '//', got {value!r}")
    return value.rstrip("/") or "/"


def placed_instance(ledger: Ledger, name: str) -> dict[str, Any]:
    """The ledger's row of the instance ``name`` with its hypervisor's URI; a clear error for an
    instance the ledger does not know or does not place on a hypervisor it can reach."""
    dns_label("name", name)
    row = known_instance(ledger, name)
    if not row["host"]:
        raise BerthError(f"{name} is {row['state']} on no hypervisor in {ledger.label}: it never started anywhere, "
                         f"so it has no console output"
                         + (f" (why it failed: {row['failure_reason']})" if row.get("failure_reason") else ""))
    if not row["uri"]:
        raise BerthError(f"{ledger.label} has no URI for {row['host']}, where it places {name}: "
                         f"run playbooks/gather.yml to sync it")
    return row


class ConsoleOutput:
    """The last ``lines`` lines of the serial log of the instance ``row`` (placed_instance's),
    read in ``serial_log_dir`` through ``session`` (its hypervisor's). Reads only: the same in
    check mode."""

    def __init__(self, row: Mapping[str, Any], serial_log_dir: str, lines: int, session: HostSession) -> None:
        self.row, self.lines, self.session = row, lines, session
        self.serial_log_dir = check_directory("serial_log_dir", serial_log_dir)

    def run(self) -> dict[str, Any]:
        name, host = self.row["name"], self.row["host"]
        file_name = serial_log_file(name)
        path = posixpath.join(self.serial_log_dir, file_name)
        try:
            found = self.session.hv.read_file_tail(self.serial_log_dir, file_name, CONSOLE_TAIL_BYTES)
        except HypervisorError as exc:
            raise BerthError(f"{name}'s serial log could not be read on {host}, where the ledger places it: {exc}") \
                from exc
        finally:
            self.session.close()
        if found is None:
            raise BerthError(f"{name} has no serial log on {host} yet: no {path} there (its guest has not started on "
                             f"{host}, or serial_log_dir is not the directory it was launched with)")
        data, size_bytes = found
        output, truncated = console_lines(data, self.lines, starts_mid_file=size_bytes > CONSOLE_TAIL_BYTES)
        return {
            "changed": False, "name": name, "uuid": self.row["uuid"], "host": host, "state": self.row["state"],
            "log": path, "log_size_bytes": size_bytes, "read_bytes": len(data), "output": output,
            "truncated": truncated,
            "msg": f"{name}: the last {len(output)} line(s) of {path} on {host} ({size_bytes} bytes"
                   + (", earlier output left out)" if truncated else ")"),
        }
