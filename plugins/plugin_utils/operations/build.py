"""Building and removing placed instances' domains on their hypervisors, with retries on the
alternates: what berth.fleet.instance, berth.fleet.server and playbooks/launch.yml do after the
schedule. Private to the collection.

Given the operator's settings, the opened ledger (or None), the path of the domain template, and
the hooks port; a build is given the launch's checked Request, which it takes as it is. Each
hypervisor is opened once per operation (``HostSession``), and its pool and networks read once.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Sequence

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from ansible_collections.berth.fleet.plugins.module_utils._guest import volume_devices
from ansible_collections.berth.fleet.plugins.module_utils._numa_xml import assignment_context, mdev_uuid
from ansible_collections.berth.fleet.plugins.module_utils.errors import (
    BerthError,
    ControllerRefusal,
    HypervisorError,
    InputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request, dns_label
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    data_volume_name,
    nvram_volume_name,
    root_volume_name,
    seed_volume_name,
    volume_instance_uuid,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import COLLECTION_ROOT
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import image_source_dirs
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import (
    PLANNED_UUID,
    CleanupFailed,
    HostSession,
    attempt_targets,
    domain_type,
    local_disks,
    mac_address,
    make,
    plan,
    remove_instance,
    remove_recorded,
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
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The domain template of the role berth.fleet.instance: the one every build renders unless a
# task names another.
DEFAULT_TEMPLATE = os.path.join(COLLECTION_ROOT, "roles", "instance", "templates", "domain.xml.j2")
# What a placement carries to its build, as the schedule gives it (berth.fleet.schedule's
# placements): where it goes and how to reach it, its alternates, and its claim's assignment.
PLACEMENT_FIELDS = ("name", "uuid", "host", "uri", "domain_types", "cpu", "cpu_shared_set", "targets", "assignment")


class Build:
    """Build placed instances of one request on their hypervisors (``build``), or remove
    instances from theirs (``remove``), with the operator's ``settings``; each hypervisor opened
    once through ``connect`` (libvirt's by default), each call within ``timeout_s``. Both return
    the task's result."""

    def __init__(self, settings: Settings, ledger: Ledger | None, template_path: str, check_mode: bool,
                 diff: bool, hooks: Hooks = NO_HOOKS, timeout_s: float = 30, connect: Connect = Hypervisor) -> None:
        self.settings, self.check_mode, self.diff, self.hooks, self.timeout_s = settings, check_mode, diff, hooks, timeout_s
        self.connect = connect
        self._opened_ledger = ledger
        self.template = DomainTemplate(template_path)  # compiled once, shared by the operation's instances
        self._sessions: dict[str, HostSession] = {}
        self._sessions_lock = threading.Lock()
        self._progress = Progress()
        self._uri_policy = UriPolicy.from_settings(settings.uri_policy)

    def _ledger(self, reading: bool = False) -> Ledger | None:
        """The ledger: None without it, and in check mode unless ``reading`` (nothing is
        written then). SQLAlchemy's engine is thread-safe, each call has its own session."""
        if not self.settings.ledger or (self.check_mode and not reading):
            return None
        return self._opened_ledger

    def _session(self, host: str, uri: str) -> HostSession:
        """The task's one session with ``host``: one connection, one read of its pool."""
        with self._sessions_lock:
            if host not in self._sessions:
                self._sessions[host] = HostSession(host, uri, self.timeout_s, self._uri_policy, self.connect)
            return self._sessions[host]

    def build(self, request: Request, placements: Sequence[Mapping[str, Any]], exact: Any = None) -> dict[str, Any]:
        """Build each of ``placements`` (PLACEMENT_FIELDS) from ``request``. ``exact``: what the
        request asks of NUMA cells, CPUs, pages and devices (assignment.of_spec, None for
        nothing), which a claim on an alternate fits."""
        return self._many(placements, lambda placement: self._active(request, placement, exact))

    def rebuild(self, request: Request, target: Mapping[str, Any], name: str, uuid: str,
                assignment: Mapping[str, Any] | None) -> dict[str, Any]:
        """Make instance ``name`` (``uuid``) anew from ``request`` on ``target`` (build_target's)
        alone - an evacuation's or a rebuild's, whose claim there is taken already: its volumes
        from its image, its seed with the user data the ledger keeps apart for it, its domain
        defined and started; no alternates, and the instance's state is the caller's to set.
        ``assignment``: what its claim there holds of CPUs, cells, pages and devices. Returns
        {changed, domain, cpu, built: the build record to keep}; what fails is removed from the
        host and raised."""
        ledger = self._ledger(reading=True)
        if ledger is not None:
            request = dataclasses.replace(request, user_data=ledger.user_data(uuid))
        try:
            chosen_type = domain_type(request.domain_type, list(target.get("domain_types") or []))
            cpu = guest_cpu(target.get("cpu"), target["host"], chosen_type, request.topology,
                            request.guest.values["cpu_baseline"])
            result = self._on_host(self._session(target["host"], target["uri"]), name, uuid, request, assignment,
                                   chosen_type, cpu, target.get("cpu_shared_set"), self._progress.of(name, target["host"]))
        finally:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()
        return {**result, "cpu": cpu, "built": Built(seed=request.wants_seed, cpu=cpu).to_record()}

    def remove(self, placements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Remove each of ``placements`` (name, uuid, host, uri): its domain, volumes and what the
        ledger recorded of its builds anywhere, then its ledger rows."""
        return self._many(placements, self._absent)

    def _many(self, placements: Sequence[Mapping[str, Any]],
              one: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """Build (or remove) several instances: hosts in parallel, each host's instances in turn.

        QEMU start-up dominates a build, and hypervisors do not wait for each other; one host's
        builds stay in order so that its daemon is not asked for everything at once.
        """
        try:
            by_host: dict[str, list[int]] = {}
            for index, placement in enumerate(placements):
                by_host.setdefault(str(placement.get("host")), []).append(index)
            results: list[dict[str, Any]] = [{} for _placement in placements]

            def work(indices: list[int]) -> None:
                for index in indices:
                    placement = {key: placements[index].get(key) for key in PLACEMENT_FIELDS}
                    try:
                        dns_label("name", placement["name"])
                        result = one(placement)
                    except Exception as exc:  # reported per instance; the others go on
                        result = {"failed": True, "msg": str(exc) or type(exc).__name__}
                    result.update(item={"name": placement["name"], "host": placement["host"]})
                    results[index] = result
                    if result.get("failed"):
                        self._progress.step(placement["name"], placement["host"], f"FAILED: {result['msg']}")

            with ThreadPoolExecutor(max_workers=max(1, len(by_host))) as pool:
                list(pool.map(work, by_host.values()))
        finally:
            for session in self._sessions.values():
                session.close()
        failed = [r for r in results if r.get("failed")]
        outcome: dict[str, Any] = {"changed": any(r.get("changed") for r in results), "results": results}
        if failed:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} instance(s) failed: "
                           + "; ".join(r["msg"] for r in failed))
        return outcome

    # ---- building -----------------------------------------------------------------------------

    @staticmethod
    def _claimed(ledger: Ledger, instance_uuid: str, host: str) -> dict[str, Any] | None:
        """The assignment of the instance's claim on ``host`` (None: it asked for none)."""
        for held in ledger.claims(instance_uuid):
            if held["host"] == host:
                return held["assignment"]
        return None

    def _active(self, request: Request, placement: Mapping[str, Any], exact: Any) -> dict[str, Any]:
        name, uuid = placement["name"], placement["uuid"]
        if not uuid and not self.check_mode:
            raise InputError("uuid", "uuid is required (the instance's UUID from the ledger)")
        if self.settings.max_attempts < 1:
            raise InputError("max_attempts", f"max_attempts must be at least 1, got {self.settings.max_attempts}")
        ledger = self._ledger()
        targets = attempt_targets(placement, self.settings.max_attempts)
        if ledger is None:
            # Without the ledger (and in check mode) there is no claim to move: no retry elsewhere.
            targets = targets[:1]
        reasons: list[str] = []
        # Check mode's planned assignment, as the schedule's decision took it.
        assignment = placement.get("assignment")
        volumes = self._launch_volumes(request, name, uuid)
        for attempt, target in enumerate(targets):
            if attempt:
                try:
                    moved = ledger.claim_alternate(uuid, target["host"], target["hypervisor_uuid"], run_owner(),
                                                   self.settings.lease_seconds, exact=exact)
                except ClaimConflict as conflict:
                    reasons.append(str(conflict))
                    continue
                # Pinned CPUs, cells and devices are the host's own: the alternate's claim has its
                # assignment, never the first host's.
                assignment = moved.get("assignment")
            elif ledger is not None and uuid:
                # What the instance's claim took on this host, as the ledger holds it: the claim
                # decides, not the task's arguments.
                assignment = self._claimed(ledger, uuid, target["host"])
            chosen_type = domain_type(request.domain_type, target["domain_types"])
            step = self._progress.of(name, target["host"])
            try:
                # The host's CPU settings, checked against what its last sync recorded it can run:
                # refused there (an InputError naming the host's setting), tried on the next.
                cpu = guest_cpu(target.get("cpu"), target["host"], chosen_type, request.topology,
                                request.guest.values["cpu_baseline"])
                result = self._on_host(self._session(target["host"], target["uri"]), name, uuid or PLANNED_UUID,
                                       request, assignment, chosen_type, cpu, target.get("cpu_shared_set"), step,
                                       volumes)
            except CleanupFailed as exc:
                if ledger is None:
                    raise
                ledger.build_failed(uuid)
                # What it made there may even run (a start whose answer was lost): built again
                # elsewhere, the instance could run twice. Its claim and lease stay on that host,
                # and the first sync after the lease settles it, as for a run that died there.
                step(f"FAILED, not tried elsewhere: {exc}")
                raise BerthError(f"{name}: {exc}. Not tried on another host, so that it never runs twice: "
                                 f"it stays BUILDING on {target['host']}, and the first gather.yml that reaches "
                                 f"{target['host']} after its lease finishes it if its domain runs there, else "
                                 f"removes what it left and marks it ERROR") from exc
            except Exception as exc:
                reasons.append(str(exc) if isinstance(exc, HypervisorError) else f"{target['host']}: {exc}")
                if ledger is not None and attempt + 1 < len(targets):
                    step(f"failed, trying {targets[attempt + 1]['host']} next: {reasons[-1]}")
                if ledger is None:
                    raise
                if failed_on_host(exc):
                    # The host's failure, counted there as Nova's compute manager counts it.
                    ledger.build_failed(uuid)
                # Whatever was made there is gone (make() cleaned up); claim_alternate gives the
                # claim back when it claims the next host, mark_error when none is left.
                continue
            if ledger is not None:
                # The instance as the ledger now has it: a play's closing table shows it.
                try:
                    built = Built(seed=request.wants_seed, cpu=cpu)
                    result["instance"] = (ledger.mark_active(uuid, built.to_record()) if result["changed"]
                                          else ledger.instances([name])[0])
                except ClaimLost as lost:
                    # The lease ran out before the build ended and a sync gave the claim back:
                    # the instance is ERROR already, and what was built takes room nobody counts.
                    hv = self._session(target["host"], target["uri"]).hv
                    remove_instance(hv, uuid, self.settings.storage_pool)
                    for volume in volumes:
                        hv.delete_volume(self.settings.storage_pool, data_volume_name(volume["name"]))
                    raise BerthError(f"{name}: {lost}; what was built on {target['host']} is removed "
                                     f"(give launches a longer berth_lease_seconds)") from lost
            # The CPU it was given there (mode, model, features, topology, and why a default was
            # changed): the host's settings, which the request did not show.
            result.update(host=target["host"], failed_attempts=reasons, cpu=cpu)
            return result
        reason = f"build failed on {len(reasons)} host(s): " + "; ".join(reasons)
        # The claim is already back; the instance stays, in ERROR, with every reason.
        ledger.mark_error(uuid, reason)
        raise BerthError(f"{name}: {reason}")

    def _launch_volumes(self, request: Request, name: str, uuid: str | None) -> list[dict[str, Any]]:
        """The data volumes the build of instance ``name`` makes with it, for a request that
        asks for some: those its claim recorded as attached to it (a first build's are its
        launch's alone: nothing else attaches to an instance being built), or in check mode those
        the request would make."""
        ledger = self._ledger()
        if not request.volumes or ledger is None or not uuid:
            return request.volume_rows(name)
        return [volume for volume in ledger.volumes(instance_uuid=uuid) if not volume["shared"]]

    def _on_host(self, session: HostSession, name: str, uuid: str, request: Request,
                 assignment: Mapping[str, Any] | None, chosen_type: str, cpu: Mapping[str, Any] | None,
                 shared_cpus: Any, step: Any, volumes: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        host, pool = session.host, self.settings.storage_pool
        placed = uuid != PLANNED_UUID
        current = session.hv.find_domain(uuid) if placed else None
        if current is not None and current["state"] == "running":
            step("running already", detail=True)
            return {"changed": False, "domain": current}
        planned = plan(session, name, uuid, request, pool, lambda made: self.template.render(
            request, name, uuid, made, chosen_type, self.settings.serial_log_dir, cpu=cpu, assignment=assignment,
            shared_cpus=shared_cpus), volumes)
        # A custom model with its features, compared with the host's CPU by its libvirt before
        # anything is made there (in check mode too): the features it lacks are named.
        refusal = session.hv.guest_cpu_refusal(planned["xml"], chosen_type)
        if refusal:
            raise InputError(f"hypervisors.{host}.cpu_model_extra_flags",
                             f"{host} cannot run the guest CPU its settings give "
                             f"({_described_cpu(cpu)}) as a {chosen_type} domain: {refusal}")
        result: dict[str, Any] = {"changed": True}
        if self.diff:
            result["diff"] = {
                "before": (session.hv.domain_xml(uuid) if placed else None) or "",
                "after": planned["xml"],
                "before_header": f"{name} on {host} (libvirt)",
                "after_header": f"{name} on {host} (planned)",
            }
        if self.check_mode:
            result["msg"] = f"would build {name} on {host}"
            if planned["volumes"]:
                result["msg"] += " with volume(s) " + ", ".join(
                    f"{volume['name']} ({volume['size_gb']} GB on {volume['target']})" for volume in planned["volumes"])
            if planned["upload"]:
                result["msg"] += f", uploading image {planned['upload'].name} there first"
            return result
        ledger = self._ledger()
        if ledger is not None:
            # Before anything is made: a run that dies from here on leaves nothing unknown.
            ledger.record_artefacts(uuid, host, planned["artefacts"], run_owner())
        make(session, uuid, pool, planned, request.autostart, image_source_dirs(self.settings), step, self.hooks)
        result.update(state=ACTIVE, domain=session.hv.find_domain(uuid))
        return result

    # ---- removing -----------------------------------------------------------------------------

    def _absent(self, placement: Mapping[str, Any]) -> dict[str, Any]:
        """The instance's domain and volumes on its host, then whatever the ledger recorded of
        its builds anywhere (a failed attempt elsewhere, an earlier instance of its name that a
        relaunch replaced), then its ledger rows."""
        name, uuid, pool = placement["name"], placement["uuid"], self.settings.storage_pool
        if not uuid:
            raise InputError("uuid", "uuid is required (the instance's UUID from the ledger)")
        hv = self._session(placement["host"], placement["uri"]).hv
        ledger = self._ledger(reading=True)
        recorded = ledger.artefacts(uuid, name) if ledger else []
        # Its volumes that its launch marked delete_on_termination go with it; the others are
        # detached and kept (delete_instance).
        terminated = [volume for volume in (ledger.volumes(instance_uuid=uuid) if ledger else [])
                      if volume["delete_on_termination"]]
        if self.check_mode:
            present = hv.find_domain(uuid) is not None
            known = bool(ledger and ledger.instances([name]))
            return {"changed": present or known or bool(recorded),
                    "msg": f"would delete {name} from {placement['host']}"
                           + (f" and {len(recorded)} recorded artefact(s) of its builds" if recorded else "")
                           + (" with its volume(s) " + ", ".join(volume["name"] for volume in terminated)
                              if terminated else "")}
        removed = remove_instance(hv, uuid, pool)
        for volume in terminated:
            # The domain that used it is gone: the file goes before its row, so that a run that
            # dies between them leaves a row the next delete forgets.
            removed = hv.delete_volume(volume["pool"], data_volume_name(volume["name"])) or removed
        by_build: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for item in recorded:
            by_build.setdefault((item["host"], item["instance_uuid"]), []).append(item)
        for (host, instance_uuid), items in sorted(by_build.items()):
            session = self._session(host, items[0]["uri"])
            removed = bool(remove_recorded(session.hv, instance_uuid, items, spare_running=False)[0]) or removed
        forgotten = ledger.delete_instance(uuid, [item["id"] for item in recorded]) if ledger else False
        return {"changed": removed or forgotten or bool(recorded)}


def failed_on_host(exc: BaseException) -> bool:
    """Whether a failed build attempt is the host's own failure, which its ``failed_builds``
    count (BuildFailureWeigher) takes: a libvirt call that failed or timed out there. Never what
    the controller refused or could not do itself (ControllerRefusal: its URI policy, credentials
    it withholds, an image it cannot read), a request that host cannot be given (InputError: a
    template error, a CPU its settings cannot give, an image or network it lacks), nor a failure
    of the ledger or of Berth's own code."""
    return isinstance(exc, HypervisorError) and not isinstance(exc, ControllerRefusal)


def _described_cpu(cpu: Mapping[str, Any] | None) -> str:
    cpu = cpu or {}
    features = " ".join(("+" if item["policy"] == "require" else "-") + item["name"] for item in cpu.get("features", []))
    return " ".join(filter(None, (cpu.get("model"), features))) or str(cpu.get("mode"))


def shared_pool_paths(hv: HypervisorDriver, volumes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The directories on ``hv`` of the shared pools that hold any of ``volumes`` (ledger rows),
    by pool: recorded_definition's ``pool_paths``."""
    return {volume["pool"]: hv.pool_path(volume["pool"]) for volume in volumes if volume.get("shared")}


def recorded_definition(instance: Mapping[str, Any], template: DomainTemplate, pool_path: str,
                        offered_types: list[str], serial_log_dir: str, flavor: Any = None,
                        assignment: Mapping[str, Any] | None = None, shared_cpus: Any = None,
                        volumes: Sequence[Mapping[str, Any]] = (),
                        pool_paths: Mapping[str, str] | None = None) -> str:
    """The domain XML Berth defines for ``instance`` (a ledger row) where its volumes are in
    ``pool_path``: rendered from the request it recorded (read back into its type, every part
    checked as a launch checks it: a ledger row is not trusted) and its build record, through
    ``template``, with ``flavor`` where a resize gives another. The serial log directory and the
    template are the caller's (operator's) settings, never the record's. InputError where the
    instance has no build record (adopted, or launched before Berth kept them) or a record this
    Berth cannot read. ``assignment``: what the instance's claim on that host holds of its CPUs,
    cells, pages and devices (None: nothing); ``shared_cpus``: that host's cpu_shared_set, which
    a guest without pinned CPUs floats over there (None: the host has none); ``volumes``: the
    data volumes attached to it (the ledger's, each with its name and ``target`` device), those of
    a shared pool in that pool's directory on that host (``pool_paths``: shared_pool_paths')."""
    if not instance.get("request"):
        raise InputError("carry_definition", f"{instance['name']} has no build record (adopted, or launched before "
                                             f"Berth kept them): Berth cannot define it again from what it knows")
    request, built = Request.from_record(instance["request"])
    if built is None:
        raise InputError("carry_definition", f"{instance['name']} has no build record (adopted, or launched before "
                                             f"Berth kept them): Berth cannot define it again from what it knows")
    uuid = instance["uuid"]
    if not isinstance(uuid, str) or volume_instance_uuid(root_volume_name(uuid)) != uuid:
        raise InputError("uuid", f"{instance['name']}'s UUID in the ledger is not a UUID: {uuid!r}")
    if flavor is not None:
        request = request.resized(flavor)
    made = {"disk": {"path": os.path.join(pool_path, root_volume_name(uuid))},
            "seed": {"path": os.path.join(pool_path, seed_volume_name(uuid))} if built.seed else None,
            "nvram": ({"path": os.path.join(pool_path, nvram_volume_name(uuid))}
                      if request.guest.values["firmware"] == "uefi" else None)}
    if built.local_disks:
        made.update(local_disks(pool_path, uuid, request.flavor))
    devices = volume_devices(request.guest.values["disk_bus"])
    made["volumes"] = []
    for volume in volumes:
        if volume["target"] not in devices:
            raise InputError("volume", f"{instance['name']}'s volume {volume['name']} is recorded on device "
                                       f"{volume['target']!r}, not one of {devices[0]}..{devices[-1]}")
        directory = pool_path
        if volume.get("shared"):
            if volume["pool"] not in (pool_paths or {}):
                raise BerthError(f"{instance['name']}'s volume {volume['name']} is in shared pool {volume['pool']}, "
                                 f"whose directory on the host is not known")
            directory = (pool_paths or {})[volume["pool"]]
        made["volumes"].append({"path": os.path.join(directory, data_volume_name(dns_label("volume", volume["name"]))),
                                "target": volume["target"], "shared": bool(volume.get("shared"))})
    # The guest keeps its CPU wherever it moves (a live migration must; a cold one keeps it too,
    # see docs/docsite/rst/guest_cpu.rst), with the topology of the flavor it is defined with.
    cpu = {**built.cpu, "topology": dict(request.topology)} if built.cpu is not None else None
    return template.render(request, dns_label("name", instance["name"]), uuid, made,
                           domain_type(request.domain_type, offered_types), serial_log_dir, cpu=cpu,
                           assignment=assignment, shared_cpus=shared_cpus)


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

    def render(self, request: Request, name: str, uuid: str, made: Mapping[str, Any], domain_type: str,
               serial_log_dir: str, cpu: Mapping[str, Any] | None = None,
               assignment: Mapping[str, Any] | None = None, shared_cpus: Any = None) -> str:
        """The domain XML of instance ``name`` (``uuid``) from ``request``, with the volumes and
        files ``made`` for it (plan's), on a host of ``domain_type``. ``assignment``: what the
        instance's claim holds on that host beyond vCPUs and memory (pinned CPUs, cells, pages,
        devices); ``shared_cpus``: the host's cpu_shared_set, which a guest without NUMA cells
        floats over (Nova's <vcpu cpuset>); both checked here, since they come from the ledger."""
        flavor = request.flavor
        interfaces = [{**network.to_dict(), "mac": mac_address(uuid, index)}
                      for index, network in enumerate(request.networks)]
        mdevs = assignment.get("mdevs") if isinstance(assignment, Mapping) else None
        mdev_uuids = [mdev_uuid(uuid, index) for index in range(len(mdevs))] if isinstance(mdevs, list) else []
        context = assignment_context(assignment, flavor.vcpus, flavor.memory_mb, mdev_uuids, shared_cpus)
        try:
            rendered = self._template().render(
                instance={"name": name, "uuid": uuid, "metadata": dict(request.metadata)},
                flavor=flavor.to_dict(),
                domain_type=domain_type,
                boot=request.boot.to_dict(),
                disk=made["disk"],
                seed=made["seed"],
                nvram=made["nvram"],
                local_disks={"ephemeral": made.get("ephemeral"), "swap": made.get("swap")},
                volumes=made.get("volumes", []),
                guest=request.guest.template_context(),
                interfaces=interfaces,
                cpu=cpu,
                assignment=context,
                serial_log=os.path.join(serial_log_dir, serial_log_file(name)),
            )
            ET.fromstring(rendered)
        except (TemplateError, ET.ParseError) as exc:
            raise InputError("template", f"template {os.path.basename(self.path)} did not give valid domain XML: "
                                         f"{exc}") from exc
        return rendered
