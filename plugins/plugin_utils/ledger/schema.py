"""The ledger's tables (SQLAlchemy Core) and the values their columns take.

A hypervisor row holds everything the default filters and weighers read about one hypervisor,
so that a launch decides from one scan of one narrow table: its capacity (as synced: totals,
reserved amounts, allocation ratios), a summary of its usage (kept equal to its claims plus its
unmanaged usage by ``claims.refresh_usage`` in every transaction that changes either), its
status, zone, aggregates and hypervisor version. The facts only some filters read
(capabilities, metrics, pools) are in ``hypervisor_facts``, one row per hypervisor beside it:
kilobytes of CPU features per row would make every launch's scan several times slower. The
rows behind the usage stay the truth: claims and unmanaged usage.

Core tables, not ORM classes: every ledger call is a few statements on plain rows, and the ORM's
import, mapping and unit of work would cost a launch a tenth of a second for nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, Mapping

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
)

# Instance states, as Nova's vm_state names them.
BUILDING = "BUILDING"
ACTIVE = "ACTIVE"
ERROR = "ERROR"
STOPPED = "STOPPED"
PAUSED = "PAUSED"
# Booted from a rescue image with its own root disk as its second disk (berth.fleet.rescue),
# until it is unrescued; its claim stays. Not a placed state: nothing moves, powers or snapshots
# an instance in rescue, and a sync leaves it alone.
RESCUED = "RESCUED"
# The states of an instance whose domain exists on its hypervisor and holds its claim (without a
# lease): as in Nova, a stopped or paused instance keeps its resources.
PLACED_STATES = (ACTIVE, STOPPED, PAUSED)
# The instance state a domain's libvirt state means (Nova's power states to vm_states). The
# others mean nothing here: nostate and shutdown (being shut down) are on their way elsewhere,
# and a guest's own suspend to RAM (pmsuspended) has no Berth state.
DOMAIN_STATE_INSTANCE_STATES = {
    "running": ACTIVE, "blocked": ACTIVE, "paused": PAUSED, "shutoff": STOPPED, "crashed": STOPPED,
}

# Hypervisor sync status: answered its last sync; in the inventory but did not answer; in no
# inventory and not synced for the staleness age (kept, with its claims, until an operator
# retires it).
HV_UP = "up"
HV_DOWN = "down"
HV_MISSING = "missing"

# How a hypervisor was fenced: the operator said so, or the operator's fence command succeeded.
FENCE_CONFIRMED = "confirmed"
FENCE_COMMAND = "fence_command"

# What a build makes on a hypervisor (artefacts): volumes of the storage pool and the domain.
DOMAIN = "domain"
VOLUME = "volume"

# Server group policies (Nova's names); only the hard ones are enforced by the claim, the soft
# ones are preferences for the weighers.
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

# The host-state fields a sync copies onto the hypervisor row as they are (the host state of docs/docsite/rst/design.rst).
CAPACITY_FIELDS = (
    "vcpus_total", "cpu_allocation_ratio", "total_usable_ram_mb", "reserved_host_memory_mb",
    "ram_allocation_ratio", "total_usable_disk_gb", "reserved_host_disk_mb", "disk_allocation_ratio",
)
# Facts on the hypervisor row (every read) and in hypervisor_facts (read when a filter needs them).
HOT_FACT_FIELDS = ("availability_zone", "aggregates", "hypervisor_version")
COLD_FACT_FIELDS = ("hypervisor_type", "libvirt_version", "supported_instances", "cpu_info", "numa_topology",
                    "pci_devices", "metrics", "storage_pool", "pools", "host_ip")
# The hypervisor's own memory view (/proc/meminfo), kept for drift reports, never scheduled on.
HOST_MEMORY_FIELDS = (
    "hv_memory_total_mb", "hv_memory_free_mb", "hv_memory_buffers_mb", "hv_memory_cached_mb",
    "hv_memory_used_mb", "hv_memory_source",
)


# The facts recorded with a digest beside them, and its column.
DIGEST_COLUMNS = {"numa_topology": "numa_topology_digest", "pci_devices": "pci_devices_digest"}


def fact_digest(value: Any) -> str:
    """A fact's digest: SHA-256 of its JSON with sorted keys, the same for equal values."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


metadata = MetaData()


