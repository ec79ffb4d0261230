"""Evacuation: the instances of a hypervisor that is down and fenced, rebuilt on other hosts
(Nova's evacuate). What berth.fleet.evacuate does; ``Evacuation.run`` takes the instances in the
order to rebuild them, so that a run that restarts several hosts' instances by priority can call
it with its own order. Private to the collection.

For each instance: a destination, chosen by the scheduler from the request the instance
recorded at launch, with the dead host ignored (move.destination, the one move search); its
claim there, which also decides which run evacuates it (Ledger.claim_evacuation); its domain
rendered anew from its recorded request; its disks kept where its pool is one the operator says
every host shares (``berth_shared_pools``), else made anew from its image (its root disk's data
is lost, as with Nova's evacuate without shared storage); then the ledger follows it there, and
what it left on the dead host is recorded for the sync that reaches that host again to remove.
An instance no host can take stays on the dead host in the ledger, ERROR, with the reason."""

from __future__ import annotations

import subprocess
from typing import Any, Callable, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.rules import stale
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import instance_volume_names, root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import move_request
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import remove_instance
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import BEFORE_CLAIM, NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    DOMAIN,
    ERROR,
    PAUSED,
    STOPPED,
    VOLUME,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.evacuations import TakenByAnother
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    Build,
    recorded_definition,
    shared_pool_paths,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.fence import ensure_fenced
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.volume import disk_bus, reattach
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The instances an evacuation rebuilds: those placed on the host, and those an earlier
# evacuation could not place (ERROR, still there).
EVACUABLE_STATES = (ACTIVE, STOPPED, PAUSED, ERROR)
# How many times an instance is decided again when another run took the room its claim wanted.
CLAIM_RETRIES = 3
# What became of each instance (results[].outcome).
EVACUATED, WOULD_EVACUATE, FAILED, TAKEN = "evacuated", "would evacuate", "error", "evacuated by another run"


def is_down(hypervisor: Mapping[str, Any], service_down_time_s: int) -> bool:
    """Whether ``hypervisor`` (a row of Ledger.hypervisors) counts as down: the scheduler's rule,
    its last sync older than ``service_down_time_s`` (one never synced is not down: nothing ran
    there)."""
    return hypervisor["sync_age_s"] is not None and bool(stale(hypervisor["sync_age_s"], service_down_time_s))


def down_hypervisor(ledger: Ledger, host: str, service_down_time_s: int) -> dict[str, Any]:
    """The ledger's row of ``host`` (Ledger.hypervisors'), which must be down: its last sync older
    than ``service_down_time_s`` (Nova's service_down_time: what the scheduler counts as down).
    InputError for a host the ledger does not know; BerthError, saying when it would count as
    down, for one that is not down."""
    every = ledger.hypervisors()
    row = next((row for row in every if row["host"] == host), None)
    if row is None:
        known = ", ".join(sorted(row["host"] for row in every)) or "none"
        raise InputError("host", f"no hypervisor {host!r} in {ledger.label} (known: {known})")
    age_s = row["sync_age_s"]
    if not is_down(row, service_down_time_s):
        status = f"its sync status is {row['sync_status']}" + (f" ({row['down_reason']})" if row["down_reason"] else "")
        synced = "it was never synced" if age_s is None else f"its last sync was {age_s:.0f} s ago at {row['synced_at']}"
        raise BerthError(f"{host} is not down: {synced} and {status}; a host counts as down once its last sync is older than service_down_time "
                         f"({service_down_time_s} s). Only a down host is evacuated: a host that may still run "
                         f"its instances would run them twice")
    return row


