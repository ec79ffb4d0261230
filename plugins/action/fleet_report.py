"""berth.fleet.fleet_report: the fleet as one self-contained HTML page, from the ledger alone
(controller side; the page itself is made by plugin_utils/_fleet_report.py)."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.plugin_utils import _fleet_report as report
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, safe_url


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        path = _checked_path(args["path"])
        ledger = Ledger(args["ledger_url"]).open()
        try:
            view = ledger.fleet_view(args["decisions"])
            model = report.page_model(view, args["service_down_time"], safe_url(ledger.url))
        finally:
            ledger.close()
        page = report.render(model)
        changed = _written_page(path) != page
        stamped = report.stamped(page, view["read_at"].isoformat(sep=" ", timespec="seconds"))
        counts = dict(model["state_counts"])
        result = {
            "changed": changed, "path": path, "bytes": len(stamped.encode()), "hypervisors": len(model["hosts"]),
            "instances": model["instance_total"], "states": counts,
        }
        if changed and not self._task.check_mode:
            _write(path, stamped)
        verb = ("would write" if self._task.check_mode else "wrote") if changed else "unchanged:"
        states = ", ".join(f"{count} {state}" for state, count in counts.items() if count)
        result["msg"] = (f"{verb} {path} ({result['bytes']:,} bytes): {result['hypervisors']} hypervisors"
                         f"{' (' + states + ')' if states else ''}, {result['instances']} instances")
        return result


def _checked_path(path: str) -> str:
    """The report's absolute path (a relative one is taken from where ansible-playbook runs);
    refused, before the ledger is read, where no file can be written."""
    absolute = os.path.abspath(path)
    if os.path.isdir(absolute):
        raise InputError("path", f"path {path} is a directory: name the HTML file to write")
    if not os.path.isdir(os.path.dirname(absolute)):
        raise InputError("path", f"path {path}: the directory {os.path.dirname(absolute)} does not exist")
    return absolute


def _written_page(path: str) -> str | None:
    """The page already at ``path`` without its stamp, or None if there is none to compare."""
    try:
        with open(path, encoding="utf-8") as existing:
            return report.unstamped(existing.read())
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def _write(path: str, page: str) -> None:
    """Write the page whole or not at all: into a new file beside it, then renamed over it, so a
    reader (or a web server) never sees half a page."""
    partial = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.partial")
    try:
        with open(partial, "x", encoding="utf-8") as new:
            new.write(page)
        os.replace(partial, path)
    except OSError as exc:
        if os.path.exists(partial):
            os.unlink(partial)
        raise BerthError(f"cannot write {path}: {exc.strerror or exc}") from exc
