"""berth.fleet.instance: build or remove one placed instance's domain (controller side)."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
import xml.etree.ElementTree as ET
from typing import Any

from ansible.utils.display import Display
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    check_image_source,
    dns_label,
    image_spec,
    metadata_spec,
    network_specs,
    pool_image,
    resolve_flavor,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import LEDGER_ARGS, BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, ClaimConflict, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.nocloud import seed_iso

_display = Display()
# Shown in check mode, where the ledger has not assigned the instance its UUID yet.
PLANNED_UUID = "00000000-0000-0000-0000-000000000000"


def root_volume_name(instance_uuid: str) -> str:
    return f"berth-{instance_uuid}-root.qcow2"


def seed_volume_name(instance_uuid: str) -> str:
    return f"berth-{instance_uuid}-seed.iso"


def mac_address(instance_uuid: str, index: int) -> str:
    """A stable locally administered MAC in QEMU's 52:54:00 range, from the instance UUID.

    Unique across the fleet as far as the UUIDs' hashes are: 24 bits per instance and interface.
    """
    digest = hashlib.sha256(f"{instance_uuid}/{index}".encode()).digest()
    return "52:54:00:" + ":".join(f"{byte:02x}" for byte in digest[:3])


def _injected_fault(host: str, stage: str) -> None:
    """Test-only: fail a build at ``stage`` on ``host`` when BERTH_TEST_FAULTS names them.

    BERTH_TEST_FAULTS="hv1:volume,hv2:start" fails after hv1's volume is created and where hv2
    would start the defined domain. Unset (always, outside Berth's tests) it does nothing.
    """
    if f"{host}:{stage}" in os.environ.get("BERTH_TEST_FAULTS", "").split(","):
        raise HypervisorError(host, f"injected fault at {stage} (BERTH_TEST_FAULTS)")


def _offered_type(task_vars: dict[str, Any], host: str) -> str:
    """kvm where the host's capabilities offer it, else plain QEMU emulation."""
    state = task_vars.get("hostvars", {}).get(host, {}).get("berth_host_state") or {}
    offered = {triple[1] for triple in state.get("supported_instances") or [] if len(triple) > 1}
    return "kvm" if "kvm" in offered else "qemu"


def remove_instance(hv: Hypervisor, instance_uuid: str, pool: str) -> bool:
    """Remove an instance's domain and volumes from a host; True if anything was there."""
    removed = hv.remove_domain(instance_uuid)
    for volume in (root_volume_name(instance_uuid), seed_volume_name(instance_uuid)):
        removed = hv.delete_volume(pool, volume) or removed
    return removed


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "state": {"type": "str", "choices": ["active", "absent"], "default": "active"},
        "name": {"type": "str"},
        "uuid": {"type": "str"},
        "host": {"type": "str"},
        "uri": {"type": "str"},
        "placements": {"type": "list", "elements": "dict"},
        "flavor": {"type": "dict"},
        "template": {"type": "str", "default": "domain.xml.j2"},
        "domain_type": {"type": "str", "choices": ["kvm", "qemu", ""], "default": ""},
        "boot": {"type": "dict", "default": {}},
        "image": {"type": "raw"},
        "networks": {"type": "raw", "default": []},
        "user_data": {"type": "str"},
        "metadata": {"type": "dict", "default": {}},
        "autostart": {"type": "bool", "default": False},
        "alternates": {"type": "list", "elements": "str", "default": []},
        "max_attempts": {"type": "int", "default": 3},
        "lease_seconds": {"type": "int", "default": 3600},
        "serial_log_dir": {"type": "str", "default": "/var/log/libvirt/qemu"},
        "storage_pool": {"type": "str", "default": "default"},
        "timeout": {"type": "float", "default": 30},
        **LEDGER_ARGS,
    }
    _supports_check_mode = True
    _supports_diff = True
    _template_path: str | None = None
    _compiled: Any = None  # the compiled domain template, shared by the task's instances
    _opened_ledger: Ledger | None = None

    def _ledger(self, args: dict[str, Any]) -> Ledger | None:
        """The ledger, opened once per task: the instances of a task share its engine.

        None without the ledger and in check mode (nothing is written then). ``_many`` opens it
        before its threads start; SQLAlchemy's engine is thread-safe, each call has its own session.
        """
        if not args["ledger"] or self._task.check_mode:
            return None
        if self._opened_ledger is None:
            self._opened_ledger = Ledger(args["ledger_url"]).open()
        return self._opened_ledger

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args["placements"] is not None:
            return self._many(args, task_vars)
        for key in ("name", "host", "uri"):
            if not args[key]:
                raise InputError(key, f"{key} is required (or placements, a list of instances)")
        return self._one(args, task_vars)

    def _many(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Build (or remove) several instances: hosts in parallel, each host's instances in turn.

        QEMU start-up dominates a build, and hypervisors do not wait for each other; one host's
        builds stay in order so that its daemon is not asked for everything at once.
        """
        by_host: dict[str, list[int]] = {}
        for index, placement in enumerate(args["placements"]):
            by_host.setdefault(str(placement.get("host")), []).append(index)
        results: list[dict[str, Any]] = [{} for _placement in args["placements"]]
        self._template_path = self._find_needle("templates", args["template"])
        self._ledger(args)
        fields = ("name", "uuid", "host", "uri", "flavor", "alternates")

        def work(indices: list[int]) -> None:
            for index in indices:
                placement = args["placements"][index]
                one = {**args, **{key: placement.get(key) for key in fields if key in placement}}
                one["alternates"] = one.get("alternates") or []
                try:
                    result = self._one(one, task_vars)
                except Exception as exc:  # reported per instance; the others go on
                    result = {"failed": True, "msg": str(exc) or type(exc).__name__}
                result.update(item={"name": one["name"], "host": one["host"]})
                results[index] = result
                # Progress as each instance finishes (stderr: stdout belongs to the callback).
                _display.display(f"{one['name']}: " + (f"FAILED: {result['msg']}" if result.get("failed") else
                                 f"{'changed' if result['changed'] else 'ok'} on {result.get('host', one['host'])}"),
                                 stderr=True)

        with ThreadPoolExecutor(max_workers=max(1, len(by_host))) as pool:
            list(pool.map(work, by_host.values()))
        failed = [r for r in results if r.get("failed")]
        outcome: dict[str, Any] = {"changed": any(r.get("changed") for r in results), "results": results}
        if failed:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} instance(s) failed: "
                           + "; ".join(r["msg"] for r in failed))
        return outcome

    def _one(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        if not args["uuid"] and not (self._task.check_mode and args["state"] == "active"):
            raise InputError("uuid", "uuid is required (the instance's UUID from the ledger)")
        if args["state"] == "absent":
            return self._absent(args)
        return self._active(args, task_vars)

    # ---- state=active ------------------------------------------------------------------------

    def _request(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every input checked before anything is touched."""
        if not args["flavor"]:
            raise InputError("flavor", "flavor is required with state=active")
        flavor = args["flavor"]
        request = {
            "name": args["name"],
            "uuid": args["uuid"] or PLANNED_UUID,
            "flavor": resolve_flavor(flavor, {}),
            "image": image_spec(args["image"]),
            "networks": network_specs(args["networks"]),
            "metadata": metadata_spec(args["metadata"]),
            "user_data": user_data_spec(args["user_data"]),
            "boot": boot_spec(args["boot"]),
            "pool": args["storage_pool"],
        }
        image = request["image"]
        check_image_source(image)
        return request

    def _targets(self, args: dict[str, Any], task_vars: dict[str, Any]) -> list[dict[str, Any]]:
        """The placed host, then its alternates (from the schedule), up to max_attempts hosts."""
        if args["max_attempts"] < 1:
            raise InputError("max_attempts", f"max_attempts must be at least 1, got {args['max_attempts']}")
        targets = [{"host": args["host"], "uri": args["uri"], "uuid": None}]
        hostvars = task_vars.get("hostvars", {})
        for host in args["alternates"]:
            variables = hostvars.get(host, {})
            uri = variables.get("berth_libvirt_uri")
            hv_uuid = (variables.get("berth_host_state") or {}).get("uuid")
            if uri and hv_uuid:
                targets.append({"host": host, "uri": uri, "uuid": hv_uuid})
        return targets[:args["max_attempts"]]

    def _active(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        request = self._request(args)
        check_mode = self._task.check_mode
        ledger = self._ledger(args)
        targets = self._targets(args, task_vars)
        if ledger is None:
            # Without the ledger (and in check mode) there is no claim to move: no retry elsewhere.
            targets = targets[:1]
        reasons: list[str] = []
        for attempt, target in enumerate(targets):
            if attempt:
                try:
                    ledger.claim_alternate(args["uuid"], target["host"], target["uuid"], run_owner(),
                                           args["lease_seconds"])
                except ClaimConflict as conflict:
                    reasons.append(str(conflict))
                    continue
            on_target = {**args, "domain_type": args["domain_type"] or _offered_type(task_vars, target["host"])}
            try:
                with Hypervisor(target["host"], target["uri"], args["timeout"]) as hv:
                    result = self._build(hv, target["host"], on_target, request, check_mode)
            except Exception as exc:
                reasons.append(str(exc) if isinstance(exc, HypervisorError) else f"{target['host']}: {exc}")
                if ledger is None:
                    raise
                # Whatever was made there is gone (_build cleaned up); claim_alternate gives the
                # claim back when it claims the next host, mark_error when none is left.
                continue
            if ledger and result["changed"]:
                ledger.mark_active(args["uuid"])
            result.update(host=target["host"], failed_attempts=reasons)
            return result
        reason = f"build failed on {len(reasons)} host(s): " + "; ".join(reasons)
        # The claim is already back; the instance stays, in ERROR, with every reason.
        ledger.mark_error(args["uuid"], reason)
        raise BerthError(f"{args['name']}: {reason}")

    def _plan(self, hv: Hypervisor, host: str, args: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """What the build will make, found with read-only calls: refuses unknown images and networks."""
        pool = request["pool"]
        pool_path = hv.pool_path(pool)
        plan: dict[str, Any] = {
            "disk": {"path": os.path.join(pool_path, root_volume_name(request["uuid"])), "backing": None},
            "seed": None, "upload": None,
        }
        image = request["image"]
        if image:
            base = pool_image(hv, pool, image["name"], host)
            if base is None and not image["source"]:
                volumes = ", ".join(hv.volume_names(pool)) or "none"
                raise InputError("image", f"image {image['name']} is not in storage pool {pool} on {host} "
                                 f"and no image.source to upload it from (volumes there: {volumes})")
            if base is None:
                size_mb = os.path.getsize(image["source"]) // (1024 * 1024)
                base = {"path": os.path.join(pool_path, image["name"]), "format": image["format"], "capacity_mb": size_mb}
                plan["upload"] = image
            flavor_mb = request["flavor"].root_gb * 1024
            if flavor_mb and flavor_mb < base["capacity_mb"]:
                raise InputError("flavor.root_gb", f"flavor.root_gb {request['flavor'].root_gb} is smaller than "
                                 f"image {image['name']} ({base['capacity_mb']} MB)")
            plan["disk"]["backing"] = {"path": base["path"], "format": base["format"]}
            plan["disk"]["capacity_gb"] = max(request["flavor"].root_gb, -(-base["capacity_mb"] // 1024))
        else:
            plan["disk"]["capacity_gb"] = request["flavor"].root_gb
        wanted = sorted({net["name"] for net in request["networks"] if net["type"] == "network"})
        if wanted:
            known = hv.network_names()
            for name in wanted:
                if name not in known:
                    raise InputError("networks", f"network {name} is not defined on {host} "
                                     f"(networks there: {', '.join(known) or 'none'})")
        if request["user_data"] is not None:
            plan["seed"] = {
                "path": os.path.join(pool_path, seed_volume_name(request["uuid"])),
                "data": seed_iso(request["uuid"], request["name"], request["user_data"]),
            }
        plan["xml"] = self._render(args, request, plan)
        return plan

    def _build(self, hv: Hypervisor, host: str, args: dict[str, Any], request: dict[str, Any],
               check_mode: bool) -> dict[str, Any]:
        uuid, pool = request["uuid"], request["pool"]
        current = hv.find_domain(uuid) if args["uuid"] else None
        if current is not None and current["state"] == "running":
            return {"changed": False, "domain": current}
        plan = self._plan(hv, host, args, request)
        result: dict[str, Any] = {"changed": True}
        if self._task.diff:
            result["diff"] = {
                "before": (hv.domain_xml(uuid) if args["uuid"] else None) or "",
                "after": plan["xml"],
                "before_header": f"{args['name']} on {host} (libvirt)",
                "after_header": f"{args['name']} on {host} (planned)",
            }
        if check_mode:
            result["msg"] = f"would build {args['name']} on {host}"
            if plan["upload"]:
                result["msg"] += f", uploading image {plan['upload']['name']} there first"
            return result
        # A domain left stopped by an interrupted build is rebuilt from scratch.
        remove_instance(hv, uuid, pool)
        try:
            if plan["upload"]:
                with open(plan["upload"]["source"], "rb") as handle:
                    data = handle.read()
                hv.upload_volume(pool, plan["upload"]["name"], data, plan["upload"]["format"])
                result["uploaded"] = plan["upload"]["name"]
            hv.create_volume(pool, root_volume_name(uuid), plan["disk"]["capacity_gb"], plan["disk"]["backing"])
            _injected_fault(host, "volume")
            if plan["seed"]:
                hv.upload_volume(pool, seed_volume_name(uuid), plan["seed"]["data"], "raw")
            hv.define(plan["xml"])
            _injected_fault(host, "start")
            hv.start(uuid, args["autostart"])
        except Exception as exc:
            # Nothing half made stays behind, whatever failed: no domain, no volume.
            try:
                remove_instance(hv, uuid, pool)
            except HypervisorError as cleanup:
                raise HypervisorError(host, f"{exc}; cleanup failed too: {cleanup}") from exc
            if isinstance(exc, OSError):
                raise HypervisorError(host, f"cannot read image.source: {exc}") from exc
            raise
        result.update(state=ACTIVE, domain=hv.find_domain(uuid))
        return result

    # ---- state=absent ------------------------------------------------------------------------

    def _absent(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._task.check_mode:
            with Hypervisor(args["host"], args["uri"], args["timeout"]) as hv:
                present = hv.find_domain(args["uuid"]) is not None
            return {"changed": present, "msg": f"would delete {args['name']} from {args['host']}"}
        ledger = self._ledger(args)
        with Hypervisor(args["host"], args["uri"], args["timeout"]) as hv:
            removed = remove_instance(hv, args["uuid"], args["storage_pool"])
        forgotten = ledger.delete_instance(args["uuid"]) if ledger else False
        return {"changed": removed or forgotten}

    def _template(self, args: dict[str, Any]) -> Any:
        """The role's domain template, read and compiled once per task (raises TemplateError)."""
        if self._compiled is None:
            path = self._template_path or self._find_needle("templates", args["template"])
            environment = SandboxedEnvironment(
                autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                keep_trailing_newline=True,
            )
            with open(path, encoding="utf-8") as handle:
                self._compiled = environment.from_string(handle.read())
        return self._compiled

    def _render(self, args: dict[str, Any], request: dict[str, Any], plan: dict[str, Any]) -> str:
        """The domain XML from the role's template, every value escaped by Jinja2's autoescape."""
        interfaces = [
            {**net, "mac": mac_address(request["uuid"], index)} for index, net in enumerate(request["networks"])
        ]
        try:
            rendered = self._template(args).render(
                instance={"name": request["name"], "uuid": request["uuid"], "metadata": request["metadata"]},
                flavor=request["flavor"].to_dict(),
                domain_type=args["domain_type"],
                boot=request["boot"],
                disk=plan["disk"],
                seed=plan["seed"],
                interfaces=interfaces,
                serial_log=os.path.join(args["serial_log_dir"], f"{request['name']}.serial.log"),
            )
            ET.fromstring(rendered)
        except (TemplateError, ET.ParseError) as exc:
            raise InputError("template", f"template {args['template']} did not give valid domain XML: {exc}") from exc
        return rendered
