"""The tracker sync (Nova's ResourceTracker update) of many hypervisors from one controller.

``Sync`` reads the hypervisors of one validated ``SyncRequest`` on a bounded pool of threads and
writes them into the ledger as they come, a batch per transaction (the ledger's tracker step is
a few set-based statements per batch, not a query per hypervisor). A hypervisor that does not
answer within its deadline is marked down with the reason; its thread is given up and another
takes its place, so it delays nobody else. Then it removes what dead builds left on the
hypervisors (the ledger says which) and words the drift report.

Ports: the ledger, ``connect`` (module_utils/hypervisor_driver.Connect: how a hypervisor is
opened, libvirt's Hypervisor by default; ``open_hypervisor`` gives it a target's settings), the
clock the deadlines and the sync's duration are counted on (``MonotonicClock`` by default), and
hooks (none are called yet).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import failure_reason
from ansible_collections.berth.fleet.plugins.module_utils import cpu_baseline
from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import MODEL_DOMAIN_TYPES
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import down_state, outcome_state
from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import fetch_over
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY, UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import remove_recorded
from ansible_collections.berth.fleet.plugins.plugin_utils._rebalance_plan import imbalance
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

# What became of each group of leftovers (report.leftovers[].outcome).
REMOVED, WOULD_REMOVE, KEPT, RUNNING, FAILED = "removed", "would remove", "kept", "running", "failed"
# A hypervisor's whole reading (connection and every call, each under its own timeout) is given
# up after this many times its timeout, as the inventory plugin's fetch does.
READ_DEADLINE_TIMEOUTS = 2
# gather warns once its duration reaches this share of service_down_time: the interval between
# syncs plus a sync's duration must stay below service_down_time, or hosts turn stale in between.
FRESHNESS_WARNING_SHARE = 0.5
# The report's lists that name a hypervisor (``host``) per entry, merged batch after batch.
_REPORT_LISTS = ("hypervisors", "down", "missing_instances", "found_again", "released_claims",
                 "kept_expired_claims", "finished_builds", "finished_evacuations", "leftovers", "orphan_volumes",
                 "unrecorded_volumes", "power_states", "unfenced", "identity_conflicts")


@dataclass(frozen=True)
class Target:
    """One hypervisor to sync, as the berth.fleet.hypervisors inventory source lists it."""

    host: str
    uri: str
    storage_pool: str
    timeout_s: float
    settings: Mapping[str, Any]
    aggregates: tuple[Mapping[str, Any], ...]
    availability_zone: str
    keepalive: Mapping[str, Any]
    # The live facts the inventory plugin gathered (gather_facts: true), used as they are.
    host_state: Mapping[str, Any] | None = None
    # The operator's (module_utils/uri_policy.py): checked when the URI is opened and recorded.
    uri_policy: UriPolicy = DEFAULT_POLICY

    @classmethod
    def from_hostvars(cls, host: str, variables: Mapping[str, Any], uri_policy: UriPolicy = DEFAULT_POLICY) -> Target:
        uri = variables.get("berth_libvirt_uri")
        hypervisor = variables.get("berth_hypervisor")
        if not uri or not isinstance(hypervisor, Mapping):
            raise InputError("hosts", f"host {host} has no berth_libvirt_uri and berth_hypervisor: "
                                      f"it does not come from a berth.fleet.hypervisors inventory source")
        return cls(host=host, uri=str(uri), storage_pool=hypervisor["storage_pool"],
                   timeout_s=float(hypervisor["timeout"]), settings=hypervisor["settings"],
                   aggregates=tuple(hypervisor["aggregates"]), availability_zone=hypervisor["availability_zone"],
                   keepalive={"keepalive_interval": hypervisor["keepalive_interval"],
                              "keepalive_count": hypervisor["keepalive_count"]},
                   host_state=variables.get("berth_host_state") or None, uri_policy=uri_policy)

    @property
    def deadline_s(self) -> float:
        return READ_DEADLINE_TIMEOUTS * self.timeout_s


class MonotonicClock:
    """The clock a sync counts its deadlines and its duration on: ``now()`` in seconds, and
    ``wait(condition, timeout_s)``, a wait on the reader's condition (held) for at most
    ``timeout_s`` of this clock's seconds (None: until notified). Unit tests give a sync a clock
    they move by hand, so that a deadline passes when they say and not when a loaded machine does."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, condition: threading.Condition, timeout_s: float | None) -> None:
        condition.wait(timeout_s)


