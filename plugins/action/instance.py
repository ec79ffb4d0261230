"""berth.fleet.instance: build or remove one placed instance's domain (controller side)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import LEDGER_ARGS, BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, Ledger


def root_volume_name(instance_uuid: str) -> str:
    return f"berth-{instance_uuid}-root.qcow2"


def _remove(hv: Hypervisor, instance_uuid: str, pool: str) -> bool:
    """Remove an instance's domain and root volume from a host; True if anything was there."""
    removed_domain = hv.remove_domain(instance_uuid)
    removed_volume = hv.delete_volume(pool, root_volume_name(instance_uuid))
    return removed_domain or removed_volume


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "state": {"type": "str", "choices": ["active", "absent"], "default": "active"},
        "name": {"type": "str", "required": True},
        "uuid": {"type": "str", "required": True},
        "host": {"type": "str", "required": True},
        "uri": {"type": "str", "required": True},
        "flavor": {"type": "dict"},
        "template": {"type": "str", "default": "domain.xml.j2"},
        "domain_type": {"type": "str", "default": "kvm"},
        "boot": {"type": "dict", "default": {}},
        "serial_log_dir": {"type": "str", "default": "/var/log/libvirt/qemu"},
        "storage_pool": {"type": "str", "default": "default"},
        "timeout": {"type": "float", "default": 30},
        **LEDGER_ARGS,
    }

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args["state"] == "absent":
            return self._absent(args)
        return self._active(args)

    def _active(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args["flavor"]:
            raise InputError("flavor", "flavor is required with state=active")
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        volume = root_volume_name(args["uuid"])
        if self._task.check_mode:
            return {"changed": True, "msg": f"would build {args['name']} on {args['host']}"}
        try:
            with Hypervisor(args["host"], args["uri"], args["timeout"]) as hv:
                result = self._build(hv, args, volume)
        except (HypervisorError, InputError) as exc:
            # The claim goes back at once; the instance stays, in ERROR, with the reason.
            if ledger:
                ledger.mark_error(args["uuid"], str(exc))
            raise
        if ledger:
            ledger.mark_active(args["uuid"])
        return result

    def _build(self, hv: Hypervisor, args: dict[str, Any], volume: str) -> dict[str, Any]:
        domain = hv.find_domain(args["uuid"])
        if domain is not None and domain["state"] == "running":
            return {"changed": False, "domain": domain}
        # A domain left stopped by an interrupted build is rebuilt from scratch.
        _remove(hv, args["uuid"], args["storage_pool"])
        try:
            disk_path = hv.create_volume(args["storage_pool"], volume, args["flavor"]["root_gb"])
            hv.define_and_start(self._render(args, disk_path))
        except (HypervisorError, InputError) as exc:
            # Nothing half made stays behind: no domain, no volume.
            try:
                _remove(hv, args["uuid"], args["storage_pool"])
            except HypervisorError as cleanup:
                raise HypervisorError(args["host"], f"{exc}; cleanup failed too: {cleanup}") from exc
            raise
        return {"changed": True, "state": ACTIVE, "domain": hv.find_domain(args["uuid"])}

    def _absent(self, args: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        if self._task.check_mode:
            return {"changed": True, "msg": f"would delete {args['name']} from {args['host']}"}
        with Hypervisor(args["host"], args["uri"], args["timeout"]) as hv:
            removed = _remove(hv, args["uuid"], args["storage_pool"])
        forgotten = ledger.delete_instance(args["uuid"]) if ledger else False
        return {"changed": removed or forgotten}

    def _render(self, args: dict[str, Any], disk_path: str) -> str:
        """The domain XML from the role's template, every value escaped by Jinja2's autoescape."""
        path = self._find_needle("templates", args["template"])
        environment = SandboxedEnvironment(
            autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        try:
            rendered = environment.from_string(source).render(
                instance={"name": args["name"], "uuid": args["uuid"]},
                flavor=args["flavor"],
                domain_type=args["domain_type"],
                boot=args["boot"],
                disk={"path": disk_path},
                serial_log=os.path.join(args["serial_log_dir"], f"{args['name']}.serial.log"),
            )
            ET.fromstring(rendered)
        except (TemplateError, ET.ParseError) as exc:
            raise InputError("template", f"template {args['template']} did not give valid domain XML: {exc}") from exc
        return rendered
