"""The ledger's tables (SQLAlchemy 2 declarative models) and the values their columns take.

A hypervisor row holds everything the default filters and weighers read about one hypervisor,
so that a launch decides from one scan of one narrow table: its capacity (as synced: totals,
reserved amounts, allocation ratios), a summary of its usage (kept equal to its claims plus its
unmanaged usage by ``claims.refresh_usage`` in every transaction that changes either), its
status, zone, aggregates and hypervisor version. The facts only some filters read
(capabilities, metrics, pools) are in ``hypervisor_facts``, one row per hypervisor beside it:
kilobytes of CPU features per row would make every launch's scan several times slower. The
rows behind the usage stay the truth: claims and unmanaged usage.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Instance states, as Nova's vm_state names them.
BUILDING = "BUILDING"
ACTIVE = "ACTIVE"
ERROR = "ERROR"

# Hypervisor sync status: answered its last sync; in the inventory but did not answer; in no
# inventory and not synced for the staleness age (kept, with its claims, until an operator
# retires it).
HV_UP = "up"
HV_DOWN = "down"
HV_MISSING = "missing"

# Server group policies (Nova's names); only the hard ones are enforced by the claim, the soft
# ones are preferences for the weighers.
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

# The host-state fields a sync copies onto the hypervisor row as they are (DESIGN.md's schema).
CAPACITY_FIELDS = (
    "vcpus_total", "cpu_allocation_ratio", "total_usable_ram_mb", "reserved_host_memory_mb",
    "ram_allocation_ratio", "total_usable_disk_gb", "reserved_host_disk_mb", "disk_allocation_ratio",
)
# Facts on the hypervisor row (every read) and in hypervisor_facts (read when a filter needs them).
HOT_FACT_FIELDS = ("availability_zone", "aggregates", "hypervisor_version")
COLD_FACT_FIELDS = ("hypervisor_type", "libvirt_version", "supported_instances", "cpu_info", "numa_topology",
                    "metrics", "storage_pool", "pools")
# The hypervisor's own memory view (/proc/meminfo), kept for drift reports, never scheduled on.
HOST_MEMORY_FIELDS = (
    "hv_memory_total_mb", "hv_memory_free_mb", "hv_memory_buffers_mb", "hv_memory_cached_mb",
    "hv_memory_used_mb", "hv_memory_source",
)


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class Base(DeclarativeBase):
    pass


class HypervisorRow(Base):
    """A hypervisor, keyed by its libvirt host UUID, as its last sync recorded it."""

    __tablename__ = "hypervisors"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), index=True)
    nodename: Mapped[str] = mapped_column(String(255))
    # The URI the builds connect with (as the inventory gave it: never a password).
    uri: Mapped[str | None] = mapped_column(Text, nullable=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    synced_at: Mapped[dt.datetime] = mapped_column(DateTime)
    sync_status: Mapped[str] = mapped_column(String(16), default=HV_UP)
    down_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Capacity, as synced.
    vcpus_total: Mapped[int] = mapped_column(Integer, default=0)
    cpu_allocation_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    total_usable_ram_mb: Mapped[int] = mapped_column(Integer, default=0)
    reserved_host_memory_mb: Mapped[int] = mapped_column(Integer, default=0)
    ram_allocation_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    total_usable_disk_gb: Mapped[int] = mapped_column(Integer, default=0)
    reserved_host_disk_mb: Mapped[int] = mapped_column(Integer, default=0)
    disk_allocation_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    # Usage: claims plus unmanaged usage, summed by claims.refresh_usage.
    vcpus_used: Mapped[int] = mapped_column(Integer, default=0)
    memory_mb_used: Mapped[int] = mapped_column(Integer, default=0)
    disk_mb_used: Mapped[int] = mapped_column(Integer, default=0)
    num_instances: Mapped[int] = mapped_column(Integer, default=0)
    num_io_ops: Mapped[int] = mapped_column(Integer, default=0)
    # Facts the default filters and weighers read.
    availability_zone: Mapped[str | None] = mapped_column(String(255), nullable=True)
    aggregates: Mapped[Any] = mapped_column(JSON, default=list)
    hypervisor_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class HypervisorFactsRow(Base):
    """The facts of a hypervisor's last sync that only some filters read, beside its row."""

    __tablename__ = "hypervisor_facts"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                                                 primary_key=True)
    hypervisor_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    libvirt_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    supported_instances: Mapped[Any] = mapped_column(JSON, default=list)
    cpu_info: Mapped[Any] = mapped_column(JSON, default=dict)
    numa_topology: Mapped[Any] = mapped_column(JSON, default=dict)
    metrics: Mapped[Any] = mapped_column(JSON, default=dict)
    storage_pool: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pools: Mapped[Any] = mapped_column(JSON, default=list)
    host_memory: Mapped[Any] = mapped_column(JSON, default=dict)