MONOTONIC_CLOCK = MonotonicClock()


def open_hypervisor(target: Target, bounded_by_caller: bool, connect: Connect = Hypervisor) -> HypervisorDriver:
    """A connection to ``target`` (not opened yet: ``with``) with its timeout, keepalive and URI
    policy. ``bounded_by_caller``: the caller gives the whole session up after the target's
    deadline, so no call needs a timeout (and a thread) of its own."""
    return connect(target.host, target.uri, target.timeout_s,
                   keepalive_interval_s=target.keepalive["keepalive_interval"],
                   keepalive_count=target.keepalive["keepalive_count"], bounded_by_caller=bounded_by_caller,
                   uri_policy=target.uri_policy)


@dataclass(frozen=True)
class SyncRequest:
    """What one sync does: the hypervisors, how many are read at once, how many are written per
    transaction, and what to do with dead builds' leftovers."""

    targets: tuple[Target, ...]
    workers: int = limits.HYPERVISORS_AT_ONCE
    batch_size: int = 500
    keep_leftovers: bool = False
    service_down_time_s: int = 600
    dry_run: bool = False
    # The operator's; a URI it refuses is never recorded (the targets carry it for their connections).
    uri_policy: UriPolicy = DEFAULT_POLICY
    # The operator's CPU baseline groups (aggregate names, module_utils/cpu_baseline.py).
    cpu_baseline_groups: tuple[str, ...] = ()
    names: tuple[str, ...] = field(init=False, default=())
    # {host: its CPU baseline group} of the targets in one.
    baseline_group_of: Mapping[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("workers", "batch_size", "service_down_time_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                option = "service_down_time" if name == "service_down_time_s" else name
                raise InputError(option, f"{option} must be a whole number of at least 1, got {value!r}")
        names = tuple(target.host for target in self.targets)
        if len(set(names)) != len(names):
            raise InputError("hosts", "a hypervisor is listed twice: "
                                      + ", ".join(sorted({name for name in names if names.count(name) > 1})))
        object.__setattr__(self, "names", names)
        groups = cpu_baseline.baseline_groups(list(self.cpu_baseline_groups))
        object.__setattr__(self, "cpu_baseline_groups", tuple(groups))
        object.__setattr__(self, "baseline_group_of", {
            target.host: group for target in self.targets
            for group in [cpu_baseline.host_group(target.host, target.aggregates, groups)] if group})


class Sync:
    """The tracker sync of one request (see the module's docstring); ``run()`` returns the result."""

    def __init__(self, request: SyncRequest, ledger: Ledger, connect: Connect = Hypervisor,
                 hooks: Any = None, clock: MonotonicClock = MONOTONIC_CLOCK) -> None:
        self.request = request
        self.ledger = ledger
        self.connect = connect
        self.hooks = hooks  # the lead wires hooks into every operation; the sync calls none yet
        self.clock = clock
        self._recorded_baselines: dict[str, Mapping[str, Any]] = {}

    def run(self) -> dict[str, Any]:
        """Sync every target. Returns {changed, report, drift, findings, summary, warnings}:
        ``findings`` is each host's lines (its ledger view, then each finding about it), ``drift``
        the play's summary (counts, then the lines of every host that is not in step)."""
        started = self.clock.now()
        report: dict[str, Any] = {name: [] for name in _REPORT_LISTS}
        findings: dict[str, list[str]] = {}
        changed = False
        self._recorded_baselines = self._group_baselines()
        synced: dict[str, Mapping[str, Any]] = {}
        reader = _BoundedReader(self._read, self.request.workers, self.clock)
        for states in reader.batches(self.request.targets, self.request.batch_size):
            synced.update((state["host"], state) for state in states)
            batch = self.ledger.tracker_sync(states, dry_run=self.request.dry_run, uri_policy=self.request.uri_policy)
            changed = batch.pop("changed") or changed
            changed = self._reclaim(batch) or changed
            for name in _REPORT_LISTS:
                report[name] += batch.get(name, [])
            uuids = [state["uuid"] for state in states if state.get("uuid")]
            rows = {row["uuid"]: row for row in self.ledger.hypervisors(uuids)} if uuids else {}
            for host, line in host_lines(states, batch, rows):
                findings.setdefault(host, []).append(line)
        baseline_lines: list[str] = []
        for group in self.request.cpu_baseline_groups:
            group_lines, refusals, written = self._cpu_baseline(group, synced)
            baseline_lines += group_lines
            changed = written or changed
            for host, line in refusals:
                findings.setdefault(host, []).append(line)
        duration_s = self.clock.now() - started
        # In the inventory's order, not the order the hypervisors happened to answer in.
        order = {host: index for index, host in enumerate(self.request.names)}
        findings = dict(sorted(findings.items(), key=lambda item: order.get(item[0], len(order))))
        summary = self._summary(report, findings, duration_s)
        # The first sync of a SQLite ledger made its file: say where, so a path nobody meant
        # (a typo in ledger_url) shows at once.
        created = self.ledger.shown_url if self.ledger.created else None
        figure = fleet_imbalance(self.ledger)
        summary["imbalance"] = figure
        return {"changed": changed, "report": report, "findings": findings, "summary": summary,
                "ledger_created": created,
                "drift": [*([f"created a new ledger: {created}"] if created else []), summary["line"],
                          imbalance_line(figure), *baseline_lines, *not_in_step(findings, self.request.names)],
                "warnings": self._freshness_warnings(duration_s)}

    # ---- reading -------------------------------------------------------------------------------

    def _read(self, target: Target) -> dict[str, Any]:
        """One hypervisor's host state; down with the reason where it did not answer, or where
        what it answered does not read or does not fit the operator's settings (host_fetch's
        fetch_over and host_facts' outcome_state: whatever reading one host raises is that
        host's, and the others sync)."""
        if target.host_state:
            return self._with_baseline({**target.host_state, "uri": target.uri})
        # The reader gives this hypervisor up after its deadline (see _BoundedReader).
        outcome = fetch_over(open_hypervisor(target, True, self.connect), target.storage_pool)
        state = outcome_state(target.host, outcome, target.settings, list(target.aggregates),
                              target.availability_zone)
        return self._with_baseline({**state, "uri": target.uri}) if state["service_up"] else state

    # ---- CPU baseline groups (module_utils/cpu_baseline.py) -------------------------------------

    def _group_baselines(self) -> dict[str, Mapping[str, Any]]:
        """{group: its baseline} as the ledger recorded it on the members of this sync."""
        members = sorted(self.request.baseline_group_of)
        if not members:
            return {}
        try:
            recorded = self.ledger.cpu_baselines(members)
        except LedgerError:
            # A ledger this sync is about to create records nothing yet; any other fault of the
            # ledger shows again at the sync's first write, which reports it.
            return {}
        return {self.request.baseline_group_of[host]: baseline for host, baseline in sorted(recorded.items())
                if baseline.get("group") == self.request.baseline_group_of[host]}

    def _with_baseline(self, state: dict[str, Any]) -> dict[str, Any]:
        """A member's state with its group's recorded baseline on its guest CPU record, so that a
        sync keeps it there (a host no longer in a group loses it with its next state)."""
        baseline = self._recorded_baselines.get(self.request.baseline_group_of.get(state["host"], ""))
        cpu_info = state.get("cpu_info")
        if baseline is None or not isinstance(cpu_info, Mapping) or not isinstance(cpu_info.get("guest"), Mapping):
            return state
        return {**state, "cpu_info": {**cpu_info, "guest": {**cpu_info["guest"], "baseline": dict(baseline)}}}

    def _cpu_baseline(self, group: str, synced: Mapping[str, Mapping[str, Any]]
                      ) -> tuple[list[str], list[tuple[str, str]], bool]:
        """Compute (where needed) and check the baseline of ``group``: (lines for the drift
        report, (host, line) for each member that cannot run it, whether a record changed).

        The recorded baseline is kept while the group's members are those it was computed from:
        guests defined with it stay movable among them. It is computed again when the members
        differ (a host joined or left) and all of them answered, on the first answering member's
        connection (the operator's inventory URI) from every member's recorded host-model CPU.
        Every answering member then compares the baseline with what it can give a guest."""
        members = [target for target in self.request.targets if self.request.baseline_group_of.get(target.host) == group]
        answering = [target for target in members if synced.get(target.host, {}).get("service_up")]
        if not answering:
            return [f"CPU baseline group {group}: no member answered; nothing computed"], [], False
        previous = self._recorded_baselines.get(group)
        names = sorted(target.host for target in members)
        lines: list[str] = []
        baseline = previous
        written: list[str] = []
        if previous is None or (sorted(previous.get("hosts") or []) != names and len(answering) == len(members)):
            try:
                baseline = self._computed_baseline(group, answering, synced)
            except (HypervisorError, InputError) as exc:
                return [f"CPU baseline group {group}: not computed: {exc}"], [], False
            if baseline is None:
                return [f"CPU baseline group {group}: not computed: its members' libvirt gave no host-model CPU for "
                        f"one domain type all of them offer"], [], False
            written = self.ledger.record_cpu_baseline(names, baseline, self.request.dry_run)
            cpus = "; ".join(f"{domain_type}: {cpu_baseline.described(cpu)}"
                             for domain_type, cpu in sorted(baseline["cpus"].items()))
            lines.append(f"CPU baseline group {group}: {'would record' if self.request.dry_run else 'recorded'} "
                         f"{cpus} (computed on {answering[0].host} from {', '.join(baseline['hosts'])}; "
                         f"{len(written)} record(s) changed)")
        return lines, self._baseline_refusals(group, baseline, answering), bool(written) and not self.request.dry_run

    def _computed_baseline(self, group: str, answering: Sequence[Target],
                           synced: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
        """The group's baseline per domain type all answering members offer a host-model CPU
        for, computed by the first member's libvirt; None where there is no such type."""
        arch = cpu_baseline.host_cpu_arch(synced[answering[0].host].get("cpu_info"))
        inputs: dict[str, list[str]] = {}
        for domain_type in MODEL_DOMAIN_TYPES:
            xmls = []
            for target in answering:
                guest = (synced[target.host].get("cpu_info") or {}).get("guest") or {}
                offered = (guest.get("domain_capabilities") or {}).get(domain_type) or {}
                xml = cpu_baseline.host_model_xml(offered.get("host_model") or {}) \
                    if (offered.get("modes") or {}).get("host-model") else None
                xmls.append(xml)
            if all(xmls):
                inputs[domain_type] = [xml for xml in xmls if xml]
        if not inputs:
            return None
        cpus = {}
        with open_hypervisor(answering[0], False, self.connect) as hv:
            for domain_type, xmls in inputs.items():
                cpus[domain_type] = cpu_baseline.parse_baseline(hv.host, hv.baseline_cpu(xmls, domain_type, arch))
        return {"group": group, "hosts": sorted(target.host for target in answering), "arch": arch, "cpus": cpus}

    def _baseline_refusals(self, group: str, baseline: Mapping[str, Any],
                           answering: Sequence[Target]) -> list[tuple[str, str]]:
        """(host, line) for each answering member that cannot run the baseline (or could not be
        asked), its own libvirt's reason given."""
        refusals = []
        arch = str(baseline.get("arch") or "x86_64")
        for target in answering:
            try:
                with open_hypervisor(target, False, self.connect) as hv:
                    for domain_type, cpu in sorted((baseline.get("cpus") or {}).items()):
                        why = hv.compare_cpu(cpu_baseline.baseline_xml(cpu), domain_type, arch)
                        if why is not None:
                            refusals.append((target.host, f"{target.host}: DRIFT cannot run the CPU baseline of "
                                                          f"group {group} ({cpu_baseline.described(cpu)}) as a "
                                                          f"{domain_type} domain: {why}"))
            except (HypervisorError, InputError) as exc:
                refusals.append((target.host, f"{target.host}: CPU baseline of group {group} not compared: {exc}"))
        return refusals

    # ---- the dead builds' leftovers ------------------------------------------------------------

    def _reclaim(self, batch: dict[str, Any]) -> bool:
        """Remove what dead builds left - the ledger said which -, then have the ledger forget what
        is gone. Sets each group's ``outcome`` (and ``removed``, ``error``); returns whether
        anything changed (or would, in check mode).

        A hypervisor is connected to again only when there is something to remove from it, so a
        sync keeps no connection open while it writes. A run that dies in between leaves the
        rows: the next sync removes what is still there and forgets the rest. A guest that runs
        is never stopped here (delete.yml does that)."""
        keep, check = self.request.keep_leftovers, self.request.dry_run
        targets = {target.host: target for target in self.request.targets}
        gone: list[int] = []
        for group in batch["leftovers"]:
            group.update(removed=[], error=None)
            # An evacuated instance runs elsewhere: its old copy goes even if it runs here, and
            # is never kept for inspection (it would run twice).
            evacuated = group.get("evacuated", False)
            if evacuated and check:
                group["outcome"] = WOULD_REMOVE
                continue
            if not evacuated and (keep or check or group["running"]):
                group["outcome"] = RUNNING if group["running"] else KEPT if keep else WOULD_REMOVE
                continue
            target = targets[group["host"]]
            try:
                # On the sync's own thread: each call under the hypervisor's timeout.
                with open_hypervisor(target, False, self.connect) as hv:
                    removed, running = remove_recorded(hv, group["instance_uuid"], group["items"],
                                                       spare_running=not evacuated)
            except Exception as exc:  # that host's answers, asked again here: its failure, never the sync's
                group.update(outcome=FAILED, error=failure_reason(group["host"], exc))
                continue
            group.update(outcome=RUNNING if running else REMOVED, removed=removed)
            if not running:
                gone += [item["id"] for item in group["items"]]
        if gone:
            self.ledger.forget_artefacts(gone)
        return any(group["outcome"] in (REMOVED, WOULD_REMOVE) for group in batch["leftovers"])

    # ---- what the play prints --------------------------------------------------------------------

    def _summary(self, report: Mapping[str, Any], findings: Mapping[str, list[str]],
                 duration_s: float) -> dict[str, Any]:
        synced = len(self.request.targets)
        written = sum(1 for entry in report["hypervisors"] if entry["changed"])
        down = synced - len(report["hypervisors"])
        drifting = sum(1 for lines in findings.values() if not _in_step(lines))
        per_1000_s = duration_s * 1000 / synced if synced else 0.0
        line = (f"synced {synced} hypervisor(s) in {duration_s:.1f} s into {self.ledger.label} "
                f"({per_1000_s:.1f} s per 1,000, "
                f"{self.request.workers} reading at once): {written} changed, "
                f"{len(report['hypervisors']) - written} unchanged, {down} down; "
                f"{synced - drifting} in step, {drifting} with findings (listed below; every host's lines "
                f"are in the result's findings)")
        return {"line": line, "hypervisors": synced, "changed": written, "down": down, "with_findings": drifting,
                "duration_s": round(duration_s, 3), "per_1000_s": round(per_1000_s, 3),
                "workers": self.request.workers, "batch_size": self.request.batch_size}

    def _freshness_warnings(self, duration_s: float) -> list[str]:
        limit_s = self.request.service_down_time_s
        if duration_s < FRESHNESS_WARNING_SHARE * limit_s:
            return []
        return [f"this sync took {duration_s:.0f} s, {duration_s / limit_s:.0%} of service_down_time "
                f"({limit_s} s): a hypervisor counts as down unless the interval between syncs plus their "
                f"duration stays below service_down_time, so sync every {max(limit_s - duration_s, 0):.0f} s "
                f"or less, or slice the fleet (AWX job slicing, --limit), or raise berth_service_down_time"]


class _BoundedReader:
    """Reads targets on at most ``workers`` threads and hands their states over in batches, as
    they come. A target not read within its deadline is reported down at once; its thread is
    left to finish on its own (a libvirt call cannot be cancelled) and a new thread takes its
    place, so one hung hypervisor holds no one else up."""

    def __init__(self, read: Callable[[Target], dict[str, Any]], workers: int, clock: MonotonicClock) -> None:
        self._read = read
        self._workers = workers
        self._clock = clock
        self._changed = threading.Condition()
        self._pending: collections.deque[Target] = collections.deque()
        self._running: dict[str, tuple[float, Target]] = {}  # host: (deadline on the clock, target)
        self._given_up: set[str] = set()
        self._done: list[dict[str, Any]] = []
        self._error: BaseException | None = None

    def batches(self, targets: Sequence[Target], batch_size: int) -> Iterator[list[dict[str, Any]]]:
        self._pending.extend(targets)
        for _worker in range(min(self._workers, len(targets))):
            self._start_worker()
        handed = 0
        try:
            while handed < len(targets):
                with self._changed:
                    while True:
                        if self._error is not None:
                            raise self._error
                        self._give_up_late()
                        if len(self._done) >= min(batch_size, len(targets) - handed):
                            break
                        deadlines = [deadline for deadline, _target in self._running.values()]
                        self._clock.wait(self._changed,
                                         max(0.0, min(deadlines) - self._clock.now()) if deadlines else None)
                    batch, self._done = self._done[:batch_size], self._done[batch_size:]
                handed += len(batch)
                yield batch
        finally:
            with self._changed:
                self._pending.clear()  # a failed write stops the reading too

    def _start_worker(self) -> None:
        threading.Thread(target=self._work, name="berth-sync-reader", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._changed:
                if not self._pending or self._error is not None:
                    return
                target = self._pending.popleft()
                self._running[target.host] = (self._clock.now() + target.deadline_s, target)
            try:
                state = self._read(target)
            except BaseException as exc:  # a bug, not a hypervisor's failure: the run stops with it
                with self._changed:
                    self._error = exc
                    self._changed.notify_all()
                return
            with self._changed:
                if target.host in self._given_up:
                    return  # reported down already; another thread took this one's place
                del self._running[target.host]
                self._done.append(state)
                self._changed.notify_all()

    def _give_up_late(self) -> None:
        now = self._clock.now()
        for host, (deadline, target) in list(self._running.items()):
            if deadline > now:
                continue
            del self._running[host]
            self._given_up.add(host)
            reason = f"{host}: no answer within {target.deadline_s:g} s"
            self._done.append(down_state(host, target.settings, reason, list(target.aggregates),
                                         target.availability_zone, time.time()))
            self._start_worker()


# ---- the drift report ---------------------------------------------------------------------------

def fleet_imbalance(ledger: Ledger) -> float:
    """The ledger's fleet's imbalance figure (_rebalance_plan.imbalance), as the scheduler reads
    the hosts (claims as usage)."""
    table, _generations = ledger.host_table()
    return round(imbalance(table), 4)


def imbalance_line(figure: float) -> str:
    """The drift report's line of the imbalance figure."""
    return (f"imbalance {figure:.4f} (the larger standard deviation across the up and enabled hypervisors of "
            f"their used RAM and vCPU fractions; playbooks/rebalance.yml evens it, "
            f"berth_rebalance_threshold says when)")


def host_lines(states: Sequence[Mapping[str, Any]], report: Mapping[str, Any],
               hypervisors: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(host, line) pairs: one per hypervisor (the ledger's view beside the hypervisor's own),
    then each finding, with the hypervisor it is about."""
    lines = []
    conflicts = {conflict["host"]: conflict["reason"] for conflict in report.get("identity_conflicts", [])}
    for state in states:
        row = hypervisors.get(state.get("uuid") or "")
        if state["host"] in conflicts:
            lines.append((state["host"], f"{state['host']}: IDENTITY CONFLICT: {conflicts[state['host']]}"))
            continue
        if not state.get("service_up") or row is None:
            lines.append((state["host"], f"{state['host']}: did not answer ({state.get('down_reason') or 'no facts'}); "
                                         f"its claims are kept"))
            continue
        usage = row["usage"]
        hv_free_mb = state.get("hv_memory_free_mb")
        flags = []
        if row["disabled"]:
            flags.append(f"disabled: {row['disabled_reason']}")
        if state.get("free_ram_mb") != usage["free_ram_mb"]:
            flags.append(f"hypervisor counts free RAM {state.get('free_ram_mb')} MB")
        if state.get("vcpus_used") != usage["vcpus_used"]:
            flags.append(f"hypervisor counts {state.get('vcpus_used')} vCPUs used")
        if row["unmanaged"]:
            flags.append("orphans: " + ", ".join(u["name"] for u in row["unmanaged"]))
        lines.append((row["host"],
                      f"{row['host']}: generation {row['generation']}, ledger free RAM {usage['free_ram_mb']} MB, "
                      f"{usage['vcpus_used']}/{usage['vcpus_total']} vCPUs used, {usage['num_instances']} instance(s)"
                      + (f", host memory free {hv_free_mb} MB" if hv_free_mb is not None else "")
                      + ("; DRIFT " + "; ".join(flags) if flags else IN_STEP)))
    for entry in report["missing_instances"]:
        lines.append((entry["host"], f"{entry['name']}: {entry['state']} in the ledger but no domain on "
                                     f"{entry['host']} (missing since {entry['missing_since']})"))
    for entry in report.get("unfenced", []):
        lines.append((entry["host"], f"{entry['host']}: answers again: no longer fenced (fenced at "
                                     f"{entry['fenced_at']})"))
    for entry in report["found_again"]:
        lines.append((entry["host"], f"{entry['name']}: found again on {entry['host']}"))
    for entry in report.get("power_states", []):
        lines.append((entry["host"], f"{entry['name']}: {entry['was']} in the ledger but its domain is "
                                     f"{entry['domain_state']} on {entry['host']}: now {entry['now']} (the ledger "
                                     f"follows the domain's power state)"))
    for entry in report["released_claims"]:
        found = f"its domain is {entry['domain_state']}" if entry.get("domain_state") else "no domain"
        instance = entry.get("instance_name") or entry["instance_uuid"]
        lines.append((entry["host"], f"claim {entry['id']} of instance {instance} ({entry['instance_uuid']}) on "
                                     f"{entry['host']} released: lease of {entry['owner']} expired at "
                                     f"{entry['lease_expires_at']}, {found}"))
    down_hosts = {entry["uuid"]: entry["host"] for entry in report.get("down", [])}
    for entry in report["kept_expired_claims"]:
        host = entry["host"] or down_hosts.get(entry["hypervisor_uuid"], entry["hypervisor_uuid"])
        lines.append((host, f"claim {entry['id']} of instance {entry['instance_uuid']} on {host} kept although "
                            f"its lease expired: {entry['why']}"))
    for entry in report.get("finished_builds", []):
        lines.append((entry["host"], f"{entry['instance_name']}: build finished by this sync: its domain is "
                                     f"{entry['domain_state']} on {entry['host']} though {entry['owner']} never said "
                                     f"so before its lease expired at {entry['lease_expires_at']}; ACTIVE"))
    for entry in report.get("finished_evacuations", []):
        lines.append((entry["host"], f"{entry['instance_name']}: evacuation finished by this sync: its domain is "
                                     f"{entry['domain_state']} on {entry['host']} and its old host is fenced, though "
                                     f"{entry['owner']} never said so before its lease expired at "
                                     f"{entry['lease_expires_at']}; ACTIVE there"))
    lines += [(group["host"], _leftover_line(group)) for group in report.get("leftovers", [])]
    for entry in report.get("orphan_volumes", []):
        lines.append((entry["host"], f"{entry['host']}: orphan volume {entry['pool']}/{entry['name']}: named as Berth "
                                     f"names a build's volume, but no instance holds a claim here and this ledger "
                                     f"recorded no build of it; left alone (another ledger's, or older than Berth's "
                                     f"records: virsh vol-delete removes it)"))
    for entry in report.get("unrecorded_volumes", []):
        lines.append((entry["host"], f"{entry['host']}: unrecorded data volume {entry['pool']}/{entry['name']}: named "
                                     f"as berth.fleet.volume names a data volume, but this ledger has no volume of "
                                     f"that name; left alone (another ledger's, or made by hand: volume.yml with its "
                                     f"name and size adopts it, virsh vol-delete removes it)"))
    return lines


IN_STEP = "; in step"


def _in_step(lines: Sequence[str]) -> bool:
    return len(lines) == 1 and lines[0].endswith(IN_STEP)


def not_in_step(findings: Mapping[str, list[str]], order: Sequence[str]) -> list[str]:
    """The lines of every host with something to say, in the inventory's order."""
    return [line for host in order for line in findings.get(host, []) if not _in_step(findings[host])]


def _artefact(item: Mapping[str, Any]) -> str:
    return f"domain {item['name']}" if item["kind"] == "domain" else f"volume {item['pool']}/{item['name']}"


def _leftover_line(group: Mapping[str, Any]) -> str:
    """One line per dead build's leftovers on the hypervisor: what was (or would be) removed, or
    why not, and what became of its instance."""
    where, why = group["host"], group["why"]
    outcome = group.get("outcome", WOULD_REMOVE)
    if group.get("evacuated"):
        return _evacuated_line(group, outcome)
    there = [item for item in group["items"] if item["present"] is not False]
    if outcome == REMOVED:
        if not group["removed"]:
            return (f"{where}: forgot the records of {len(group['items'])} artefact(s) of a build of "
                    f"{group['instance_name']}, already gone ({why})")
        return f"{where}: removed what a dead build left: {', '.join(map(_artefact, group['removed']))} ({why})"
    listed = ", ".join(map(_artefact, there)) or f"nothing left ({len(group['items'])} record(s) to forget)"
    if outcome == WOULD_REMOVE:
        return f"{where}: would remove what a dead build left: {listed} ({why})"
    if outcome == KEPT:
        return (f"{where}: kept for inspection (berth_keep_leftovers): what a dead build left: {listed} ({why}); "
                f"a gather without berth_keep_leftovers removes it, and so does delete.yml with instance "
                f"{group['instance_name']}")
    if outcome == RUNNING:
        return (f"{where}: left alone, its domain runs: what a dead build of {group['instance_name']} left: {listed} "
                f"({why}); delete.yml of {group['instance_name']} removes it")
    return (f"{where}: could not remove what a dead build left: {listed} ({why}): {group['error']}; the next "
            f"sync tries again")


def _evacuated_line(group: Mapping[str, Any], outcome: str) -> str:
    """What became of what an evacuated instance left on the host it was evacuated from."""
    where, why = group["host"], group["why"]
    if outcome == REMOVED:
        removed = ", ".join(map(_artefact, group["removed"])) or "nothing left, its records forgotten"
        return f"{where}: evacuated, removed: {removed} ({why})"
    listed = ", ".join(_artefact(item) for item in group["items"] if item["present"] is not False) or "nothing left"
    if outcome == WOULD_REMOVE:
        return f"{where}: evacuated, would remove: {listed} ({why})"
    return (f"{where}: evacuated, could not remove: {listed} ({why}): {group['error']}; the next sync tries "
            f"again")


# ---- hypervisors no inventory lists ---------------------------------------------------------------

def mark_missing(ledger: Ledger, listed: Sequence[str], service_down_time_s: int,
                 dry_run: bool, decisions_max_age_days: int, decisions_max_count: int) -> dict[str, Any]:
    """The other step of a sync, once per run: the ledger's hypervisors that the inventory does
    not list (``listed``: all its names) and that nothing synced for ``service_down_time_s``
    are marked missing, never retired; and the decisions past their retention are dropped.
    Returns {changed, report, drift, decisions_pruned}."""
    report = ledger.mark_missing(listed, service_down_time_s, dry_run=dry_run)
    pruned = ledger.prune_decisions(decisions_max_age_days, decisions_max_count, dry_run=dry_run)
    lines = [f"{entry['host']}: MISSING: in no inventory and not synced since {entry['last_synced_at']}; its "
             f"claims are kept until an operator retires it (berth.fleet.hypervisor state=retired)"
             for entry in report["missing"]]
    lines += [f"{entry['host']}: not in this inventory, synced elsewhere at {entry['last_synced_at']}; left as it was"
              for entry in report["synced_elsewhere"]]
    return {"changed": report["changed"] or pruned > 0, "report": report, "decisions_pruned": pruned,
            "drift": lines or ["every hypervisor of the ledger is in this inventory"]}
