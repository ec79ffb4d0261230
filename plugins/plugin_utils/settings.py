"""Who sets what: the operator's settings and a launch requester's options, two lists in one
place (docs/docsite/rst/settings.rst shows them as a table, and a test holds the two together).

The operator runs the fleet: the ledger, which hypervisors may be reached and how, which files of
the controller may become images, how the scheduler decides, what a guest may be given of its
host. Those settings come from the variables ``berth_<name>`` (the inventory, group vars, a job
template's variables) or from a task's own arguments (the playbook's author), never from a play
variable of the bare name: a launch's extra variables and an AWX survey's answers are the
requester's, and a requester never sets an operator setting.

A requester asks for instances: their name and number, flavor, image, networks, keys, zone,
group, hints, metadata, user data and guest hardware. Those options come from the task, or with
``from_vars`` from the play variable of their name (``-e flavor=m1.small``), else from
``berth_<name>``, the operator's fleet-wide default.

The rest of a module's options are the task's own (TASK_OPTIONS): what one task acts on (a host,
a state, a path), the answers of an earlier task it is given (placements, image properties), how
long its calls may take. A task sets them itself; no variable does.

``Settings`` is the operator's side as the operations read it: built once from a task's
validated arguments, every value with the default its modules document.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from ansible_collections.berth.fleet.plugins.module_utils._guest import GUEST_OPTION_NAMES
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    WEIGHER_MULTIPLIER_OPTIONS,
)

# Each operator setting, with what it decides (the documentation's table says the same).
OPERATOR_SETTINGS: dict[str, str] = {
    "ledger_url": "the ledger's database, with its credentials (never printed)",
    "ledger": "whether a task uses the ledger at all",
    "uri_policy": "which libvirt URIs may be opened, and which hosts receive credentials",
    "source": "where host states come from: the ledger's last sync, or the inventory's live facts",
    "hypervisor_group": "the inventory group of the hypervisors, for source=inventory",
    "service_down_time": "how old a hypervisor's last sync may be before it counts as down",
    "lease_seconds": "how long a building instance's claim holds",
    "max_attempts": "how many hosts a build is tried on (Nova's [scheduler] max_attempts)",
    "storage_pool": "the hypervisors' storage pool for instance volumes",
    "serial_log_dir": "where on a hypervisor the serial console logs are written",
    "flavors_file": "the flavors a launch may name",
    "key_pairs": "the SSH public keys a launch may name by key_name",
    "boot": "a direct kernel boot's kernel, initrd and command line (berth_boot_kernel, "
            "berth_boot_initrd, berth_boot_cmdline): files of the hypervisor",
    "project_id": "the project a launch's instances belong to (AggregateMultiTenancyIsolation)",
    "image_source_dirs": "the controller's directories an image may be uploaded from",
    "image_cache_dir": "where the controller keeps images downloaded by URL",
    "image_max_mb": "the largest image a launch uploads or downloads",
    "image_timeout": "how long an image download may take",
    "image_validate_certs": "whether an image download checks the server's TLS certificate",
    "image_url_policy": "which schemes, hosts and networks an image may be downloaded from",
    "pci_alias": "the host PCI devices a guest may be given (Nova's [pci] alias)",
    "enabled_mdev_types": "the mediated device types a guest may be given (Nova's [devices] enabled_mdev_types)",
    "force_hosts": "hosts a launch is forced onto, the filters skipped (an administrator's choice in Nova)",
    "force_nodes": "nodes a launch is forced onto, the filters skipped",
    "enabled_filters": "the scheduler's filters (Nova's [filter_scheduler] enabled_filters)",
    "weighers": "the scheduler's weighers (Nova's weight_classes)",
    "host_subset_size": "how many of the best hosts one is picked from at random",
    "seed": "the seed of that random pick",
    "driver": "the scheduler driver: filter_scheduler or chance",
    "engine": "the engine's implementation: plain, vectorized or auto",
    "explain": "how much of the decision is explained",
    "default_availability_zone": "the zone of hosts in no zone",
    "max_instances_per_host": "NumInstancesFilter's limit",
    "max_io_ops_per_host": "IoOpsFilter's limit",
    "isolated_hosts": "IsolatedHostsFilter's hosts",
    "isolated_images": "IsolatedHostsFilter's images",
    "restrict_isolated_hosts_to_isolated_images": "IsolatedHostsFilter's rule",
    "metrics_weight_setting": "MetricsWeigher's metrics and ratios",
    "metrics_weight_of_unavailable": "MetricsWeigher's weight of a missing metric",
    "metrics_required": "whether a missing metric fails the request",
    "image_props_weight_setting": "ImagePropertiesWeigher's properties and ratios",
    "aggregate_image_properties_isolation_namespace": "AggregateImagePropertiesIsolation's namespace",
    "aggregate_image_properties_isolation_separator": "AggregateImagePropertiesIsolation's separator",
    "migrate_max_retries": "how many destinations a live migration's CPU check tries",
    "skip_cpu_compare_on_dest": "whether a live migration skips its CPU check",
    "transfer_timeout": "how long a move's volume copy may take",
    "keep_leftovers": "whether a sync keeps what dead builds left (volumes, domains) for inspection",
    "cpu_baseline_groups": "the aggregates whose members' guests may get a CPU every member can run (cpu_mode group-baseline)",
    "fence_command": "the command (an argv list, run on the controller) whose success fences a down hypervisor",
    "fence_timeout": "how long the fence command may take",
    "shared_pools": "the storage pools every hypervisor shares: an evacuation keeps their disks, no move copies their volumes",
    "decisions_max_age_days": "how long the ledger keeps scheduling decisions",
    "decisions_max_count": "how many scheduling decisions the ledger keeps at most",
    "failover_hosts": "how many failed hypervisors' HA instances the fleet keeps room to restart (N+k), for the fleet or per aggregate",
    "failover_enforce": "whether a launch that would break that headroom is refused or warned",
    "snapshot_consistency": ("what a snapshot does to a running guest whose agent cannot freeze it: pause it, or refuse "
                             "until it is stopped"),
    "rebalance_threshold": "the imbalance figure at or under which the rebalancer moves nothing",
    "rebalance_min_gain": "how much a rebalancing move must lower the imbalance figure to be proposed",
    "rebalance_max_moves": "how many moves one rebalance run makes at most",
    "rebalance_cooldown_seconds": "how long after it moved an instance is left where it is by the rebalancer",
    "placement": "how a launch of many instances is placed: greedy (Nova's order) or packing (a solver)",
    "packing_time_limit": "how long the packing solver may search, in seconds",
    "packing_objective": "what packing minimises: hosts in use or stranded memory",
}
# Each weigher's multiplier is an operator setting too (Nova's *_weight_multiplier options).
WEIGHT_MULTIPLIERS = tuple(WEIGHER_MULTIPLIER_OPTIONS.values())
OPERATOR_SETTINGS.update({name: "a weigher's multiplier" for name in WEIGHT_MULTIPLIERS})

# Each requester option, with what it asks for.
REQUESTER_OPTIONS: dict[str, str] = {
    "name": "the instances' name",
    "count": "how many instances are wanted under that name",
    "flavor": "the flavor, by name from the operator's flavors, or a dict of sizes",
    "image": "the image: a volume of the pool, or one to upload from the operator's directories or download",
    "networks": "the guest's interfaces, on the hypervisors' networks and bridges",
    "key_name": "an SSH key of the operator's key pairs, by name",
    "ssh_authorized_keys": "SSH public keys for the guest",
    "availability_zone": "the availability zone",
    "server_group": "the server group the instances join",
    "scheduler_hints": "Nova's scheduler hints",
    "labels": "short names the operator's host rules select instances by",
    "ignore_hosts": "hosts the instances must not go to",
    "metadata": "key/value pairs kept in the domains' metadata",
    "user_data": "cloud-init user data",
    "domain_type": "kvm or qemu",
    "autostart": "whether the domains start with their libvirtd",
    "ha": "whether the instances are restarted on another host when theirs fails",
    "ha_priority": "their place in that restart order, highest first",
    "volumes": "data volumes made and attached with each instance",
    "entries": "a deployment's entries, each a name, flavor, count and server group, placed together",
}
REQUESTER_OPTIONS.update({name: "the guest's hardware" for name in GUEST_OPTION_NAMES})


# Each option that is neither: the task's own, with what it is.
TASK_OPTIONS: dict[str, str] = {
    "from_vars": "whether the task takes its other options from the play's variables",
    "state": "what the task makes of its object",
    "host": "the hypervisor the task acts on",
    "uri": "that hypervisor's libvirt URI",
    "uuid": "the instance the task acts on, by uuid",
    "domain": "the libvirt domain the task adopts",
    "placements": "the schedule's placements the task builds",
    "targets": "the hosts the task may build on, with their URIs",
    "domain_types": "the domain types the chosen host offers",
    "hosts": "host states given by hand, or the hypervisors a sync reads",
    "image_volume": "the image volume the hosts must hold, from the checked request",
    "image_id": "the image's id, from the checked request",
    "image_properties": "the image's properties, from the checked request",
    "requested_networks": "the networks the hosts must define, from the checked request",
    "retry_hosts": "the hosts a retried build already failed on",
    "to_host": "the host a migration goes to",
    "goal": "what a rebalance plans for: spread, pack or drain",
    "size_gb": "the size of a data volume the task creates",
    "pool": "the pool a data volume is made in: the storage pool or one of the shared pools",
    "fenced": "the operator's word, now, that the down hypervisor is fenced",
    "fenced_by": "who the fencing is recorded as done by",
    "mode": "how an instance moves: live, cold or auto",
    "carry_definition": "whether a move carries the source's domain definition as it is",
    "template": "the domain template the task renders",
    "timeout": "how long each libvirt call of the task may take",
    "shutdown_timeout": "how long a guest has to shut down",
    "reason": "why a hypervisor is disabled",
    "policy": "the policy of a new server group",
    "kind": "what a host rule asks: must, should, must_not or should_not",
    "aggregate": "the host aggregate a host rule is about",
    "instance_name": "the name pattern a host rule selects instances by",
    "instance_group": "the server group a host rule selects instances by",
    "instance_label": "the label a host rule selects instances by",
    "weight": "how much a soft host rule counts",
    "max_server_per_host": "how many members of a new server group a host may hold",
    "what": "what a ledger query lists",
    "instance": "the instance whose decisions a query lists",
    "limit": "how many rows a query lists",
    "lines": "how many lines of a serial log are shown",
    "path": "where a report page is written",
    "decisions": "how many decisions a report explains",
    "workers": "how many hypervisors a sync reads at once",
    "batch_size": "how many hypervisors a sync writes per transaction",
    "mark_missing": "whether a sync marks the hypervisors no inventory lists",
    "cpu_allocation_ratio": "a hypervisor's own ratio, as its inventory source gives it",
    "ram_allocation_ratio": "a hypervisor's own ratio, as its inventory source gives it",
    "disk_allocation_ratio": "a hypervisor's own ratio, as its inventory source gives it",
    "reserved_host_memory_mb": "a hypervisor's reserved memory, as its inventory source gives it",
    "reserved_host_disk_mb": "a hypervisor's reserved disk, as its inventory source gives it",
    "aggregates": "a hypervisor's aggregates, as its inventory source gives it",
}


def operator_variables(setting: str) -> str:
    """The variables an operator setting is read from."""
    if setting == "boot":
        return "berth_boot_kernel, berth_boot_initrd and berth_boot_cmdline (or berth_boot)"
    return f"berth_{setting}"


def variable_warning(variable: str, setting: str) -> str:
    """What a run says of a play variable named as an operator setting, which it ignores."""
    return (f"the play variable {variable} is ignored: {setting} is an operator setting, taken only from "
            f"{operator_variables(setting)} (the inventory, group vars or a job template), never from a "
            f"launch's extra variables or survey answers")


@dataclass(frozen=True)
class Settings:
    """The operator's settings of one task, as the operations read them: built from the task's
    validated arguments (``from_args``), each one a module does not take at its default here, the
    default every module documents for it (a test compares them)."""

    ledger_url: str | None = None
    ledger: bool = True
    # The policy, resolved and checked by the action (action_base.operator_uri_policy), as settings.
    uri_policy: Mapping[str, Any] | None = None
    source: str = "ledger"
    hypervisor_group: str = "hypervisors"
    service_down_time: int = 600
    lease_seconds: int = 3600
    max_attempts: int = 3
    storage_pool: str = "default"
    serial_log_dir: str = "/var/log/libvirt/qemu"
    flavors_file: str | None = None
    key_pairs: Mapping[str, Any] = field(default_factory=dict)
    boot: Mapping[str, Any] = field(default_factory=dict)
    project_id: str = DEFAULT_PROJECT_ID
    image_source_dirs: tuple[str, ...] = ()
    image_cache_dir: str = "~/.cache/berth/images"
    image_max_mb: int = 8192
    image_timeout: float = 60
    image_validate_certs: bool = True
    # Checked where an image is downloaded (_image_url_policy.ImageUrlPolicy.from_settings).
    image_url_policy: Mapping[str, Any] | None = None
    pci_alias: tuple[Any, ...] = ()
    enabled_mdev_types: tuple[str, ...] = ()
    force_hosts: tuple[str, ...] = ()
    force_nodes: tuple[str, ...] = ()
    # The scheduler's settings the task gave (enabled_filters, weighers, their multipliers...), by
    # Nova's option names, as the engine's RequestSpec takes them; not given, the engine's defaults.
    scheduler: Mapping[str, Any] = field(default_factory=dict)
    migrate_max_retries: int = -1
    skip_cpu_compare_on_dest: bool = False
    transfer_timeout: float = 3600
    # Fencing and evacuation (operations/fence.py, operations/evacuate.py).
    fence_command: tuple[str, ...] = ()
    fence_timeout: float = 60
    shared_pools: tuple[str, ...] = ()
    # The fleet's k, or {aggregate: k} (_headroom.py).
    failover_hosts: Union[int, Mapping[str, int]] = 0
    failover_enforce: str = "refuse"
    # A snapshot of a running guest without a guest agent (operations/snapshot.py).
    snapshot_consistency: str = "pause"
    # The rebalancer's anti-churn controls (_rebalance_plan.Controls).
    rebalance_threshold: float = 0.1
    rebalance_min_gain: float = 0.005
    rebalance_max_moves: int = 10
    rebalance_cooldown_seconds: int = 3600
    # Batch placement (module_utils/scheduler/packing.py).
    placement: str = "greedy"
    packing_time_limit: float = 10.0
    packing_objective: str = "hosts"

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Settings:
        """The settings among a task's validated ``args`` (those it set, or its module defaults)."""
        fields = {item.name for item in dataclasses.fields(cls)} - {"scheduler"}
        given = {name: args[name] for name in fields if args.get(name) is not None}
        for name in ("image_source_dirs", "pci_alias", "enabled_mdev_types", "force_hosts", "force_nodes",
                     "fence_command", "shared_pools"):
            if name in given:
                given[name] = tuple(given[name])
        scheduler = {name: args[name] for name in SCHEDULER_SETTINGS if args.get(name) is not None}
        return cls(**given, scheduler=scheduler)

    def request_options(self) -> dict[str, Any]:
        """What the engine's RequestSpec takes of these settings: the scheduler's, the staleness
        age, the forced hosts and the device configuration, by Nova's names."""
        options: dict[str, Any] = {
            key: value for key, value in self.scheduler.items() if key not in WEIGHT_MULTIPLIERS}
        multipliers = {key: value for key, value in self.scheduler.items() if key in WEIGHT_MULTIPLIERS}
        if multipliers:
            options["weight_multipliers"] = multipliers
        options.update(service_down_time=self.service_down_time, max_attempts=self.max_attempts,
                       force_hosts=list(self.force_hosts), force_nodes=list(self.force_nodes),
                       pci_alias=list(self.pci_alias), enabled_mdev_types=list(self.enabled_mdev_types))
        return options


# The settings that are the engine's own options (RequestSpec's), passed to it as they are.
SCHEDULER_SETTINGS = (
    "enabled_filters", "weighers", "host_subset_size", "seed", "driver", "engine", "explain",
    "default_availability_zone", "max_instances_per_host", "max_io_ops_per_host", "isolated_hosts",
    "isolated_images", "restrict_isolated_hosts_to_isolated_images", "metrics_weight_setting",
    "metrics_weight_of_unavailable", "metrics_required", "image_props_weight_setting",
    "aggregate_image_properties_isolation_namespace", "aggregate_image_properties_isolation_separator",
    *WEIGHT_MULTIPLIERS,
)
