"""Moving an instance to another hypervisor: the one move path of a migration (live or cold),
a drain's moves and a resize onto another host. It owns the destination search (a resize
prefers the instance's own host) and reads the domain's definition once. Private to the
collection."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils import _transfer
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_text import failure_message, recorded_constraints
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import build_target, read_fleet
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import OFF_STATES
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import carried_volumes_mb, move_request
from ansible_collections.berth.fleet.plugins.plugin_utils._transfer import foreign_parts, power_off
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    STOPPED,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
    shared_pool_paths,
)

# A paused domain would need a live migration that keeps it paused; resume it first.
MOVABLE_STATES = (ACTIVE, STOPPED)


def known_instance(ledger: Ledger, name: str) -> dict[str, Any]:
    """The ledger's row of the instance ``name``, with its host's URI; the one refusal of a verb
    given a name the ledger does not know (naming ``name``)."""
    rows = ledger.instances([name])
    if not rows:
        raise InputError("name", f"no instance named {name} in {ledger.label} (playbooks/list.yml lists them)")
    return rows[0]


def placed_instance(ledger: Ledger, name: str, states: tuple[str, ...], verb: str) -> dict[str, Any]:
    """The ledger's row of the instance ``name``, in one of ``states``, with its host's URI."""
    instance = known_instance(ledger, name)
    if instance["state"] not in states:
        raise InputError("name", f"{name} is {instance['state']}, only {' and '.join(states)} instances {verb}")
    return instance


# What a screen of candidate destinations says of one: (why it cannot take the instance, or None;
# a note for the explanation, or None).
Screen = Callable[[Mapping[str, Any]], tuple[str | None, str | None]]


def own_host_refusal(fleet: Any, instance: Mapping[str, Any], held: Sequence[Mapping[str, Any]],
                     spec: Any) -> tuple[str | None, str | None]:
    """Why the instance's own host in ``fleet`` (read_fleet's, for ``spec``) would not take it
    with ``spec`` - a resize's new flavor, a rebuild's or rescue's image - as the scheduler says
    it, with the claims it ``held`` there given back, and the rejection's reason (results.REASON_*)
    where one says it; (None, None) where it would."""
    names = list(fleet.hosts.column("host"))
    if instance["host"] not in names:
        return "its host is not among the ledger's hypervisors", None
    here = fleet.hosts[names.index(instance["host"])].copy()
    for claim in held:
        here.release(claim["vcpus"], claim["memory_mb"], claim["disk_mb"])
    decision = schedule([here], spec)
    if decision.ok:
        return None, None
    rejections = decision.rejections or []
    return (rejections[0].message(), rejections[0].reason) if rejections else (decision.summary, None)


def destination(args: Mapping[str, Any], settings: Settings, task_vars: Mapping[str, Any], ledger: Ledger,
                instance: Mapping[str, Any],
                new_flavor: Flavor | None = None, screen: Screen | None = None) -> dict[str, Any]:
    """Where a move goes, decided on the ledger's host states with their claims as usage (a
    drain moves instances one after the other: each move took its claim along):

    - a resize (``new_flavor``) stays on the instance's own host where the new flavor passes
      every filter there with the instance's own claim given back (Nova's
      allow_resize_to_same_host, preferred here: nothing moves);
    - a migration to a named host (``args["to_host"]``) goes there, checked;
    - else the scheduler picks among the other hosts (never the source).

    Every search uses the request the instance recorded at launch (its zone, server group,
    hints, labels...: _placement_spec.move_request), with the source ignored, the group as the
    move's claim will check it (without the moving instance), and the host rules that select it.

    ``screen`` (a live migration's CPU check, CpuCheck) is asked about each host chosen: one it
    turns down is passed over with its reason, and the scheduler asked again with it ignored, as
    Nova's conductor reschedules a live migration, up to ``settings.migrate_max_retries`` more
    times (-1: until no host is left). With none left, the move is refused naming each host's
    reason - or, for ``args["mode"]`` auto, goes cold to the first host chosen, with those
    reasons as ``live_refused``.

    Returns the build target ({host, hypervisor_uuid, uri, domain_types}) with ``why``, and
    ``warnings`` (an instance without a recorded request moves without its constraints; a
    recorded hint whose filter is not enabled does not hold)."""
    source, name = instance["host"], instance["name"]
    retries = settings.migrate_max_retries
    if retries < -1:
        raise InputError("migrate_max_retries", f"migrate_max_retries must be -1 (no limit) or more, got {retries}")
    flavor = new_flavor or instance_flavor(instance)
    group = ledger.moving_member_group(instance["uuid"])
    # The operator's host rules as they are now: those that select the instance hold for its move.
    rules = ledger.scheduler_rules()
    # Its attached volumes of a local pool go with it: the destination needs room for them too.
    carried_mb = carried_volumes_mb(ledger.volumes(instance_uuid=instance["uuid"])).get(instance["uuid"], 0)
    spec, unknown = move_request(instance, flavor, settings, [source], group, rules, carried_mb)
    warnings = [] if unknown is None else [
        f"{name}: {unknown}: it moves with its flavor, project and image properties only - the availability "
        f"zone and scheduler hints it was launched with are not known; its server group, if any, still holds"]
    # Warned, not refused as a launch is: an instance that exists must stay movable (a drain, an
    # evacuation), whatever its launch asked. The scheduler's summary (the move's why) says it too.
    warnings += [f"{name}'s recorded {item}: this move does not hold it" for item in spec.idle_hints()]
    fleet = read_fleet(settings, task_vars, spec, ledger, sync=False)
    names = list(fleet.hosts.column("host"))
    why_not = None
    held = [claim for claim in ledger.claims(instance["uuid"]) if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]]
    if new_flavor is not None and (of_spec(spec) is not None or any(claim["assignment"] for claim in held)):
        # Its CPUs, cells, pages or devices are fitted anew on another host (the ledger refuses to
        # hold both sizes' on one): its own host is not tried.
        why_not = "it holds or asks for pinned CPUs, NUMA cells, huge pages or devices, which a resize fits anew elsewhere"
    elif new_flavor is not None:
        why_not = own_host_refusal(fleet, instance, held, move_request(instance, flavor, settings, (), group, rules)[0])[0]
        if why_not is None:
            return {"host": source, "hypervisor_uuid": instance["hypervisor_uuid"], "uri": instance["uri"],
                    "why": f"{source} still has room for it (its own host is preferred)", "warnings": warnings}
    named = args.get("to_host")
    if named:
        if named == source:
            raise InputError("to_host", f"{name} already runs on {source}: name another host")
        if named not in names:
            raise InputError("to_host", f"unknown host {named} (hypervisors: {', '.join(sorted(names))})")
        state = fleet.hosts[names.index(named)]
        if not state.service_up:
            raise BerthError(f"{named} does not answer: {state.down_reason or 'down'}")
        target = {**build_target(fleet, ledger, state), "why": "named by to_host", "warnings": warnings}
        if screen is None:
            return target
        refusal, note = screen(target)
        if refusal is not None:
            return _no_live_destination([{**target, "refused": refusal}], args, name)
        return _passed(target, [], note)
    passed_over: list[dict[str, Any]] = []
    while True:
        decision = schedule(fleet.hosts, spec)
        if not decision.ok:
            break
        chosen = fleet.hosts[names.index(decision.placements[0].host)]
        why = f"chosen by the scheduler: {decision.summary}"
        constrained = recorded_constraints(decision)
        if constrained:
            why += f"; its launch's request turned down {constrained}"
        if why_not is not None:
            why = f"{source} has no room ({why_not}); {why}"
        target = {**build_target(fleet, ledger, chosen), "why": why, "warnings": warnings}
        if screen is None:
            return target
        refusal, note = screen(target)
        if refusal is None:
            return _passed(target, passed_over, note)
        passed_over.append({**target, "refused": refusal})
        if 0 <= retries < len(passed_over):
            return _no_live_destination(passed_over, args, name,
                                        f"no more than {retries} other hosts tried (migrate_max_retries)")
        spec = move_request(instance, flavor, settings, [source, *(host["host"] for host in passed_over)], group,
                            rules, carried_mb)[0]
    if passed_over:
        return _no_live_destination(passed_over, args, name, f"no other host: {failure_message(decision)}")
    if new_flavor is not None:
        raise BerthError(f"cannot resize {name} to {new_flavor.name}: its host {source} has no room ({why_not}), "
                         f"and elsewhere {failure_message(decision)}")
    raise BerthError(f"cannot migrate {name}: {failure_message(decision)}")


def _passed(target: Mapping[str, Any], passed_over: list[dict[str, Any]], note: str | None) -> dict[str, Any]:
    """The host a screen accepted, its explanation naming the hosts passed over before it, and why."""
    why = target["why"]
    if passed_over:
        why += "; passed over: " + "; ".join(f"{host['host']} ({host['refused']})" for host in passed_over)
    if note:
        why += f"; {note}"
    return {**target, "why": why}


def _no_live_destination(passed_over: list[dict[str, Any]], args: Mapping[str, Any], name: str,
                         ending: str | None = None) -> dict[str, Any]:
    """The answer when every host chosen was ``passed_over`` by the screen (each with why it was
    ``refused``) and no other is left (``ending`` says why): refused naming each host and its
    reason, or, for mode auto, a cold move to the first of them saying why it is not live."""
    reasons = "; ".join(f"{host['host']}: {host['refused']}" for host in passed_over)
    if ending:
        reasons += f"; and {ending}"
    if args.get("mode") == "auto":
        first = {key: value for key, value in passed_over[0].items() if key != "refused"}
        return {**first, "live_refused": f"no destination can run it live: {reasons}"}
    raise BerthError(f"cannot live-migrate {name}: no destination can run it live: {reasons}")


class CpuCheck:
    """The screen of a live migration's destinations (destination()'s ``screen``): can the
    candidate run the guest's CPU? Nova's check_can_live_migrate_destination, asked of the
    candidate's own libvirt (_transfer.cpu_refusal) with the CPU read once from the running domain
    on ``src`` (_transfer.guest_cpu).

    ``open_host(target)`` connects to a candidate (an open HypervisorDriver). One that cannot be
    reached, or whose comparison fails, is turned down with the reason, as Nova's conductor
    passes over a host whose pre-check fails. The connection to the host it accepts is kept
    (``accepted``) for the move itself."""

    def __init__(self, src: HypervisorDriver, uuid: str,
                 open_host: Callable[[Mapping[str, Any]], HypervisorDriver]) -> None:
        live_xml = src.domain_xml(uuid)
        if live_xml is None:
            raise HypervisorError(src.host, f"domain {uuid} is not there, though the ledger says so")
        self.src, self.open_host = src, open_host
        # Read once: the move's plan takes it too.
        self.defined_xml = src.domain_xml(uuid, inactive=True)
        self.guest = _transfer.guest_cpu(live_xml, self.defined_xml)
        self.accepted: HypervisorDriver | None = None

    def __call__(self, target: Mapping[str, Any]) -> tuple[str | None, str | None]:
        if self.guest.not_compared:
            return None, f"CPU not compared: {self.guest.not_compared}"
        try:
            dst = self.open_host(target)
        except HypervisorError as exc:
            return f"cannot be reached to compare the CPU: {exc}", None
        try:
            refusal, note = _transfer.cpu_refusal(self.src, dst, self.guest)
            if refusal is not None:
                refusal = f"cannot run the guest's CPU, {refusal}"
        except HypervisorError as exc:
            refusal, note = f"the CPU comparison failed: {exc}", None
        if refusal is not None:
            dst.__exit__()
            return refusal, None
        self.accepted = dst
        return None, note or "its CPU can run the guest's"


def live_cpu_check(args: Mapping[str, Any], settings: Settings, src: HypervisorDriver, instance: Mapping[str, Any],
                   open_host: Callable[[Mapping[str, Any]], HypervisorDriver]) -> CpuCheck | None:
    """The CPU check of a move that would go live, or None where it would not: a cold move (the
    destination starts the guest afresh, and libvirt checks its CPU as it starts it), a domain
    that does not run, a source that offers no live migration - or the operator's
    ``skip_cpu_compare_on_dest`` (Nova's workaround of that name: libvirt still checks the CPU
    at the destination during the migration itself)."""
    if args["mode"] == "cold" or settings.skip_cpu_compare_on_dest:
        return None
    if src.domain_state(instance["uuid"]) != "running" or not src.can_live_migrate():
        return None
    return CpuCheck(src, instance["uuid"], open_host)


def connections(args: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """The libvirt call and transfer timeouts of a move's connections, and the URI policy."""
    return {"timeout_s": args["timeout"], "transfer_timeout_s": settings.transfer_timeout,
            "uri_policy": UriPolicy.from_settings(settings.uri_policy)}


