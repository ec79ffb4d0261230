"""Fencing, stated: an instance of a down hypervisor is rebuilt elsewhere only once that host is
fenced - it cannot run the instance any more (powered off, cut from its storage) - or the
instance could run twice, on the old host and the new, writing to the same disks or answering
at the same addresses (split brain; docs/docsite/rst/host_failure.rst).

A host is fenced by the operator's word given now (``fenced``, recorded with who and when), by
a fencing the ledger recorded since the host went down, or by the operator's fence command
(``berth_fence_command``: an argv list run on the controller, never through a shell, with the
host's name as one argument where ``{hypervisor}`` stands), which fences it when it exits 0; its
output is recorded, made printable and cut short. Private to the collection."""

from __future__ import annotations

import re
import subprocess
from typing import Any, Callable, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import shortened
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    FENCE_COMMAND,
    FENCE_CONFIRMED,
    Ledger,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# Where the fence command takes the host's name.
HOST_PLACEHOLDER = "{hypervisor}"
# The longest name the ledger keeps as who fenced a host (hypervisors.fenced_by).
FENCED_BY_CHARACTERS = 255
# How much of the fence command's output the ledger and the result keep.
FENCE_OUTPUT_CHARACTERS = 2000
# A host name the fence command may be given: the ledger's rows are not trusted, and a name that
# starts with "-" would be read as an option by most commands.
_SAFE_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")

Runner = Callable[..., Any]


def fence_argv(command: Sequence[str], host: str) -> list[str]:
    """The fence command's argv for ``host``: ``{hypervisor}`` replaced in each argument but the
    program (which nothing from the ledger may choose)."""
    if not command or any(not isinstance(part, str) or not part for part in command):
        raise InputError("fence_command", f"fence_command must be a list of non-empty strings (the program, then "
                                          f"its arguments), got {list(command)!r}")
    if HOST_PLACEHOLDER in command[0]:
        raise InputError("fence_command", f"fence_command's program ({command[0]}) may not be chosen by the host's "
                                          f"name: put {HOST_PLACEHOLDER} in an argument")
    if not _SAFE_HOST_NAME.fullmatch(host):
        raise BerthError(f"the hypervisor's name {host!r} is not given to a fence command: only letters, digits, "
                         f"'.', '_' and '-', not first")
    return [command[0], *(part.replace(HOST_PLACEHOLDER, host) for part in command[1:])]


def run_fence_command(argv: Sequence[str], timeout_s: float, run: Runner = subprocess.run) -> tuple[bool, str]:
    """Run the fence command: (it succeeded - exited 0 within ``timeout_s`` -, what it printed
    or why it did not run, printable and at most FENCE_OUTPUT_CHARACTERS)."""
    try:
        finished = run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        printed = exc.output.decode("utf-8", "replace") if isinstance(exc.output, bytes) else ""
        return False, shortened(f"timed out after {timeout_s:g} s (fence_timeout); printed: {printed}",
                                FENCE_OUTPUT_CHARACTERS)
    except OSError as exc:
        return False, shortened(f"could not be run: {exc}", FENCE_OUTPUT_CHARACTERS)
    printed = (finished.stdout or b"").decode("utf-8", "replace")
    if finished.returncode != 0:
        return False, shortened(f"exited {finished.returncode}; printed: {printed}", FENCE_OUTPUT_CHARACTERS)
    return True, shortened(printed, FENCE_OUTPUT_CHARACTERS)


def ensure_fenced(ledger: Ledger, hypervisor: Mapping[str, Any], settings: Settings, confirmed: bool,
                  fenced_by: str | None, check_mode: bool, run: Runner = subprocess.run) -> dict[str, Any]:
    """That ``hypervisor`` (a row of Ledger.hypervisors, down) is fenced, or BerthError saying why
    not and what would fence it. In order: the operator's word now (``confirmed``, recorded as
    by ``fenced_by``, else this run's owner), a fencing recorded since it went down, the fence
    command (run, and recorded when it succeeds). In check mode nothing is run or recorded: the
    answer says what would fence it. Returns {how, fenced (the recorded fencing, None in check
    mode where it would be made)}."""
    host = hypervisor["host"]
    who = fenced_by or run_owner()
    if len(who) > FENCED_BY_CHARACTERS:
        raise InputError("fenced_by", f"fenced_by must be at most {FENCED_BY_CHARACTERS} characters, got {len(who)}")
    if confirmed:
        if check_mode:
            return {"how": f"would record the operator's confirmation that {host} is fenced, by {who}",
                    "fenced": None}
        record = ledger.fence(host, FENCE_CONFIRMED, who)
        return {"how": f"fenced by the operator's confirmation, recorded by {who} at {record['fenced_at']}",
                "fenced": record}
    recorded = hypervisor.get("fenced")
    if recorded is not None:
        return {"how": f"fenced since {recorded['fenced_at']} ({recorded['method']}, by {recorded['fenced_by']})",
                "fenced": recorded}
    if not settings.fence_command:
        raise BerthError(f"{host} is not fenced: nothing says it cannot still run its instances, which would then "
                         f"run twice (split brain). Make sure it cannot (power it off, cut it from its storage), "
                         f"then run again with -e fenced=true, or set berth_fence_command to a command that fences it")
    argv = fence_argv(settings.fence_command, host)
    # Named by its program only: its arguments may carry a credential (a BMC's password).
    named = f"the fence command ({argv[0]} for {host})"
    if check_mode:
        return {"how": f"would run {named} (not run in check mode)", "fenced": None}
    succeeded, output = run_fence_command(argv, settings.fence_timeout, run)
    if not succeeded:
        raise BerthError(f"{host} is not fenced: {named} failed: {output}")
    record = ledger.fence(host, FENCE_COMMAND, who, output)
    return {"how": f"fenced by {named} at {record['fenced_at']}", "fenced": record}
