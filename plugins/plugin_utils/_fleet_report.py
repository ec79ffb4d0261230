"""The fleet report (berth.fleet.fleet_report): what the ledger knows of the fleet, as one
self-contained HTML page.

Two steps. ``page_model`` turns what ``Ledger.fleet_view`` read into what the page shows: each
hypervisor's state (up; down or missing with the reason its sync recorded; stale as Nova's
service_down_time decides; disabled with the operator's reason) and its vCPU, RAM and disk
bars, whose numbers come from the engine's own formulas (scheduler/rules.py), so that the page
shows exactly what the filters compare. ``render`` fills the Jinja2 template of
_fleet_report_page.py with autoescaping on: hypervisor, instance and group names, reasons and
messages come from users and hypervisors and are only ever shown as text.

The page carries no time of its own except its "generated" stamp, kept between two markers, so
that a run can tell whether what the page shows changed (``unstamped``): ages are counted by the
page's script from the absolute times, in the reader's browser.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections import Counter
from typing import Any, Mapping, Sequence

from jinja2 import Environment, StrictUndefined

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_view import decision_view, to_the_second
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet_report_page import (
    BADGE,
    BAR,
    BAR_CAPACITY,
    BAR_RESERVED,
    SCRIPT,
    STYLE,
    TEMPLATE,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import HV_MISSING, HV_UP

# A hypervisor is in one of these states; "disabled" is a flag beside any of them.
STATES = ("up", "stale", "down", "missing")
# Each bar: its label, how many of the resource's own unit (vCPUs, MB) make one shown unit, and that.
RESOURCES = (("vCPU", 1, "vCPUs"), ("RAM", 1024, "GiB"), ("disk", 1024, "GiB"))
# How many hypervisors the summary lists as the most full.
MOST_FULL_SHOWN = 10
# The stamp's place in the page: between two comments that no escaped text can contain.
_STAMP_OPEN, _STAMP_CLOSE = "<!--berth:generated-->", "<!--/berth:generated-->"
_STAMPED = re.compile(re.escape(_STAMP_OPEN) + ".*?" + re.escape(_STAMP_CLOSE), re.DOTALL)


def host_status(hypervisor: Mapping[str, Any], service_down_time: int) -> tuple[str, str | None]:
    """(state, why) of one hypervisor as hypervisor_list gives it; why is None when up."""
    if hypervisor["sync_status"] == HV_MISSING:
        return "missing", hypervisor["status_reason"]
    if hypervisor["sync_status"] != HV_UP:
        return "down", hypervisor["status_reason"]
    age_s = hypervisor["sync_age_s"]
    if rules.stale(float("nan") if age_s is None else age_s, service_down_time):
        return "stale", f"not synced for over {service_down_time} s (service_down_time)"
    return "up", None


def resource_bars(usage: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The host's vCPU, RAM and disk as the resource filters see them (usage: the ledger's
    USAGE_COLUMNS): used counts claims, unmanaged domains and the reserved amount, as Nova's
    Newton filters do; the limit is the capacity times the allocation ratio."""
    vcpus = rules.vcpu_fit(usage["vcpus_total"], usage["vcpus_used"], usage["cpu_allocation_ratio"], 0)
    ram = rules.ram_fit(usage["total_usable_ram_mb"], usage["free_ram_mb"], usage["ram_allocation_ratio"], 0)
    disk = rules.disk_fit(usage["total_usable_disk_gb"], usage["free_disk_mb"], usage["disk_allocation_ratio"], 0)
    return [_bar(resource, fit.total, fit.limit, fit.used, reserved)
            for resource, fit, reserved in ((RESOURCES[0], vcpus, 0),
                                            (RESOURCES[1], ram, usage["reserved_host_memory_mb"]),
                                            (RESOURCES[2], disk, usage["reserved_host_disk_mb"]))]