class Move:
    """One instance's domain and volumes onto ``target``: the destination claimed first (for
    ``new_flavor``, a resize's, where given), then moved - live where ``args["mode"]`` and both
    hosts allow, else cold; a resize always cold, its definition rewritten on the way by
    ``rewrite`` - then the source's claim released once the domain is gone from it. Any failure
    leaves the domain on the source (started again if it ran) and gives the destination back."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, instance: Mapping[str, Any],
                 target: Mapping[str, Any], hooks: Hooks = NO_HOOKS, new_flavor: Flavor | None = None,
                 rewrite: Callable[[str], str] | None = None, stop: Callable[[HypervisorDriver, str], Any] = power_off,
                 before_start: Callable[[HypervisorDriver], None] | None = None) -> None:
        self.args, self.settings, self.ledger, self.instance = args, settings, ledger, dict(instance)
        self.target, self.hooks = target, hooks
        self.new_flavor, self.rewrite, self.stop, self.before_start = new_flavor, rewrite, stop, before_start
        self.step = Progress().of(instance["name"], instance["host"])
        self.xml: str | None = None
        self.definition: str | None = None  # what the destination defines; None: the source's, carried
        self.template: DomainTemplate | None = None
        self.source_assignment: dict[str, Any] | None = None
        self.exact: Any = None
        self.disks: list[str] = []
        self.volumes: list[str] = []
        # The data volumes attached to it (berth.fleet.volume): in its definition on both sides,
        # copied with its disks (volumes of the pool), their ledger rows following it (finish_move).
        self.attached: list[dict[str, Any]] = []
        # Those of a shared pool: their files on the source, and their pools' directories on the
        # destination (the same storage, maybe mounted elsewhere).
        self.shared_paths: list[str] = []
        self.dst_pools: dict[str, str] = {}

    def plan(self, src: HypervisorDriver, dst: HypervisorDriver, xml: str | None = None) -> None:
        """Read the domain once (or take ``xml``, the caller's read) and find what moves with it;
        refuses, before anything is claimed, what the move cannot carry.

        The destination gets what Berth would define there: the instance's definition rendered
        again from its build record (``definition``), never the source's. Unless the operator
        opts in (``carry_definition``), a source domain with anything Berth did not put there
        (a device, QEMU arguments) is refused naming it: the hypervisor it runs on is not
        trusted to say what the destination defines."""
        instance, args, pool = self.instance, self.args, self.settings.storage_pool
        uuid = instance["uuid"]
        # What its claim holds here of CPUs, cells, pages and devices (Berth's definition of it
        # here has them), and what the move's claim will fit on the destination.
        self.source_assignment = next((claim["assignment"] for claim in self.ledger.claims(uuid)
                                       if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]), None)
        self.exact = of_spec(move_request(instance, self.new_flavor or instance_flavor(instance), self.settings)[0])
        if args.get("carry_definition") and (self.source_assignment or self.exact):
            raise InputError("carry_definition", f"{instance['name']} holds or asks for pinned CPUs, NUMA cells, "
                                                 f"huge pages or devices: they are fitted anew on {self.target['host']}, "
                                                 f"which the source's definition cannot carry")
        self.xml = xml or src.domain_xml(uuid, inactive=True)
        if self.xml is None:
            raise HypervisorError(src.host, f"domain {uuid} of {instance['name']} is not there, "
                                            f"though the ledger says so")
        self.attached = self.ledger.volumes(instance_uuid=uuid)
        # Its volumes on shared pools: the same files on both sides, re-attached, never copied.
        src_pools = shared_pool_paths(src, self.attached)
        self.dst_pools = shared_pool_paths(dst, self.attached)
        self.shared_paths = [os.path.join(src_pools[volume["pool"]], data_volume_name(volume["name"]))
                             for volume in self.attached if volume["shared"]]
        if not args.get("carry_definition"):
            template = self.template = DomainTemplate(args.get("template") or DEFAULT_TEMPLATE)
            offered = list(self.target.get("domain_types") or [])
            expected = recorded_definition(instance, template, src.pool_path(pool), offered,
                                           self.settings.serial_log_dir, assignment=self.source_assignment,
                                           volumes=self.attached, pool_paths=src_pools)
            foreign = foreign_parts(self.xml, expected)
            if src.domain_state(uuid) not in OFF_STATES:
                # What it runs with now, which a live migration carries: a device attached while
                # it runs is in this definition only.
                foreign += [part for part in foreign_parts(src.domain_xml(uuid) or "<domain/>", expected, running=True)
                            if part not in foreign]
            if foreign:
                raise InputError("carry_definition", (
                    f"{instance['name']}'s domain on {src.host} has what Berth did not define there: "
                    f"{'; '.join(foreign)}. A move defines on {self.target['host']} what Berth would define, so "
                    f"this would be lost; set carry_definition=true for this move to carry the source's "
                    f"definition as it is (only if you trust {src.host})"))
            # The destination's own shared CPUs: an ordinary guest floats over them there.
            self.definition = recorded_definition(instance, template, dst.pool_path(pool), offered,
                                                  self.settings.serial_log_dir, flavor=self.new_flavor,
                                                  shared_cpus=self.target.get("cpu_shared_set"),
                                                  volumes=self.attached, pool_paths=self.dst_pools)
        self.disks, self.volumes = _transfer.movable_volumes(src, dst, instance, pool, self.xml, self.shared_paths)

    def run(self, src: HypervisorDriver, dst: HypervisorDriver, address: str | None = None) -> dict[str, Any]:
        """Claim, move, finish (after ``plan``). Returns how it moved, the instance as the ledger
        has it after, and ``warnings``."""
        instance, target, pool, step = self.instance, self.target, self.settings.storage_pool, self.step
        name, uuid = instance["name"], instance["uuid"]
        try:
            claim = self.ledger.claim_move(uuid, target["hypervisor_uuid"], run_owner(), self.settings.lease_seconds,
                                           flavor=self.new_flavor, exact=self.exact)
        except ClaimConflict as conflict:
            purpose = f"to resize {name}" if self.new_flavor else f"for {name}"
            raise BerthError(f"cannot claim {target['host']} {purpose}: {conflict.reason}") from conflict
        if self.definition is not None and (claim["assignment"] or self.source_assignment):
            try:
                # The destination's own CPUs, cells, pages and devices, as its claim took them.
                self.definition = recorded_definition(
                    instance, self.template, dst.pool_path(pool), list(target.get("domain_types") or []),
                    self.settings.serial_log_dir, flavor=self.new_flavor, assignment=claim["assignment"],
                    shared_cpus=target.get("cpu_shared_set"), volumes=self.attached, pool_paths=self.dst_pools)
            except Exception:
                self.ledger.release_claim(claim["id"])
                raise
        step(f"claimed {target['host']} ({target['why']})" if self.new_flavor is None
             else f"claimed {target['host']} for {self.new_flavor.name}")
        try:
            if self.new_flavor is None:
                moved = _transfer.move(src, dst, uuid, name, self.args["mode"], pool, address, self.disks, self.volumes,
                                       step, self.hooks, definition=self.definition,
                                       live_refused=target.get("live_refused"), shared_paths=self.shared_paths)
            else:
                running = src.domain_state(uuid) not in OFF_STATES
                _transfer.ensure_base_images(src, dst, pool, self.volumes, step)
                moved = _transfer.cold_move(src, dst, uuid, pool, self.volumes, running, step, stop=self.stop,
                                            rewrite=self.rewrite, before_start=self.before_start, hooks=self.hooks,
                                            definition=self.definition)
        except Exception as exc:
            # The domain runs on the source again: the destination's claim goes back.
            self.ledger.release_claim(claim["id"])
            if self.new_flavor is None:
                step(f"FAILED, stays here: {exc}")
                raise
            step(f"FAILED: {exc}; stays here with {instance['flavor']}")
            raise BerthError(f"resize of {name} onto {dst.host} failed, it stays on {src.host} with "
                             f"{instance['flavor']}: {exc}") from exc
        # The source is released only now that the domain runs on the destination.
        moved_instance, warnings = _transfer.finish(self.ledger, instance, claim["id"], moved, pool, self.volumes,
                                                    self.new_flavor)
        step(f"moved to {target['host']} ({moved['mode']})" if self.new_flavor is None
             else f"moved to {dst.host} with {self.new_flavor.name}")
        return {**moved, "instance": moved_instance, "warnings": warnings}