class Evacuation:
    """Rebuild instances of the down, fenced hypervisors ``sources`` (rows of Ledger.hypervisors,
    each checked by down_hypervisor and ensure_fenced) on other hosts, with the operator's
    ``settings``; ``connect`` opens the destinations (libvirt's by default), each call within
    ``timeout_s``; ``template`` is the domain template's path. ``run(instances)`` takes them in
    the order given, whichever of the sources each is on: a run that restarts several hosts'
    instances by priority gives them in that order."""

    def __init__(self, settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 sources: Sequence[Mapping[str, Any]], check_mode: bool, hooks: Hooks = NO_HOOKS,
                 connect: Connect = Hypervisor, timeout_s: float = 120, template: str | None = None) -> None:
        self.settings, self.ledger, self.task_vars = settings, ledger, task_vars
        self.sources = {source["uuid"]: source for source in sources}
        self.check_mode, self.hooks, self.connect, self.timeout_s = check_mode, hooks, connect, timeout_s
        self.shared = settings.storage_pool in settings.shared_pools
        # One build, its domain template compiled once for every instance (compiling it again
        # per instance was half an evacuation's time: benchmarks/results/evacuate.md).
        self.build = Build(settings, ledger, template or DEFAULT_TEMPLATE, check_mode=False, diff=False,
                           hooks=hooks, timeout_s=timeout_s, connect=connect)
        self.progress = Progress()

    def disks(self, instance: Mapping[str, Any], source: Mapping[str, Any]) -> str:
        """What becomes of the instance's disks, said before anything is done."""
        if self.shared:
            return f"kept: pool {self.settings.storage_pool} is shared (berth_shared_pools)"
        image = f"from image {instance['image']}" if instance["image"] else "empty (it was launched without an image)"
        return (f"made anew {image}: the data of its root disk on {source['host']} is lost (pool "
                f"{self.settings.storage_pool} is not in berth_shared_pools)")

    def run(self, instances: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Each of ``instances`` (ledger rows of the sources' instances), in this order: its
        result ({name, uuid, from_host, to_host, outcome, why, disks}). NotFenced where a source
        answered a sync meanwhile: the instances evacuated so far stay where they went."""
        return [self._one(instance) for instance in instances]

    def _one(self, instance: Mapping[str, Any]) -> dict[str, Any]:
        name, uuid = instance["name"], instance["uuid"]
        source = self.sources.get(instance["hypervisor_uuid"])
        if source is None:
            return {"name": name, "uuid": uuid, "from_host": None, "to_host": instance["host"], "disks": None,
                    "outcome": TAKEN, "why": f"it is on {instance['host']}, not a host being evacuated"}
        result: dict[str, Any] = {"name": name, "uuid": uuid, "from_host": source["host"], "to_host": None,
                                  "disks": self.disks(instance, source)}
        step = self.progress.of(name, source["host"])
        try:
            request = rebuildable_request(instance)
        except InputError as exc:
            return self._failed(result, instance, str(exc))
        for attempt in range(CLAIM_RETRIES):
            try:
                target = destination({}, self.settings, self.task_vars, self.ledger, instance)
            except BerthError as exc:
                # The one move search words its refusal as a migration's.
                why = str(exc).removeprefix(f"cannot migrate {name}: ")
                return self._failed(result, instance, f"no host can take it: {why}")
            result.update(to_host=target["host"], why=target["why"])
            if target["warnings"]:
                result["warnings"] = list(target["warnings"])
            if self.check_mode:
                return {**result, "outcome": WOULD_EVACUATE}
            self.hooks.reached(BEFORE_CLAIM, host=target["host"], instance=uuid)
            exact = of_spec(move_request(instance, instance_flavor(instance), self.settings)[0])
            try:
                claim = self.ledger.claim_evacuation(uuid, source["uuid"], target["hypervisor_uuid"], run_owner(),
                                                     self.settings.lease_seconds, exact)
                break
            except TakenByAnother as taken:
                return {**result, "outcome": TAKEN, "why": taken.reason}
            except ClaimConflict as conflict:
                if attempt + 1 == CLAIM_RETRIES:
                    return self._failed(result, instance, f"cannot claim {target['host']}: {conflict.reason}")
                step(f"{target['host']} was taken meanwhile ({conflict.reason}): deciding again")
        step(f"claimed {target['host']}; its disks are {result['disks']}")
        try:
            built = self._rebuild(instance, request, target, claim)
        except Exception as exc:  # reported per instance; the others go on
            self.ledger.release_claim(claim["id"])
            reason = str(exc) if isinstance(exc, HypervisorError) else f"{target['host']}: {exc}"
            return self._failed(result, instance, f"rebuild failed: {reason}")
        if self.shared:
            left = [{"kind": DOMAIN, "pool": None, "name": name}]
        else:
            left = [{"kind": DOMAIN, "pool": None, "name": name}] + [
                {"kind": VOLUME, "pool": self.settings.storage_pool, "name": volume}
                for volume in instance_volume_names(uuid)]
        result["instance"] = self.ledger.finish_evacuation(uuid, claim["id"], left, built, run_owner())
        step(f"evacuated to {target['host']}, running")
        return {**result, "outcome": EVACUATED}

    def _failed(self, result: dict[str, Any], instance: Mapping[str, Any], reason: str) -> dict[str, Any]:
        """No host could take it: ERROR with ``reason``, left on the old host (in check mode, said only)."""
        if not self.check_mode:
            result["instance"] = self.ledger.evacuation_failed(instance["uuid"], f"evacuation: {reason}")
        self.progress.step(instance["name"], result["from_host"], f"FAILED, stays here: {reason}")
        return {**result, "outcome": FAILED, "why": reason}

    def _rebuild(self, instance: Mapping[str, Any], request: Request, target: Mapping[str, Any],
                 claim: Mapping[str, Any]) -> dict[str, Any] | None:
        """The instance made on ``target``: from the shared pool's disks, or anew from its image.
        Returns its new build record, or None where the recorded one still holds."""
        name, uuid, pool = instance["name"], instance["uuid"], self.settings.storage_pool
        # Its data volumes on shared pools are there too: attached to it again (those of a local
        # pool stayed on the failed host with their files: Ledger.finish_evacuation).
        attached = [volume for volume in self.ledger.volumes(instance_uuid=uuid) if volume["shared"]]
        policy = UriPolicy.from_settings(self.settings.uri_policy)
        if not self.shared:
            made = self.build.rebuild(request, target, name, uuid, claim["assignment"])
            if attached:
                with self.connect(target["host"], target["uri"], self.timeout_s, uri_policy=policy) as dst:
                    try:
                        reattach(dst, uuid, attached, disk_bus(instance))
                    except Exception:
                        # Nothing half done: the claim goes back (the caller), and the domain with it.
                        remove_instance(dst, uuid, pool)
                        raise
            return made["built"]
        with self.connect(target["host"], target["uri"], self.timeout_s, uri_policy=policy) as dst:
            if dst.volume(pool, root_volume_name(uuid)) is None:
                raise HypervisorError(target["host"], f"{name}'s root disk {root_volume_name(uuid)} is not in pool "
                                                      f"{pool} there, though berth_shared_pools says it is shared")
            found = dst.find_domain(uuid)
            if found is not None and found["state"] == "running":
                return None
            definition = recorded_definition(instance, self.build.template, dst.pool_path(pool),
                                             list(target.get("domain_types") or []), self.settings.serial_log_dir,
                                             assignment=claim["assignment"], shared_cpus=target.get("cpu_shared_set"),
                                             volumes=attached, pool_paths=shared_pool_paths(dst, attached))
            dst.define(definition)
            dst.start(uuid, request.autostart)
        return None


def rebuildable_request(instance: Mapping[str, Any]) -> Request:
    """The request the instance was launched with, read back into its type; InputError for one
    without (adopted, or launched before Berth kept them): Berth cannot make it anew."""
    if not instance.get("request"):
        raise InputError("request", f"{instance['name']} has no recorded request (adopted, or launched before Berth "
                                    f"kept them): Berth cannot make it anew elsewhere")
    request, _built = Request.from_record(instance["request"])
    return request


class Evacuate:
    """berth.fleet.evacuate (``args``: its validated options; ``settings``: the operator's):
    refused unless the ledger has ``args["host"]`` down and it is fenced (operations/fence.py);
    then every instance the ledger places there, by name, through ``Evacuation``. In check mode,
    the plan: where each would go and what becomes of its disks, nothing claimed, run or
    recorded. ``run_fence`` runs the fence command (subprocess.run)."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS, connect: Connect = Hypervisor,
                 run_fence: Callable[..., Any] = subprocess.run) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.connect, self.run_fence = check_mode, hooks, connect, run_fence

    def run(self) -> dict[str, Any]:
        args, settings, ledger = self.args, self.settings, self.ledger
        host = args["host"]
        source = down_hypervisor(ledger, host, settings.service_down_time)
        fencing = ensure_fenced(ledger, source, settings, bool(args.get("fenced")), args.get("fenced_by"),
                                self.check_mode, self.run_fence)
        placed = ledger.instances_on([source["uuid"]], EVACUABLE_STATES)
        evacuation = Evacuation(settings, ledger, self.task_vars, [source], self.check_mode, self.hooks, self.connect,
                                args["timeout"], args.get("template"))
        results = evacuation.run(placed)
        lines = [result_line(result) for result in results]
        failed = [result for result in results if result["outcome"] == FAILED]
        outcome: dict[str, Any] = {
            "changed": any(result["outcome"] in (EVACUATED, WOULD_EVACUATE) for result in results)
            or (fencing["fenced"] is not None and not self.check_mode and bool(args.get("fenced"))),
            "host": host, "fencing": fencing, "results": results, "report": lines,
            "msg": f"{host}: {fencing['how']}; " + ("; ".join(lines) if lines else "no instance to evacuate")}
        warnings = [warning for result in results for warning in result.get("warnings", [])]
        if warnings:
            outcome["warnings"] = warnings
        if failed and self.check_mode:
            # The plan says it; the evacuation still takes the others.
            outcome.setdefault("warnings", []).append(
                f"{len(failed)} of {len(results)} instance(s) of {host} would not be evacuated (ERROR, left on {host})")
        elif failed:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} instance(s) of {host} could not be "
                                            f"evacuated (ERROR, left on {host}): " + "; ".join(lines))
        return outcome


def result_line(result: Mapping[str, Any]) -> str:
    """One instance's outcome, as the report lists it."""
    name, outcome = result["name"], result["outcome"]
    if outcome in (EVACUATED, WOULD_EVACUATE):
        return f"{name}: {outcome} to {result['to_host']} ({result['why']}); disks {result['disks']}"
    if outcome == TAKEN:
        return f"{name}: {outcome} ({result['why']})"
    return f"{name}: ERROR, stays on {result['from_host']}: {result['why']}"