def _uuid_key(table: str, **options: Any) -> Column:
    """A row's parent hypervisor, dropped with it."""
    return Column("hypervisor_uuid", String(36), ForeignKey(f"{table}.uuid", ondelete="CASCADE"), **options)


# A hypervisor, keyed by its libvirt host UUID, as its last sync recorded it.
hypervisors = Table(
    "hypervisors", metadata,
    Column("uuid", String(36), primary_key=True),
    Column("name", String(255), index=True, nullable=False),
    Column("nodename", String(255), nullable=False),
    # The URI the builds connect with (as the inventory gave it: never a password).
    Column("uri", Text, nullable=True),
    Column("generation", Integer, default=0, nullable=False),
    Column("synced_at", DateTime, nullable=False),
    Column("sync_status", String(16), default=HV_UP, nullable=False),
    Column("down_reason", Text, nullable=True),
    Column("disabled", Boolean, default=False, nullable=False),
    Column("disabled_reason", Text, nullable=True),
    # Why and when an operator gave this host UUID to another name or URI (a sync never does).
    Column("rehomed_reason", Text, nullable=True),
    Column("rehomed_at", DateTime, nullable=True),
    # Capacity, as synced.
    Column("vcpus_total", Integer, default=0, nullable=False),
    Column("cpu_allocation_ratio", Float, default=1.0, nullable=False),
    Column("total_usable_ram_mb", Integer, default=0, nullable=False),
    Column("reserved_host_memory_mb", Integer, default=0, nullable=False),
    Column("ram_allocation_ratio", Float, default=1.0, nullable=False),
    Column("total_usable_disk_gb", Integer, default=0, nullable=False),
    Column("reserved_host_disk_mb", Integer, default=0, nullable=False),
    Column("disk_allocation_ratio", Float, default=1.0, nullable=False),
    # Usage: claims plus unmanaged usage, summed by claims.refresh_usage.
    Column("vcpus_used", Integer, default=0, nullable=False),
    Column("memory_mb_used", Integer, default=0, nullable=False),
    Column("disk_mb_used", Integer, default=0, nullable=False),
    Column("num_instances", Integer, default=0, nullable=False),
    Column("num_io_ops", Integer, default=0, nullable=False),
    # Facts the default filters and weighers read.
    Column("availability_zone", String(255), nullable=True),
    Column("aggregates", JSON, default=list, nullable=False),
    Column("hypervisor_version", Integer, nullable=True),
    # Builds that failed here since the last one that succeeded (Nova's compute manager counts
    # them so), for BuildFailureWeigher.
    Column("failed_builds", Integer, default=0, nullable=False),
    # That the host, down, was fenced (it cannot run its guests any more): when, by whom, and how
    # (FENCE_CONFIRMED or FENCE_COMMAND, with the command's output, bounded). Cleared by the
    # first sync that reaches the host again.
    Column("fenced_at", DateTime, nullable=True),
    Column("fenced_by", String(255), nullable=True),
    Column("fence_method", String(32), nullable=True),
    Column("fence_output", Text, nullable=True),
)

# The facts of a hypervisor's last sync that only some filters read, beside its row.
hypervisor_facts = Table(
    "hypervisor_facts", metadata,
    _uuid_key("hypervisors", primary_key=True),
    Column("hypervisor_type", String(64), nullable=True),
    Column("libvirt_version", Integer, nullable=True),
    Column("supported_instances", JSON, default=list, nullable=False),
    Column("cpu_info", JSON, default=dict, nullable=False),
    # The NUMA cells as the host state gives them, without their pages' free counts: the same
    # text for the same hardware and settings (the scheduler parses each distinct text once).
    Column("numa_topology", JSON, default=dict, nullable=False),
    # Those counts, {cell id: {size_kb: free}} (text keys), as virNodeGetFreePages gave them at
    # the last sync; null where it gave none. Recorded, never scheduled on (docs numa.rst).
    Column("free_pages", JSON(none_as_null=True), nullable=True),
    # libvirt's node devices: PCI devices (physical and virtual functions) and mdev types.
    Column("pci_devices", JSON, default=list, nullable=False),
    # fact_digest of numa_topology and of pci_devices (DIGEST_COLUMNS), null until a sync wrote
    # them: the scheduler reads these per host and each distinct text once.
    Column("numa_topology_digest", String(64), nullable=True),
    Column("pci_devices_digest", String(64), nullable=True),
    Column("metrics", JSON, default=dict, nullable=False),
    Column("storage_pool", String(255), nullable=True),
    Column("pools", JSON, default=list, nullable=False),
    Column("host_memory", JSON, default=dict, nullable=False),
    # The address the hypervisor was reached at (Nova's host_ip), None when unknown.
    Column("host_ip", String(64), nullable=True),
)