def _bar(resource: tuple[str, int, str], total: float, limit: float, used: float, reserved: float) -> dict[str, Any]:
    """One bar, in the resource's own unit (vCPUs, MB): the track is the limit; the fill is what
    is used (reserved first, then claims), capped at the track and marked over when used passes
    the limit; a tick marks the capacity where the allocation ratio puts the limit beyond it.

    Its markup is made here rather than in a template macro: a page of 10,000 hypervisors has
    30,000 bars, and a macro call each took most of the rendering."""
    label, per_unit, unit = resource
    track = limit if limit > 0 else max(used, 1.0)
    reserved_share = min(reserved / track, 1.0)
    used_share = min(max(used, 0.0) / track, 1.0)
    drawn = {
        "label": label, "unit": unit, "used": _amount(used, per_unit), "limit": _amount(limit, per_unit),
        "reserved_pct": _pct(reserved_share), "claimed_pct": _pct(used_share - reserved_share),
        "capacity_pct": _pct(total / track) if 0 < total < track else None, "over": used > limit,
        "fullness": used / limit if limit > 0 else (math.inf if used > 0 else 0.0),
        "title": (f"claimed {_amount(used - reserved, per_unit)}, reserved {_amount(reserved, per_unit)}; "
                  f"limit = capacity {_amount(total, per_unit)} × ratio {_amount(limit / total if total else 1.0, 1, 2)}"),
        "raw": (total, limit, used, reserved),
    }
    drawn["html"] = _markup(
        BAR, over=" over" if drawn["over"] else "", title=drawn["title"], label=label, unit=unit, used=drawn["used"],
        limit=drawn["limit"], claimed_pct=drawn["claimed_pct"],
        reserved=_markup(BAR_RESERVED, pct=drawn["reserved_pct"]) if reserved_share > 0 else "",
        capacity=_markup(BAR_CAPACITY, pct=drawn["capacity_pct"]) if drawn["capacity_pct"] else "")
    return drawn


def _markup(template: str, **values: str) -> str:
    """``template`` filled with ``values``, each escaped as the template's autoescaping would,
    at the speed of str.format and html.escape (Jinja2's own markup objects make a Python object
    per value: seconds on a large fleet). The template shows the result with ``| safe``. A
    value made by _markup itself is passed on as it is: it is escaped already."""
    return _Escaped(template.format(**{
        name: value if isinstance(value, _Escaped) else html.escape(str(value)) for name, value in values.items()}))


class _Escaped(str):
    """Text that _markup made: escaped already."""


def _amount(value: float, per_unit: int, digits: int = 1) -> str:
    """An amount in the shown unit, as the engine's messages print numbers: no fraction when
    whole, else to a tenth (a hundredth for ratios)."""
    text = f"{value / per_unit:.{digits}f}"
    whole = text.rstrip("0").rstrip(".")
    return "0" if whole == "-0" else whole


def _pct(share: float) -> str:
    """A CSS percentage, to a hundredth (a hundredth of a pixel on any screen)."""
    return _amount(max(share, 0.0) * 100, 1, 2)


