"""The scheduling options of a placement task turned into the engine's request: Nova's request
options and weight multipliers, the server group, the operator's device options; what an
instance records of its launch's request, and the request a move schedules with. Private to the
collection."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)

# Nova's option names, passed to the engine's RequestSpec as they are.
REQUEST_OPTIONS = (
    "enabled_filters", "weighers", "host_subset_size", "seed", "max_attempts", "ignore_hosts",
    "force_hosts", "force_nodes", "driver", "availability_zone", "default_availability_zone",
    "image_id", "image_properties", "scheduler_hints", "retry_hosts", "max_instances_per_host",
    "max_io_ops_per_host", "isolated_hosts", "isolated_images",
    "restrict_isolated_hosts_to_isolated_images", "metrics_weight_setting",
    "metrics_weight_of_unavailable", "explain", "engine", "service_down_time", "image_volume",
    "requested_networks", "project_id", "metrics_required", "image_props_weight_setting",
    "aggregate_image_properties_isolation_namespace",
    "aggregate_image_properties_isolation_separator", "pci_alias", "enabled_mdev_types",
)
# The operator's device configuration (doc fragment berth.fleet.devices): it decides which host
# devices a guest may get, so it comes from each run's own settings, never from a requester's
# variables or the ledger's copy of a launch's request.
DEVICE_OPTIONS = ("pci_alias", "enabled_mdev_types")
MULTIPLIER_OPTIONS = tuple(sorted(weigher.multiplier_option for weigher in WEIGHERS.values()))


def request_options(args: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's request options from the module's arguments (Nova's names on both sides)."""
    # What the ledger keeps of the request (each decision records it; each instance its project).
    for key in ("scheduler_hints", "image_properties"):
        limits.check_mapping_size(key, args.get(key))
    for key in ("project_id", "availability_zone"):
        limits.check_name(key, args.get(key))
    options = {key: args[key] for key in REQUEST_OPTIONS if args.get(key) is not None}
    multipliers = {key: args[key] for key in MULTIPLIER_OPTIONS if args.get(key) is not None}
    if multipliers:
        options["weight_multipliers"] = multipliers
    group = server_group_option(args.get("server_group"))
    if group is not None:
        options["server_group"] = group
    return options


def server_group_option(value: Any) -> ServerGroup | None:
    """The `server_group` option in its dict form ({name, policy, rules, hosts, members}),
    for "what if" runs and explicit use; a name is the ledger's group (read by the caller)."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, dict):
        return server_group_from_dict(value)
    raise InputError("server_group", f"server_group must be a ledger group name or a mapping {{name, policy, rules, hosts, members}}, "
                                     f"got {type(value).__name__}")


def ledger_group(server_group: Any, ledger: Any) -> dict[str, Any] | None:
    """A server group given by name lives in the ledger: its engine form, checked to exist."""
    if server_group is None or isinstance(server_group, dict):
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


# Of a launch's request options, those that describe the run rather than the instance, which
# the instance does not record: the hosts it forced or avoided (Nova resets them for every move,
# and a move avoids its source), how the answer is computed and worded, the staleness age (each
# run brings its own) and the image volume (a move carries its disks, it needs no image there).
NOT_RECORDED = ("force_hosts", "force_nodes", "ignore_hosts", "retry_hosts", "explain", "engine",
                "service_down_time", "image_volume", *DEVICE_OPTIONS)


def launch_request(args: Mapping[str, Any], spec_args: Mapping[str, Any], flavor: Flavor) -> dict[str, Any]:
    """What an instance records of the request it was launched with (the ledger's
    instances.request), as Nova keeps the boot's RequestSpec: its flavor (with extra specs), the
    request options of the launch (``spec_args``, from request_options) less NOT_RECORDED, and
    its server group as the launch named it (a ledger group by name: its members are the
    ledger's; a group given as a dict, as given)."""
    recorded = {key: value for key, value in spec_args.items() if key not in NOT_RECORDED and key != "server_group"}
    recorded["flavor"] = flavor.to_dict()
    if args.get("server_group") is not None:
        recorded["server_group"] = args["server_group"]
    return recorded


def device_options(args: Mapping[str, Any]) -> dict[str, Any]:
    """The run's own DEVICE_OPTIONS, those the task sets."""
    return {key: args[key] for key in DEVICE_OPTIONS if args.get(key) is not None}


def move_request(instance: Mapping[str, Any], flavor: Flavor, service_down_time_s: int,
                 ignore_hosts: Sequence[str] = (), current_group: Mapping[str, Any] | None = None,
                 devices: Mapping[str, Any] | None = None) -> RequestSpec:
    """The request of a move (migrate, drain, resize) of one instance, for ``flavor`` (its own, or
    the new one of a resize): the request the instance recorded at launch (launch_request),
    with ``ignore_hosts`` (the source) and this run's staleness age, and its server group as
    it is now (``current_group``: the ledger's group with the moving instance left out, so that
    the scheduler sees what the claim will check). An instance without a recorded request
    (launched before Berth recorded them, or adopted) moves with its project and image
    properties only. ``devices``: the moving run's DEVICE_OPTIONS (device_options), which a
    recorded request never supplies."""
    recorded = dict(instance.get("request") or {})
    group: ServerGroup | None = None
    if current_group is not None:
        group = server_group_from_dict(current_group)
    elif isinstance(recorded.get("server_group"), dict):
        group = server_group_from_dict(recorded["server_group"])
    if not recorded:
        recorded = {"project_id": instance.get("project_id") or DEFAULT_PROJECT_ID,
                    "image_properties": dict(instance.get("image_properties") or {})}
    # Not request options: the flavor and group (above) and the build record (what the domain was defined from).
    options = {key: value for key, value in recorded.items()
               if key not in ("flavor", "server_group", "build", *DEVICE_OPTIONS)}
    options.update(devices or {})
    return RequestSpec(flavor=flavor, count=1, ignore_hosts=list(ignore_hosts), service_down_time=service_down_time_s,
                       server_group=group, **options)
