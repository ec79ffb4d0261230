"""The engine's request (Nova's RequestSpec) of a placement: a launch's typed request with the
operator's settings of the run, the server group as the ledger holds it, and the request a move
schedules with. Private to the collection."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    Image,
    Network,
    RecordError,
    Request,
    ha_option,
    ha_priority_option,
    labels_option,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule, rules_for
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

_NOT_GIVEN: Any = object()


def spec_options(request: Request, settings: Settings, count: int = 1, group: ServerGroup | None = None,
                 image_volume: str | None = _NOT_GIVEN, **run: Any) -> dict[str, Any]:
    """The engine's request options (RequestSpec's, by Nova's names) for ``count`` instances of
    ``request``: its flavor, image, networks, zone, hints and project, the server group as it is
    now (``group``; a group the request describes in full otherwise), the operator's ``settings``
    of this run, and the run's own options (``run``: ignore_hosts, retry_hosts, image_id).
    ``image_volume``: the volume the hosts must hold (a move carries its disks and needs none), by
    default the request's."""
    if group is None and isinstance(request.server_group, Mapping):
        group = server_group_from_dict(dict(request.server_group))
    return {
        "flavor": request.flavor, "count": count, "availability_zone": request.availability_zone,
        "image_properties": dict(request.image_properties), "scheduler_hints": dict(request.scheduler_hints),
        "project_id": request.project_id, "requested_networks": request.requested_networks,
        "image_volume": request.image_volume if image_volume is _NOT_GIVEN else image_volume,
        "volume_disk_mb": request.volume_disk_mb, "server_group": group, **settings.request_options(),
        **{key: value for key, value in run.items() if value is not None}}


def request_spec(request: Request, settings: Settings, count: int = 1, group: ServerGroup | None = None,
                 image_volume: str | None = _NOT_GIVEN, **run: Any) -> RequestSpec:
    """The engine's request of spec_options."""
    return RequestSpec(**spec_options(request, settings, count, group, image_volume, **run))


