"""Building and removing placed instances' domains on their hypervisors, with retries on the
alternates: what berth.fleet.instance, berth.fleet.server and playbooks/launch.yml do after the
schedule. Private to the collection.

Given berth.fleet.instance's validated options, the opened ledger (or None), the path of the
domain template, and the hooks port. Each hypervisor is opened once per operation
(``HostSession``), and its pool and networks read once.
"""

from __future__ import annotations

import os
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_spec
from ansible_collections.berth.fleet.plugins.module_utils._numa_xml import assignment_context, mdev_uuid
from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_keys_spec
from ansible_collections.berth.fleet.plugins.module_utils.cpu_topology import CPU_TOPOLOGY_PROPERTIES, best_topology
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu, recorded_cpu
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    dns_label,
    image_spec,
    metadata_spec,
    network_specs,
    resolve_flavor,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import ExactRequest, exact_request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    nvram_volume_name,
    root_volume_name,
    seed_volume_name,
    volume_instance_uuid,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import COLLECTION_ROOT
from ansible_collections.berth.fleet.plugins.plugin_utils._image_download import fetch_image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import check_image_source, image_source_dirs
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import (
    PLANNED_UUID,
    CleanupFailed,
    HostSession,
    domain_type,
    local_disks,
    mac_address,
    make,
    plan,
    remove_instance,
    remove_recorded,
    seed_wanted,
    serial_log_file,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    ClaimConflict,
    ClaimLost,
    Ledger,
    run_owner,
)

# The domain template of the role berth.fleet.instance: the one every build renders unless a
# task names another.
DEFAULT_TEMPLATE = os.path.join(COLLECTION_ROOT, "roles", "instance", "templates", "domain.xml.j2")