# A volume of the hypervisor's instance pool that a launch could name as its image (not one of
# Berth's own instance volumes), as the last sync listed them; ``refused`` says why it may not
# be used (a link, a backing file outside the pool...), None when it may.
hypervisor_images = Table(
    "hypervisor_images", metadata,
    _uuid_key("hypervisors", primary_key=True),
    Column("name", String(255), primary_key=True, index=True),
    Column("refused", Text, nullable=True),
)

# A libvirt network the hypervisor defines, as the last sync listed them.
hypervisor_networks = Table(
    "hypervisor_networks", metadata,
    _uuid_key("hypervisors", primary_key=True),
    Column("name", String(255), primary_key=True, index=True),
)

# A domain on a hypervisor that the ledger does not know (an orphan), counted as usage.
unmanaged_usage = Table(
    "unmanaged_usage", metadata,
    _uuid_key("hypervisors", primary_key=True),
    Column("domain_uuid", String(36), primary_key=True),
    Column("domain_name", String(255), nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("disk_mb", Integer, nullable=False),
    Column("seen_at", DateTime, nullable=False),
    # The host CPUs it is pinned to and the devices it holds (an assignment, docs numa.rst).
    Column("assignment", JSON(none_as_null=True), nullable=True),
)

instances = Table(
    "instances", metadata,
    Column("uuid", String(36), primary_key=True),
    Column("name", String(63), unique=True, nullable=False),
    Column("flavor_name", String(255), nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("root_gb", Integer, nullable=False),
    Column("ephemeral_gb", Integer, nullable=False),
    Column("swap", Integer, nullable=False),
    Column("image", String(255), nullable=True),
    Column("hypervisor_uuid", String(36), ForeignKey("hypervisors.uuid"), nullable=True),
    Column("host", String(255), nullable=True),
    Column("state", String(16), nullable=False),
    Column("failure_reason", Text, nullable=True),
    Column("missing_since", DateTime, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    # The project it was launched for (AggregateMultiTenancyIsolation) and its image's properties,
    # canonical as the engine read them (ImagePropertiesWeigher); NULL reads as none.
    Column("project_id", String(255), nullable=False, default=DEFAULT_PROJECT_ID),
    Column("image_properties", JSON, nullable=True),
    # The request it was launched with (request.Request.to_record), which every move schedules with; NULL for
    # instances from before schema 0006 and adopted ones.
    Column("request", JSON, nullable=True),
    # Restarted on another host when its hypervisor fails, highest ha_priority first; kept here
    # rather than in the request, since berth.fleet.instance_ha changes them after the launch.
    Column("ha", Boolean, nullable=False, default=False, server_default=false()),
    Column("ha_priority", Integer, nullable=False, default=0, server_default="0"),
    # When it last moved to another hypervisor (finish_move): the rebalancer's cooldown per
    # instance; NULL for one that never moved (or moved before schema 0016).
    Column("moved_at", DateTime, nullable=True),
)

# The user_data an instance was launched with, apart from its row: it may carry secrets, so no
# listing that selects the instance's columns returns it; only Ledger.user_data reads it, for an
# evacuation that makes the instance anew from its image (its seed is made again with it, as
# Nova's rebuild and evacuate keep instances.user_data). Gone with its instance.
instance_user_data = Table(
    "instance_user_data", metadata,
    Column("instance_uuid", String(36), ForeignKey("instances.uuid", ondelete="CASCADE"), primary_key=True),
    Column("user_data", Text, nullable=False),
)

# Resources one instance holds on one hypervisor. An instance holds one claim, or two while it
# moves (the destination is claimed before the move, the source released after).
claims = Table(
    "claims", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", String(36), ForeignKey("instances.uuid", ondelete="CASCADE"), index=True,
           nullable=False),
    Column("hypervisor_uuid", String(36), ForeignKey("hypervisors.uuid"), index=True, nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("disk_mb", Integer, nullable=False),
    Column("owner", String(255), nullable=False),
    # Set while the instance is BUILDING (or moving): a sync may release the claim once this has
    # passed and no domain exists. None once the instance runs.
    Column("lease_expires_at", DateTime, nullable=True),
    Column("created_at", DateTime, nullable=False),
    # The exact CPUs, NUMA cells, pages and devices taken (docs numa.rst, "Assignments"); null
    # for an instance that asked for none.
    Column("assignment", JSON(none_as_null=True), nullable=True),
)

# What a build makes on a hypervisor - each volume (root disk, cloud-init seed...) and the
# domain -, recorded before it is made, so that whatever a build that died left behind is known
# and reclaimed: by the tracker sync once the build's lease is over, by delete.yml with its
# instance. A row stays until its artefact is known gone, or until its instance runs ACTIVE
# there (the instance's own volumes are then found by their names, which carry its UUID). No
# foreign key to instances: a relaunch replaces an ERROR instance's row, and what that instance
# left must outlive it; a retired hypervisor takes its rows with it.
artefacts = Table(
    "artefacts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _uuid_key("hypervisors", nullable=False, index=True),
    Column("instance_uuid", String(36), nullable=False, index=True),
    Column("instance_name", String(63), nullable=False, index=True),
    Column("kind", String(16), nullable=False),  # DOMAIN or VOLUME
    Column("pool", String(255), nullable=True),  # a volume's storage pool
    Column("name", String(255), nullable=False),  # the volume's name, the domain's name
    Column("owner", String(255), nullable=False),  # the run that recorded it
    Column("created_at", DateTime, nullable=False),
    # Set for what an evacuated instance left on the host it was evacuated from: the sync that
    # reaches that host removes it even where the domain runs (the instance runs elsewhere).
    Column("evacuated_at", DateTime, nullable=True),
    UniqueConstraint("hypervisor_uuid", "instance_uuid", "kind", "name", name="uq_artefacts_what"),
)

# A data volume (Cinder's): a volume of a storage pool on one hypervisor, made by
# berth.fleet.volume, claimed against that hypervisor's disk by this row alone (refresh_usage
# adds its size to the host's used disk: no claim row of its own), and attached to at most one
# instance (``instance_uuid``, ``target``: its device in the guest's definition). A move of the
# instance moves its attached volumes' rows with it (finish_move). ``shared``: its pool was one of
# the operator's shared pools (berth_shared_pools) when it was made: every hypervisor sees the same
# file, which no move copies, and its size is charged to no hypervisor's disk (its row's
# hypervisor is only where it is attached, or was made). No cascade from the instance:
# an instance is not deleted while a volume is attached to it (delete.yml detaches first).
volumes = Table(
    "volumes", metadata,
    Column("name", String(63), primary_key=True),
    Column("hypervisor_uuid", String(36), ForeignKey("hypervisors.uuid"), index=True, nullable=False),
    Column("pool", String(255), nullable=False),
    Column("size_gb", Integer, nullable=False),
    Column("instance_uuid", String(36), ForeignKey("instances.uuid"), index=True, nullable=True),
    Column("target", String(16), nullable=True),
    Column("owner", String(255), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("shared", Boolean, nullable=False, default=False, server_default=false()),
    # Made with its instance's launch and deleted with it (Nova's block device mapping); false
    # for any other attachment, and reset by a detach.
    Column("delete_on_termination", Boolean, nullable=False, default=False, server_default=false()),
)

server_groups = Table(
    "server_groups", metadata,
    Column("uuid", String(36), primary_key=True),
    Column("name", String(255), unique=True, nullable=False),
    Column("policy", String(32), nullable=False),
    Column("max_server_per_host", Integer, nullable=True),
    Column("created_at", DateTime, nullable=False),
)

server_group_members = Table(
    "server_group_members", metadata,
    Column("group_uuid", String(36), ForeignKey("server_groups.uuid", ondelete="CASCADE"), primary_key=True),
    Column("instance_uuid", String(36), ForeignKey("instances.uuid", ondelete="CASCADE"), primary_key=True,
           index=True),
)

# The operator's host rules (berth.fleet.host_rule; module_utils/scheduler/host_rules.py): what
# selects a rule's instances (a name pattern, a server group, a label: at least one, all must
# match), its kind, the aggregate it is about and, for the soft kinds, its weight. Read by every
# schedule and, the hard ones, by every claim's re-check.
host_rules = Table(
    "host_rules", metadata,
    Column("name", String(255), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("aggregate", String(255), nullable=False),
    Column("weight", Float, nullable=False, default=1.0, server_default="1"),
    Column("instance_name", String(255), nullable=True),
    Column("instance_group", String(255), nullable=True),
    Column("instance_label", String(63), nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

# One scheduling decision with what it was made on, so the engine can replay it.
decisions = Table(
    "decisions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime, nullable=False),
    Column("owner", String(255), nullable=False),
    Column("name", String(63), index=True, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("outcome", String(32), nullable=False),  # claimed, no_valid_host, claim_conflict, refused, planned
    Column("summary", Text, nullable=False),
    Column("request", JSON, nullable=False),
    Column("host_states", JSON, nullable=False),
    Column("decision", JSON, nullable=False),
)


def instance_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """An instance as the ledger's callers see it, from its row (or the values written to it)."""
    return {
        "uuid": row["uuid"], "name": row["name"], "flavor": row["flavor_name"],
        "vcpus": row["vcpus"], "memory_mb": row["memory_mb"], "root_gb": row["root_gb"],
        "ephemeral_gb": row["ephemeral_gb"], "swap": row["swap"], "image": row["image"],
        "hypervisor_uuid": row["hypervisor_uuid"], "host": row["host"], "state": row["state"],
        "failure_reason": row["failure_reason"], "missing_since": iso(row["missing_since"]),
        "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
        "project_id": row["project_id"], "image_properties": row["image_properties"] or {},
        "request": row.get("request"), "ha": bool(row.get("ha")), "ha_priority": row.get("ha_priority") or 0,
        "moved_at": iso(row.get("moved_at")),
    }


def claim_dict(row: Mapping[str, Any], host: str | None = None) -> dict[str, Any]:
    """A claim as the ledger's callers see it, with its hypervisor's name if known."""
    return {
        "id": row["id"], "instance_uuid": row["instance_uuid"], "hypervisor_uuid": row["hypervisor_uuid"],
        "host": host, "vcpus": row["vcpus"], "memory_mb": row["memory_mb"], "disk_mb": row["disk_mb"],
        "owner": row["owner"], "lease_expires_at": iso(row["lease_expires_at"]),
        "created_at": iso(row["created_at"]), "assignment": row.get("assignment"),
    }


def decision_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    placements = (row["decision"] or {}).get("placements", [])
    return {
        "id": row["id"], "created_at": iso(row["created_at"]), "owner": row["owner"], "name": row["name"],
        "ok": row["ok"], "outcome": row["outcome"], "summary": row["summary"],
        "choice": [p.get("host") for p in placements],
        "alternates": [p.get("alternates", []) for p in placements],
        "request": row["request"], "host_states": row["host_states"], "decision": row["decision"],
    }


def fence_record(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A hypervisor row's fencing, as results show it; None where it is not fenced."""
    if row.get("fenced_at") is None:
        return None
    return {"fenced_at": iso(row["fenced_at"]), "fenced_by": row["fenced_by"], "method": row["fence_method"],
            "output": row["fence_output"]}


def artefact_dict(row: Mapping[str, Any], host: str | None = None) -> dict[str, Any]:
    """An artefact row as the ledger's callers see it, with its hypervisor's name if known."""
    return {
        "id": row["id"], "hypervisor_uuid": row["hypervisor_uuid"], "host": host,
        "instance_uuid": row["instance_uuid"], "instance_name": row["instance_name"], "kind": row["kind"],
        "pool": row["pool"], "name": row["name"], "owner": row["owner"], "created_at": iso(row["created_at"]),
        "evacuated_at": iso(row.get("evacuated_at")),
    }


def volume_dict(row: Mapping[str, Any], host: str | None = None, instance: str | None = None) -> dict[str, Any]:
    """A data volume's row as the ledger's callers see it, with its hypervisor's and instance's names."""
    return {
        "name": row["name"], "hypervisor_uuid": row["hypervisor_uuid"], "host": host, "pool": row["pool"],
        "size_gb": row["size_gb"], "instance_uuid": row["instance_uuid"], "instance": instance,
        "target": row["target"], "owner": row["owner"], "created_at": iso(row["created_at"]),
        "shared": bool(row["shared"]), "delete_on_termination": bool(row["delete_on_termination"]),
    }