def decision_request(options: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """What a decision record keeps of the engine's request (spec_options), to replay and explain
    it: its options in plain data, with the names it placed."""
    recorded = {key: value for key, value in options.items() if value is not None}
    recorded["flavor"] = options["flavor"].to_dict()
    if options.get("server_group") is not None:
        recorded["server_group"] = options["server_group"].to_dict()
    if options.get("host_rules"):
        recorded["host_rules"] = [rule.to_dict() for rule in options["host_rules"]]
    return {**recorded, "names": list(names)}


def refuse_idle_hints(spec: RequestSpec) -> None:
    """A launch's scheduler hints must each be read by an enabled filter (RequestSpec.idle_hints),
    checked before the fleet is read, anything decided or claimed. Nova ignores such a hint silently;
    here a requester who asked for different_host (an AWX survey field, say) would get an
    instance beside the one to avoid and a decision that says "none removed"."""
    idle = spec.idle_hints()
    if idle:
        raise InputError(idle[0].field, "; ".join(
            f"{item}: " + ("give it or drop the hint" if item.filter is None
                           else "add it (berth_enabled_filters) or drop the hint")
            for item in idle))


def scheduling_request(args: Mapping[str, Any], flavor: Flavor, settings: Settings) -> Request:
    """The request of a task that schedules without building (berth.fleet.schedule,
    berth.fleet.capacity): its flavor, the image by its volume and properties, the networks by
    name, the zone, group and hints, checked as a launch's are."""
    properties = limits.check_mapping_size("image_properties", args.get("image_properties") or {})
    volume = args.get("image_volume")
    image = Image.from_option({"name": volume, "properties": properties}) if volume else (
        Image(None, properties=dict(properties)) if properties else None)
    return Request(
        flavor=flavor, image=image,
        networks=Network.from_option([{"type": "network", "name": name} for name in args.get("requested_networks") or []]),
        availability_zone=limits.check_name("availability_zone", args.get("availability_zone")),
        server_group=server_group_value(args.get("server_group")),
        scheduler_hints=limits.check_mapping_size("scheduler_hints", args.get("scheduler_hints") or {}),
        labels=labels_option(args.get("labels")),
        project_id=limits.check_name("project_id", settings.project_id) or DEFAULT_PROJECT_ID,
        ha=ha_option(args.get("ha") or False), ha_priority=ha_priority_option(args.get("ha_priority") or 0))


def server_group_value(value: Any) -> Any:
    """The ``server_group`` option: a ledger group's name (read by the caller), or a group in
    its dict form ({name, policy, rules, hosts, members}) for "what if" runs, checked."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        server_group_from_dict(dict(value))
        return dict(value)
    raise InputError("server_group", f"server_group must be a ledger group name or a mapping {{name, policy, rules, hosts, members}}, "
                                     f"got {type(value).__name__}")


def ledger_group(server_group: Any, ledger: Any) -> dict[str, Any] | None:
    """A server group given by name lives in the ledger: its engine form, checked to exist."""
    if server_group is None or isinstance(server_group, Mapping):
        return None
    if not isinstance(server_group, str) or not server_group:
        raise InputError("server_group", f"server_group must be a group name or a dict, got {server_group!r}")
    if ledger is None:
        raise InputError("server_group", "a server_group given by name needs the ledger (ledger=true); "
                                         "without it pass the group as a dict")
    group = ledger.scheduler_group(server_group)
    if group is None:
        raise InputError("server_group", f"no server group named {server_group!r} in {ledger.label}: create it "
                                         f"with berth.fleet.server_group first")
    return group


def request_rules(rules: Sequence[HostRule], names: Sequence[str], request: Request,
                  group: Mapping[str, Any] | None = None) -> list[HostRule]:
    """The host rules (``rules``: the ledger's) that select the instances ``names`` of
    ``request``: by their names, their labels, and their server group (``group``, the ledger's,
    else the one the request names)."""
    if group is not None:
        group_name = group.get("name")
    elif isinstance(request.server_group, Mapping):
        group_name = request.server_group.get("name")
    else:
        group_name = request.server_group
    return rules_for(rules, names, group_name, request.labels)


def recorded_request(instance: Mapping[str, Any]) -> tuple[Request | None, str | None]:
    """The request ``instance`` (a ledger row) recorded at its launch, or None with why not: it
    has none (adopted, or launched before Berth recorded them) or one this Berth cannot read."""
    if not instance.get("request"):
        return None, "it has no recorded launch request (launched before Berth recorded them, or adopted)"
    try:
        return Request.from_record(instance["request"])[0], None
    except (RecordError, InputError) as exc:
        return None, str(exc)


def carried_volumes_mb(volumes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What each instance's move carries of ``volumes`` (the ledger's rows): {instance uuid: MB of
    its attached volumes of a local pool}. A shared pool's stay where they are."""
    carried: dict[str, int] = {}
    for volume in volumes:
        if volume["instance_uuid"] is not None and not volume["shared"]:
            carried[volume["instance_uuid"]] = carried.get(volume["instance_uuid"], 0) + 1024 * volume["size_gb"]
    return carried


def move_request(instance: Mapping[str, Any], flavor: Flavor, settings: Settings, ignore_hosts: Sequence[str] = (),
                 current_group: Mapping[str, Any] | None = None, rules: Sequence[HostRule] = (),
                 volume_disk_mb: int = 0) -> tuple[RequestSpec, str | None]:
    """The engine's request of a move (migrate, drain, resize) of one instance, for ``flavor``
    (its own, or the new one of a resize): the request the instance recorded at its launch, with
    ``ignore_hosts`` (the source), the moving run's ``settings`` (its filters, weighers, staleness
    age, devices: the operator's now, never the launch's), no image volume (a move carries its
    disks), and its server group as it is now (``current_group``: the ledger's group with the
    moving instance left out, so that the scheduler sees what the claim will check), and the
    host ``rules`` (the ledger's) that select it by its name, recorded labels and group, which
    the claim re-checks too. ``volume_disk_mb``: the attached volumes the move carries (a local
    pool's), which DiskFilter asks the destination for beside the flavor's disks, as the move's
    claim checks them.

    An instance whose request is not known moves with its flavor, project and image properties
    only; the second value says why (None when the request was read)."""
    request, why_not = recorded_request(instance)
    if request is None:
        properties = dict(instance.get("image_properties") or {})
        request = Request(flavor=flavor, image=Image(None, properties=properties) if properties else None,
                          project_id=instance.get("project_id") or DEFAULT_PROJECT_ID)
    elif request.flavor != flavor:
        request = request.resized(flavor)
    group = server_group_from_dict(dict(current_group)) if current_group is not None else None
    selected = request_rules(rules, [instance["name"]], request, current_group) if rules else []
    return request_spec(request, settings, 1, group, image_volume=None, ignore_hosts=list(ignore_hosts),
                        host_rules=selected, volume_disk_mb=volume_disk_mb), why_not