def page_model(view: Mapping[str, Any], service_down_time: int, ledger: str) -> dict[str, Any]:
    """Everything the template shows, from Ledger.fleet_view's answer."""
    instances_by_host: dict[str | None, list[dict[str, Any]]] = {}
    groups_of: dict[str, str] = {}
    for group in view["server_groups"]:
        for member in group["members"]:
            groups_of[member] = group["name"]
    by_uuid = {}
    for instance in view["instances"]:
        by_uuid[instance["uuid"]] = instance
        instances_by_host.setdefault(instance["hypervisor_uuid"], []).append(
            {**instance, "server_group": groups_of.get(instance["uuid"])})

    hosts = []
    states: Counter[str] = Counter()
    disabled = 0
    for number, hypervisor in enumerate(view["hypervisors"]):
        state, why = host_status(hypervisor, service_down_time)
        states[state] += 1
        disabled += bool(hypervisor["disabled"])
        hosted = instances_by_host.get(hypervisor["uuid"], [])
        bars = resource_bars(hypervisor["usage"])
        badges = _markup(BADGE, state=state) + (_markup(BADGE, state="disabled") if hypervisor["disabled"] else "")
        hosts.append({
            "anchor": f"h{number}", "name": hypervisor["host"], "uuid": hypervisor["uuid"], "state": state, "why": why,
            "badges": badges,
            "disabled": bool(hypervisor["disabled"]), "disabled_reason": hypervisor["disabled_reason"],
            "failed_builds": hypervisor["usage"]["failed_builds"],
            "synced_at": to_the_second(hypervisor["synced_at"]), "zone": hypervisor["availability_zone"],
            "aggregates": [aggregate.get("name", "") for aggregate in hypervisor["aggregates"] or []],
            "bars": bars, "fullness": max(drawn["fullness"] for drawn in bars),
            "instances": hosted, "unmanaged": hypervisor["unmanaged"],
            # What the name filter matches: the hypervisor's name and its instances' names.
            "search": " ".join([hypervisor["host"], *(instance["name"] for instance in hosted)]).lower(),
            "filter_states": " ".join([state, *(["disabled"] if hypervisor["disabled"] else [])]),
        })
    most_full = sorted((host for host in hosts if host["fullness"] > 0),
                       key=lambda host: -host["fullness"])[:MOST_FULL_SHOWN]
    return {
        "ledger": ledger, "service_down_time": service_down_time, "hosts": hosts,
        "state_counts": [(state, states[state]) for state in STATES] + [("disabled", disabled)],
        "instance_counts": sorted(Counter(instance["state"] for instance in view["instances"]).items()),
        "instance_total": len(view["instances"]),
        "homeless": instances_by_host.get(None, []),
        "totals": _fleet_totals(hosts), "hosts_up": states["up"],
        "most_full": most_full,
        "server_groups": [_group(group, by_uuid) for group in view["server_groups"]],
        "decisions": [decision_view(decision) for decision in view["decisions"]],
    }


def _fleet_totals(hosts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The fleet's bars: each resource summed over the hypervisors that are up (the numbers of
    a down, missing or stale one are only its last sync's)."""
    up = [host["bars"] for host in hosts if host["state"] == "up"]
    if not up:
        return []
    return [_bar(resource, *(sum(bars[position]["raw"][part] for bars in up) for part in range(4)))
            for position, resource in enumerate(RESOURCES)]


def _group(group: Mapping[str, Any], instances: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    members = [instances[uuid] for uuid in group["members"] if uuid in instances]
    return {"name": group["name"], "policy": group["policy"], "hosts": group["hosts"],
            "max_server_per_host": (group["rules"] or {}).get("max_server_per_host"),
            "members": [{"name": member["name"], "host": member["host"], "state": member["state"]}
                        for member in sorted(members, key=lambda member: member["name"])]}


_compiled: Any = None


def _template() -> Any:
    global _compiled
    if _compiled is None:
        # Autoescape everything: the page shows names and reasons from users and hypervisors.
        environment = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        _compiled = environment.from_string(TEMPLATE)
    return _compiled


def script_hash() -> str:
    """The page's Content-Security-Policy lets this one script run and nothing else, so that
    not even a name that slipped past escaping could run as a script."""
    return base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()


def render(model: Mapping[str, Any]) -> str:
    """The page, unstamped: the same fleet gives the same text."""
    return _template().render(**model, style=STYLE, script=SCRIPT, script_hash=script_hash(),
                              stamp=_STAMP_OPEN + _STAMP_CLOSE)


def stamped(page: str, generated_at: str) -> str:
    """The page with the time it was written in its stamp."""
    return page.replace(_STAMP_OPEN + _STAMP_CLOSE, f"{_STAMP_OPEN}{generated_at}{_STAMP_CLOSE}", 1)


def unstamped(page: str) -> str:
    """A written page as ``render`` made it, to compare with a new rendering."""
    return _STAMPED.sub(_STAMP_OPEN + _STAMP_CLOSE, page, count=1)