class HypervisorImageRow(Base):
    """A volume of the hypervisor's instance pool that a launch could name as its image (not one
    of Berth's own instance volumes), as the last sync listed them; ``refused`` says why it may
    not be used (a link, a backing file outside the pool...), None when it may."""

    __tablename__ = "hypervisor_images"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                                                 primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True, index=True)
    refused: Mapped[str | None] = mapped_column(Text, nullable=True)


class HypervisorNetworkRow(Base):
    """A libvirt network the hypervisor defines, as the last sync listed them."""

    __tablename__ = "hypervisor_networks"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                                                 primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True, index=True)


class UnmanagedRow(Base):
    """A domain on a hypervisor that the ledger does not know (an orphan), counted as usage."""

    __tablename__ = "unmanaged_usage"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                                                 primary_key=True)
    domain_uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    domain_name: Mapped[str] = mapped_column(String(255))
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    disk_mb: Mapped[int] = mapped_column(Integer)
    seen_at: Mapped[dt.datetime] = mapped_column(DateTime)


class InstanceRow(Base):
    __tablename__ = "instances"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    flavor_name: Mapped[str] = mapped_column(String(255))
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    root_gb: Mapped[int] = mapped_column(Integer)
    ephemeral_gb: Mapped[int] = mapped_column(Integer)
    swap: Mapped[int] = mapped_column(Integer)
    image: Mapped[str | None] = mapped_column(String(255), nullable=True)
    hypervisor_uuid: Mapped[str | None] = mapped_column(ForeignKey("hypervisors.uuid"), nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    state: Mapped[str] = mapped_column(String(16))
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    missing_since: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime)

    def to_dict(self) -> dict[str, Any]:
        return instance_dict({column.key: getattr(self, column.key) for column in self.__table__.columns})


def instance_dict(columns: Mapping[str, Any]) -> dict[str, Any]:
    """An instance as the ledger's callers see it, from its row's column values."""
    return {
        "uuid": columns["uuid"], "name": columns["name"], "flavor": columns["flavor_name"],
        "vcpus": columns["vcpus"], "memory_mb": columns["memory_mb"], "root_gb": columns["root_gb"],
        "ephemeral_gb": columns["ephemeral_gb"], "swap": columns["swap"], "image": columns["image"],
        "hypervisor_uuid": columns["hypervisor_uuid"], "host": columns["host"], "state": columns["state"],
        "failure_reason": columns["failure_reason"], "missing_since": iso(columns["missing_since"]),
        "created_at": iso(columns["created_at"]), "updated_at": iso(columns["updated_at"]),
    }


class ClaimRow(Base):
    """Resources one instance holds on one hypervisor. An instance holds one claim, or two while
    it moves (the destination is claimed before the move, the source released after)."""

    __tablename__ = "claims"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid", ondelete="CASCADE"), index=True)
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid"), index=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    disk_mb: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(255))
    # Set while the instance is BUILDING (or moving): a sync may release the claim once this has
    # passed and no domain exists. None once the instance runs.
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)

    def to_dict(self, host: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id, "instance_uuid": self.instance_uuid, "hypervisor_uuid": self.hypervisor_uuid,
            "host": host, "vcpus": self.vcpus, "memory_mb": self.memory_mb, "disk_mb": self.disk_mb,
            "owner": self.owner, "lease_expires_at": iso(self.lease_expires_at),
            "created_at": iso(self.created_at),
        }


class ServerGroupRow(Base):
    __tablename__ = "server_groups"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    policy: Mapped[str] = mapped_column(String(32))
    max_server_per_host: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)


class MemberRow(Base):
    __tablename__ = "server_group_members"
    group_uuid: Mapped[str] = mapped_column(ForeignKey("server_groups.uuid", ondelete="CASCADE"), primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid", ondelete="CASCADE"), primary_key=True,
                                               index=True)


class DecisionRow(Base):
    """One scheduling decision with what it was made on, so the engine can replay it."""

    __tablename__ = "decisions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    owner: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(63), index=True)
    ok: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(32))  # claimed, no_valid_host, claim_conflict, planned
    summary: Mapped[str] = mapped_column(Text)
    request: Mapped[Any] = mapped_column(JSON)
    host_states: Mapped[Any] = mapped_column(JSON)
    decision: Mapped[Any] = mapped_column(JSON)

    def to_dict(self) -> dict[str, Any]:
        placements = (self.decision or {}).get("placements", [])
        return {
            "id": self.id, "created_at": iso(self.created_at), "owner": self.owner, "name": self.name,
            "ok": self.ok, "outcome": self.outcome, "summary": self.summary,
            "choice": [p.get("host") for p in placements],
            "alternates": [p.get("alternates", []) for p in placements],
            "request": self.request, "host_states": self.host_states, "decision": self.decision,
        }