class Build:
    """Build (state=active) or remove (state=absent) the instances of ``args["placements"]``, or
    the one instance ``args["name"]`` on ``args["host"]``. ``run()`` returns the task's result."""

    def __init__(self, args: Mapping[str, Any], ledger: Ledger | None, template_path: str, check_mode: bool,
                 diff: bool, hooks: Hooks = NO_HOOKS, checked: Mapping[str, Any] | None = None) -> None:
        self.args = dict(args)
        self.check_mode, self.diff, self.hooks = check_mode, diff, hooks
        self._opened_ledger = ledger
        self.template = DomainTemplate(template_path)  # compiled once, shared by the operation's instances
        self._image: dict[str, Any] | None = None
        self._guest: dict[str, Any] = {}
        self._sessions: dict[str, HostSession] = {}
        self._sessions_lock = threading.Lock()
        self._progress = Progress()
        # A launch's request, checked once already (operations/launch.check_request): its image
        # (an image by URL fetched) and guest hardware are not checked again.
        self._checked = checked
        self._uri_policy = UriPolicy.from_settings(self.args.get("uri_policy"))

    def _ledger(self, args: Mapping[str, Any], reading: bool = False) -> Ledger | None:
        """The ledger: None without it, and in check mode unless ``reading`` (nothing is
        written then). SQLAlchemy's engine is thread-safe, each call has its own session."""
        if not args["ledger"] or (self.check_mode and not reading):
            return None
        return self._opened_ledger

    def _session(self, host: str, uri: str, timeout_s: float) -> HostSession:
        """The task's one session with ``host``: one connection, one read of its pool."""
        with self._sessions_lock:
            if host not in self._sessions:
                self._sessions[host] = HostSession(host, uri, timeout_s, self._uri_policy)
            return self._sessions[host]

    def run(self) -> dict[str, Any]:
        args = self.args
        try:
            if args["state"] == "active":
                # One image and one guest hardware for every instance of the task: checked (and the
                # image fetched by URL) once, before any build starts.
                if self._checked is not None:
                    self._image, self._guest = self._checked["image"], self._checked["guest"]
                else:
                    self._image = fetch_image(image_spec(args["image"]), args)
                    self._guest = guest_spec(args, (self._image or {}).get("properties"))
            if args["placements"] is not None:
                return self._many(args)
            for key in ("name", "host", "uri"):
                if not args[key]:
                    raise InputError(key, f"{key} is required (or placements, a list of instances)")
            return self._one(args)
        finally:
            for session in self._sessions.values():
                session.close()

    def _many(self, args: dict[str, Any]) -> dict[str, Any]:
        """Build (or remove) several instances: hosts in parallel, each host's instances in turn.

        QEMU start-up dominates a build, and hypervisors do not wait for each other; one host's
        builds stay in order so that its daemon is not asked for everything at once.
        """
        by_host: dict[str, list[int]] = {}
        for index, placement in enumerate(args["placements"]):
            by_host.setdefault(str(placement.get("host")), []).append(index)
        results: list[dict[str, Any]] = [{} for _placement in args["placements"]]
        self._ledger(args)
        fields = ("name", "uuid", "host", "uri", "flavor", "domain_types", "cpu", "targets", "assignment")

        def work(indices: list[int]) -> None:
            for index in indices:
                placement = args["placements"][index]
                one = {**args, **{key: placement.get(key) for key in fields if key in placement}}
                try:
                    result = self._one(one)
                except Exception as exc:  # reported per instance; the others go on
                    result = {"failed": True, "msg": str(exc) or type(exc).__name__}
                result.update(item={"name": one["name"], "host": one["host"]})
                results[index] = result
                if result.get("failed"):
                    self._progress.step(one["name"], one["host"], f"FAILED: {result['msg']}")

        with ThreadPoolExecutor(max_workers=max(1, len(by_host))) as pool:
            list(pool.map(work, by_host.values()))
        failed = [r for r in results if r.get("failed")]
        outcome: dict[str, Any] = {"changed": any(r.get("changed") for r in results), "results": results}
        if failed:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} instance(s) failed: "
                           + "; ".join(r["msg"] for r in failed))
        return outcome

    def _one(self, args: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        if not args["uuid"] and not (self.check_mode and args["state"] == "active"):
            raise InputError("uuid", "uuid is required (the instance's UUID from the ledger)")
        if args["state"] == "absent":
            return self._absent(args)
        return self._active(args)

    # ---- state=active ------------------------------------------------------------------------

    def _request(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every input checked before anything is touched."""
        if not args["flavor"]:
            raise InputError("flavor", "flavor is required with state=active")
        request = {
            "name": args["name"],
            "uuid": args["uuid"] or PLANNED_UUID,
            "flavor": resolve_flavor(args["flavor"], {}),
            "image": self._image,
            "guest": self._guest,
            "networks": network_specs(args["networks"]),
            "metadata": metadata_spec(args["metadata"]),
            "user_data": user_data_spec(args["user_data"]),
            "public_keys": public_keys_spec(args["ssh_authorized_keys"], args["key_name"], args["key_pairs"]),
            "boot": boot_spec(args["boot"]),
            "pool": args["storage_pool"],
            # The instance's claim's assignment on its host (numa.rst), None for most instances.
            "assignment": args.get("assignment"),
        }
        # The guest's vCPU topology is the flavor's and the image's alone; its CPU model is the
        # host's (guest_cpu, per target).
        request["cpu_topology"] = best_topology(request["flavor"].vcpus, request["flavor"].extra_specs,
                                                (self._image or {}).get("properties"))
        request["image_source_dirs"] = image_source_dirs(args)
        check_image_source(request["image"], request["image_source_dirs"], args["image_max_mb"])
        return request

    def _exact(self, args: dict[str, Any], request: dict[str, Any]) -> ExactRequest | None:
        try:
            return exact_request(request["flavor"], (self._image or {}).get("properties") or {},
                                 args.get("pci_alias") or (), args.get("enabled_mdev_types") or ())
        except SchedulerInputError as exc:
            raise InputError(exc.field, str(exc)) from exc

    @staticmethod
    def _claimed(ledger: Ledger, instance_uuid: str, host: str) -> dict[str, Any] | None:
        """The assignment of the instance's claim on ``host`` (None: it asked for none)."""
        for held in ledger.claims(instance_uuid):
            if held["host"] == host:
                return held["assignment"]
        return None

    @staticmethod
    def _targets(args: dict[str, Any]) -> list[dict[str, Any]]:
        """The placed host, then its alternates as the schedule gave them (each with the URI of
        its last sync and the domain types it offers), up to max_attempts hosts."""
        if args["max_attempts"] < 1:
            raise InputError("max_attempts", f"max_attempts must be at least 1, got {args['max_attempts']}")
        targets = [{"host": args["host"], "uri": args["uri"], "hypervisor_uuid": None,
                    "domain_types": args.get("domain_types") or [], "cpu": args.get("cpu")}]
        targets += [target for target in args.get("targets") or [] if target.get("uri") and target.get("hypervisor_uuid")]
        return targets[:args["max_attempts"]]

    def _active(self, args: dict[str, Any]) -> dict[str, Any]:
        request = self._request(args)
        ledger = self._ledger(args)
        targets = self._targets(args)
        if ledger is None:
            # Without the ledger (and in check mode) there is no claim to move: no retry elsewhere.
            targets = targets[:1]
        reasons: list[str] = []
        # What an alternate's claim fits there of NUMA cells, CPUs, pages and devices: the flavor's
        # and image's request with this run's own PCI aliases (the operator's, never the ledger's).
        exact = self._exact(args, request) if len(targets) > 1 else None
        for attempt, target in enumerate(targets):
            if attempt:
                try:
                    moved = ledger.claim_alternate(args["uuid"], target["host"], target["hypervisor_uuid"], run_owner(),
                                                   args["lease_seconds"], exact=exact)
                except ClaimConflict as conflict:
                    reasons.append(str(conflict))
                    continue
                # Pinned CPUs, cells and devices are the host's own: the alternate's claim has its
                # assignment, never the first host's.
                request = {**request, "assignment": moved.get("assignment")}
            elif ledger is not None and args["uuid"]:
                # What the instance's claim took on this host, as the ledger holds it: the claim
                # decides, not the task's arguments.
                request = {**request, "assignment": self._claimed(ledger, args["uuid"], target["host"])}
            on_target = {**args, "domain_type": domain_type(args["domain_type"], target["domain_types"])}
            step = self._progress.of(args["name"], target["host"])
            try:
                # The host's CPU settings, checked against what its last sync recorded it can run:
                # refused there (an InputError naming the host's setting), tried on the next.
                on_target["cpu"] = guest_cpu(target.get("cpu"), target["host"], on_target["domain_type"],
                                             request["cpu_topology"])
                result = self._build(self._session(target["host"], target["uri"], args["timeout"]), on_target, request,
                                     step)
            except CleanupFailed as exc:
                if ledger is None:
                    raise
                ledger.build_failed(args["uuid"])
                # What it made there may even run (a start whose answer was lost): built again
                # elsewhere, the instance could run twice. Its claim and lease stay on that host,
                # and the first sync after the lease settles it, as for a run that died there.
                step(f"FAILED, not tried elsewhere: {exc}")
                raise BerthError(f"{args['name']}: {exc}. Not tried on another host, so that it never runs twice: "
                                 f"it stays BUILDING on {target['host']}, and the first gather.yml that reaches "
                                 f"{target['host']} after its lease finishes it if its domain runs there, else "
                                 f"removes what it left and marks it ERROR") from exc
            except Exception as exc:
                reasons.append(str(exc) if isinstance(exc, HypervisorError) else f"{target['host']}: {exc}")
                if ledger is not None and attempt + 1 < len(targets):
                    step(f"failed, trying {targets[attempt + 1]['host']} next: {reasons[-1]}")
                if ledger is None:
                    raise
                if not isinstance(exc, InputError):
                    # The host's failure, counted there as Nova's compute manager counts it (a
                    # request that no host could build, such as a template error, is not).
                    ledger.build_failed(args["uuid"])
                # Whatever was made there is gone (make() cleaned up); claim_alternate gives the
                # claim back when it claims the next host, mark_error when none is left.
                continue
            if ledger is not None:
                # The instance as the ledger now has it: a play's closing table shows it.
                try:
                    result["instance"] = (ledger.mark_active(args["uuid"], build_record(request, {**args, "cpu": on_target["cpu"]}))
                                          if result["changed"] else ledger.instances([args["name"]])[0])
                except ClaimLost as lost:
                    # The lease ran out before the build ended and a sync gave the claim back:
                    # the instance is ERROR already, and what was built takes room nobody counts.
                    remove_instance(self._session(target["host"], target["uri"], args["timeout"]).hv,
                                    args["uuid"], args["storage_pool"])
                    raise BerthError(f"{args['name']}: {lost}; what was built on {target['host']} is removed "
                                     f"(give launches a longer berth_lease_seconds)") from lost
            # The CPU it was given there (mode, model, features, topology, and why a default was
            # changed): the host's settings, which the request did not show.
            result.update(host=target["host"], failed_attempts=reasons, cpu=on_target["cpu"])
            return result
        reason = f"build failed on {len(reasons)} host(s): " + "; ".join(reasons)
        # The claim is already back; the instance stays, in ERROR, with every reason.
        ledger.mark_error(args["uuid"], reason)
        raise BerthError(f"{args['name']}: {reason}")

    def _build(self, session: HostSession, args: dict[str, Any], request: dict[str, Any],
               step: Any) -> dict[str, Any]:
        uuid, host = request["uuid"], session.host
        current = session.hv.find_domain(uuid) if args["uuid"] else None
        if current is not None and current["state"] == "running":
            step("running already", detail=True)
            return {"changed": False, "domain": current}
        planned = plan(session, request, lambda made: self.template.render(
            request, made, args["domain_type"], args["serial_log_dir"], cpu=args.get("cpu")))
        # A custom model with its features, compared with the host's CPU by its libvirt before
        # anything is made there (in check mode too): the features it lacks are named.
        refusal = session.hv.guest_cpu_refusal(planned["xml"], args["domain_type"])
        if refusal:
            raise InputError(f"hypervisors.{host}.cpu_model_extra_flags",
                             f"{host} cannot run the guest CPU its settings give "
                             f"({_described_cpu(args['cpu'])}) as a {args['domain_type']} domain: {refusal}")
        result: dict[str, Any] = {"changed": True}
        if self.diff:
            result["diff"] = {
                "before": (session.hv.domain_xml(uuid) if args["uuid"] else None) or "",
                "after": planned["xml"],
                "before_header": f"{args['name']} on {host} (libvirt)",
                "after_header": f"{args['name']} on {host} (planned)",
            }
        if self.check_mode:
            result["msg"] = f"would build {args['name']} on {host}"
            if planned["upload"]:
                result["msg"] += f", uploading image {planned['upload']['name']} there first"
            return result
        ledger = self._ledger(args)
        if ledger is not None:
            # Before anything is made: a run that dies from here on leaves nothing unknown.
            ledger.record_artefacts(uuid, host, planned["artefacts"], run_owner())
        make(session, request, planned, args["autostart"], step, self.hooks)
        result.update(state=ACTIVE, domain=session.hv.find_domain(uuid))
        return result

    # ---- state=absent ------------------------------------------------------------------------

    def _absent(self, args: dict[str, Any]) -> dict[str, Any]:
        """The instance's domain and volumes on its host, then whatever the ledger recorded of
        its builds anywhere (a failed attempt elsewhere, an earlier instance of its name that a
        relaunch replaced), then its ledger rows."""
        hv = self._session(args["host"], args["uri"], args["timeout"]).hv
        ledger = self._ledger(args, reading=True)
        recorded = ledger.artefacts(args["uuid"], args["name"]) if ledger else []
        if self.check_mode:
            present = hv.find_domain(args["uuid"]) is not None
            known = bool(ledger and ledger.instances([args["name"]]))
            return {"changed": present or known or bool(recorded),
                    "msg": f"would delete {args['name']} from {args['host']}"
                           + (f" and {len(recorded)} recorded artefact(s) of its builds" if recorded else "")}
        removed = remove_instance(hv, args["uuid"], args["storage_pool"])
        by_build: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for item in recorded:
            by_build.setdefault((item["host"], item["instance_uuid"]), []).append(item)
        for (host, instance_uuid), items in sorted(by_build.items()):
            session = self._session(host, items[0]["uri"], args["timeout"])
            removed = bool(remove_recorded(session.hv, instance_uuid, items, spare_running=False)[0]) or removed
        forgotten = ledger.delete_instance(args["uuid"], [item["id"] for item in recorded]) if ledger else False
        return {"changed": removed or forgotten or bool(recorded)}


# The guest options build_record keeps: guest_spec's inputs, which give its full answer again.
GUEST_OPTIONS = ("firmware", "disk_bus", "nic_model", "guest_agent", "cdrom_bus", "graphics")


def build_record(request: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """What the instance's domain was defined from, beside its flavor (the ledger keeps it with
    the instance's request as ``build``): every move defines the domain on the destination
    from this, through the same template, never from the source's definition.

    ``local_disks``: the flavor's ephemeral and swap disks were built (records written before
    Berth built them lack it, and their instances have none)."""
    guest = request["guest"]
    return {"metadata": dict(request["metadata"]), "networks": [dict(net) for net in request["networks"]],
            "boot": dict(request["boot"]), "guest": {key: guest[key] for key in GUEST_OPTIONS},
            "seed": seed_wanted(request), "local_disks": True, "domain_type": args["domain_type"] or "",
            # What its <cpu> was made of on the host it was built on; the topology is not kept but
            # computed again from the flavor it is defined with (a resize changes it) and these
            # image properties.
            "cpu": _cpu_record(args.get("cpu"), (request.get("image") or {}).get("properties"))}


def _cpu_record(cpu: Mapping[str, Any] | None, properties: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if cpu is None:
        return None
    return {"mode": cpu["mode"], "model": cpu["model"], "features": [dict(item) for item in cpu["features"]],
            "image_properties": {key: value for key, value in (properties or {}).items()
                                 if key in CPU_TOPOLOGY_PROPERTIES}}


def _described_cpu(cpu: Mapping[str, Any] | None) -> str:
    cpu = cpu or {}
    features = " ".join(("+" if item["policy"] == "require" else "-") + item["name"] for item in cpu.get("features", []))
    return " ".join(filter(None, (cpu.get("model"), features))) or str(cpu.get("mode"))


def recorded_definition(instance: Mapping[str, Any], flavor: Flavor, template: DomainTemplate, pool_path: str,
                        offered_types: list[str], serial_log_dir: str,
                        assignment: Mapping[str, Any] | None = None) -> str:
    """The domain XML Berth defines for ``instance`` (a ledger row) with ``flavor`` where its
    volumes are in ``pool_path``: rendered from its build record, each part checked again as a
    launch checks it (a ledger row is not trusted), through ``template``. The serial log
    directory and the template are the caller's (operator's) settings, never the record's.
    InputError where the instance has no build record (adopted, or launched before Berth kept
    them). ``assignment``: what the instance's claim on that host holds of its CPUs, cells,
    pages and devices (None: nothing)."""
    built = (instance.get("request") or {}).get("build")
    if not isinstance(built, Mapping):
        raise InputError("carry_definition", f"{instance['name']} has no build record (adopted, or launched before "
                                             f"Berth kept them): Berth cannot define it again from what it knows")
    uuid = instance["uuid"]
    if not isinstance(uuid, str) or volume_instance_uuid(root_volume_name(uuid)) != uuid:
        raise InputError("uuid", f"{instance['name']}'s UUID in the ledger is not a UUID: {uuid!r}")
    guest = guest_spec(built.get("guest") or {})
    request = {"name": dns_label("name", instance["name"]), "uuid": uuid, "flavor": flavor, "guest": guest,
               "networks": network_specs(built.get("networks")), "metadata": metadata_spec(built.get("metadata")),
               "boot": boot_spec(built.get("boot")), "assignment": assignment}
    made = {"disk": {"path": os.path.join(pool_path, root_volume_name(uuid))},
            "seed": {"path": os.path.join(pool_path, seed_volume_name(uuid))} if built.get("seed") is True else None,
            "nvram": ({"path": os.path.join(pool_path, nvram_volume_name(uuid))} if guest["firmware"] == "uefi"
                      else None)}
    if built.get("local_disks") is True:
        made.update(local_disks(pool_path, uuid, flavor))
    requested_type = built.get("domain_type") or ""
    if requested_type not in ("", "kvm", "qemu"):
        raise InputError("domain_type", f"{instance['name']}'s recorded domain_type {requested_type!r} is not kvm or qemu")
    # The guest keeps its CPU wherever it moves (a live migration must; a cold one keeps it too,
    # see docs/docsite/rst/guest_cpu.rst), with the topology of the flavor it is defined with.
    cpu = built.get("cpu")
    properties = cpu.get("image_properties") if isinstance(cpu, Mapping) else None
    if properties is not None and (not isinstance(properties, Mapping) or set(properties) - set(CPU_TOPOLOGY_PROPERTIES)):
        raise InputError("cpu.image_properties", f"{instance['name']}'s recorded cpu.image_properties hold more than "
                                                 f"{', '.join(CPU_TOPOLOGY_PROPERTIES)}: {properties!r}")
    topology = best_topology(flavor.vcpus, flavor.extra_specs, properties)
    return template.render(request, made, domain_type(requested_type, offered_types), serial_log_dir,
                           cpu=recorded_cpu("cpu", cpu, topology))


class DomainTemplate:
    """The domain template (the role's, or one a task names), read and compiled once, rendered
    for each build with every value escaped by Jinja2's autoescape."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._compiled: Any = None
        self._lock = threading.Lock()

    def _template(self) -> Any:
        with self._lock:
            if self._compiled is None:
                environment = SandboxedEnvironment(
                    autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                    keep_trailing_newline=True,
                )
                try:
                    with open(self.path, encoding="utf-8") as handle:
                        self._compiled = environment.from_string(handle.read())
                except TemplateError as exc:
                    raise InputError("template", f"template {self.path} does not compile: {exc}") from exc
            return self._compiled

    def render(self, request: Mapping[str, Any], made: Mapping[str, Any], domain_type: str,
               serial_log_dir: str, cpu: Mapping[str, Any] | None = None) -> str:
        interfaces = [
            {**net, "mac": mac_address(request["uuid"], index)} for index, net in enumerate(request["networks"])
        ]
        # What the instance's claim holds on this host beyond vCPUs and memory (pinned CPUs,
        # cells, pages, devices): checked here, since it comes from the ledger.
        claimed = request.get("assignment")
        mdevs = claimed.get("mdevs") if isinstance(claimed, Mapping) else None
        mdev_uuids = [mdev_uuid(request["uuid"], index) for index in range(len(mdevs))] if isinstance(mdevs, list) else []
        assignment = assignment_context(claimed, request["flavor"].vcpus, request["flavor"].memory_mb, mdev_uuids)
        try:
            rendered = self._template().render(
                instance={"name": request["name"], "uuid": request["uuid"], "metadata": request["metadata"]},
                flavor=request["flavor"].to_dict(),
                domain_type=domain_type,
                boot=request["boot"],
                disk=made["disk"],
                seed=made["seed"],
                nvram=made["nvram"],
                local_disks={"ephemeral": made.get("ephemeral"), "swap": made.get("swap")},
                guest=request["guest"],
                interfaces=interfaces,
                cpu=cpu,
                assignment=assignment,
                serial_log=os.path.join(serial_log_dir, serial_log_file(request["name"])),
            )
            ET.fromstring(rendered)
        except (TemplateError, ET.ParseError) as exc:
            raise InputError("template", f"template {os.path.basename(self.path)} did not give valid domain XML: "
                                         f"{exc}") from exc
        return rendered
