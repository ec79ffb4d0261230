"""What Berth's operations need of a hypervisor: the ``HypervisorDriver`` protocol, and
``Connect``, the way an operation opens one.

libvirt_host.Hypervisor is the driver every run uses; the unit tests' fake hypervisor is the
other. An operation is given a ``connect`` (libvirt's Hypervisor by default) and calls nothing
on a connection beyond this list, so that one fake stands in for libvirt in every operation's
test. The protocol names only what the operations and the steps beneath them call
(plugin_utils/operations, _provisioning, _transfer, _power_states, and the fetch of a
sync): the inventory plugin's and the hypervisor_facts module's own calls are libvirt_host's
business. Importable without libvirt.

Domains are named by their UUID, volumes by their storage pool and name; a call that cannot be
made (a timeout, a lost connection, libvirt's refusal) raises errors.HypervisorError naming the
host.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, Protocol, Sequence

# What a Connect takes besides the host, its URI and the call timeout (see Connect).
CONNECTION_OPTIONS = ("uri_policy", "transfer_timeout_s", "keepalive_interval_s", "keepalive_count",
                      "bounded_by_caller", "username", "password")


class HypervisorDriver(Protocol):
    """One open connection to one hypervisor, used as ``with connect(host, uri, ...) as hv:``."""

    host: str  # the inventory's name of the hypervisor, which every error names
    uri: str  # its connection URI (a live migration's destination is reached by it)

    def __enter__(self) -> HypervisorDriver:
        """Open the connection (the URI checked against the operator's policy first)."""

    def __exit__(self, *_exc: Any) -> None:
        """Close it; closing twice does nothing."""

    # ---- the host ---------------------------------------------------------------------------

    def facts(self, pool_name: str) -> dict[str, Any]:
        """The host's raw facts (host_fetch and host_facts turn them into a host state)."""

    def readiness(self) -> dict[str, Any]:
        """{libvirt_version, hypervisor_type, domain_types, pools, networks}: what
        berth.fleet.hypervisor_check judges."""

    def network_names(self) -> list[str]:
        """The libvirt networks it defines, active or not."""

    def can_live_migrate(self) -> bool:
        """Whether its capabilities offer live migration."""

    def host_cpu_xml(self) -> str:
        """Its own CPU, as a ``<cpu>`` of its capabilities."""

    def compare_cpu(self, cpu_xml: str, domain_type: str | None = None, arch: str | None = None,
                    host_kind: bool = False) -> str | None:
        """None if it can run the CPU ``cpu_xml``, else why not (naming the features it lacks);
        errors.NotSupported where it cannot compare at all."""

    def guest_cpu_refusal(self, domain_xml: str, domain_type: str) -> str | None:
        """Why it cannot run the custom ``<cpu>`` of ``domain_xml`` as ``domain_type``, or None."""

    def baseline_cpu(self, cpu_xmls: list[str], domain_type: str, arch: str) -> str:
        """The ``<cpu>`` every one of ``cpu_xmls`` (host-model CPUs of a group's hosts) can run,
        migratable features only, as this host's libvirt computes it for ``domain_type`` and
        ``arch`` (virConnectBaselineHypervisorCPU); errors.NotSupported where it cannot."""

    # ---- domains ----------------------------------------------------------------------------

    def find_domain(self, uuid: str) -> dict[str, Any] | None:
        """{name, uuid, state, vcpus, memory_mb, disks, berth (its Berth metadata), holds}, or
        None if the domain is not there."""

    def find_domain_named(self, key: str) -> dict[str, Any] | None:
        """find_domain's answer for a domain named by its UUID or its name, with ``persistent``."""

    def domain_state(self, uuid: str) -> str | None:
        """libvirt's state of the domain (running, paused, shutoff...), or None if it is not there."""

    def domain_xml(self, uuid: str, inactive: bool = False) -> str | None:
        """The domain's XML (its persistent definition with ``inactive``), or None."""

    def autostart(self, uuid: str) -> bool:
        """Whether the domain starts with the hypervisor's daemon."""

    def define(self, domain_xml: str) -> str:
        """Define (or redefine) a persistent domain, not started; returns its UUID."""

    def start(self, uuid: str, autostart: bool | None = False) -> None:
        """Start a defined domain, setting its autostart flag unless ``autostart`` is None."""

    def stop(self, uuid: str) -> bool:
        """Power the domain off at once; True if it was running."""

    def shutdown(self, uuid: str) -> None:
        """Ask its guest to shut down (the ACPI power button) and return at once."""

    def suspend(self, uuid: str) -> None:
        """Pause a running domain."""

    def resume(self, uuid: str) -> None:
        """Resume a paused domain."""

    def remove_domain(self, uuid: str, keep_nvram: bool = False) -> bool:
        """Power off and undefine the domain if it is there, with its UEFI variables file unless
        ``keep_nvram``; True if it was."""

    def set_berth_metadata(self, uuid: str, fields: dict[str, Any] | None) -> None:
        """Write Berth's metadata (uuid, name, flavor, metadata) into the running domain and its
        definition, or remove it (None)."""

    def attach_disk(self, uuid: str, disk_xml: str) -> bool:
        """Attach the ``<disk>`` ``disk_xml`` to the domain: to its persistent definition, and
        hot-plugged into it where it runs. True if it was hot-plugged."""

    def detach_disk(self, uuid: str, disk_xml: str) -> bool:
        """Detach the ``<disk>`` ``disk_xml`` (found by its target) from the domain's persistent
        definition, and unplug it where the domain runs. True if it was unplugged live."""

    def live_migrate(self, uuid: str, target: HypervisorDriver, address: str | None = None,
                     definition: str | None = None, shared_paths: Sequence[str] = ()) -> None:
        """Migrate the running domain live to ``target`` (a driver of the same kind), its
        non-shared disks copied into the empty volumes made there - all but those whose file is
        one of ``shared_paths`` (on storage both hosts see); ``definition``: what the target
        keeps as its persistent definition (None: the source's)."""

    # ---- storage ----------------------------------------------------------------------------

    def pool_path(self, pool_name: str) -> str:
        """Where a directory pool keeps its volumes."""

    def volume(self, pool_name: str, name: str, refresh: bool = True) -> dict[str, Any] | None:
        """{name, path, type, format, capacity_mb, link, backing} of a volume of the pool, or
        None if the pool does not list it."""

    def volume_names(self, pool_name: str) -> list[str]:
        """The pool's volumes, by name."""

    def volume_users(self, pool_name: str, path: str, domain_uuid: str) -> list[str]:
        """What else needs the volume at ``path``: other domains, and volumes backed by it."""

    def volume_digest(self, pool_name: str, name: str, algorithm: str) -> str:
        """The hex digest (hashlib's ``algorithm``) of a volume's bytes."""

    def download_volume(self, pool_name: str, name: str, write: Callable[[bytes], Any]) -> None:
        """A volume's bytes, as its file holds them, handed to ``write`` chunk by chunk."""

    def flatten_volume(self, pool_name: str, name: str, new_name: str, running: str | None = None) -> str:
        """A standalone qcow2 copy ``new_name`` of volume ``name`` (its backing chain read
        through) in the same pool, made while the domain ``running`` (a UUID, or None) uses it;
        its path."""

    def fs_freeze(self, uuid: str) -> str | None:
        """Freeze the guest's file systems through its guest agent: None once frozen, else why not."""

    def fs_thaw(self, uuid: str) -> None:
        """Thaw what fs_freeze froze."""

    def create_volume(self, pool_name: str, name: str, capacity_gb: int,
                      backing: dict[str, str] | None = None, capacity_mb: int | None = None) -> str:
        """A new qcow2 volume (an overlay of ``backing``, {path, format}, where given); its path."""

    def upload_volume(self, pool_name: str, name: str, reader: BinaryIO, size_bytes: int, fmt: str) -> str:
        """A new volume of ``size_bytes`` filled from ``reader``; its path. Nothing is left of a
        failed upload."""

    def resize_volume(self, pool_name: str, name: str, capacity_mb: int, shrink: bool = False) -> None:
        """Give a volume a new capacity; smaller only with ``shrink``."""

    def delete_volume(self, pool_name: str, name: str) -> bool:
        """Delete a volume if the pool lists it; True if it did."""

    def copy_volume_to(self, target: HypervisorDriver, pool_name: str, name: str) -> None:
        """Copy a volume into the same-named pool of ``target`` (a driver of the same kind), with
        its format, capacity and backing image (which the target's pool must have)."""

    def create_volume_like(self, source: HypervisorDriver, pool_name: str, name: str) -> Any:
        """An empty volume here with the format, capacity and backing image of ``source``'s
        volume of that name (``source`` a driver of the same kind)."""

    def read_file_tail(self, directory: str, file_name: str, max_bytes: int) -> tuple[bytes, int] | None:
        """The last ``max_bytes`` of the regular file ``file_name`` in ``directory`` on the
        hypervisor, with the file's size; None if there is no such file."""


class Connect(Protocol):
    """How an operation opens a hypervisor: ``connect(host, uri, timeout_s, **connection)``
    returns a driver not opened yet, which ``with`` (or ``__enter__``) opens.

    ``timeout_s`` bounds each call. ``connection`` may hold any of CONNECTION_OPTIONS:
    ``uri_policy`` (the operator's UriPolicy, which the driver checks the URI against as it
    opens it), ``transfer_timeout_s`` (a volume copy's or a migration's own limit),
    ``keepalive_interval_s``, ``keepalive_count``, ``bounded_by_caller`` (the caller bounds the
    whole session itself), ``username`` and ``password``. libvirt_host.Hypervisor is one."""

    def __call__(self, host: str, uri: str, timeout_s: float = 10.0, **connection: Any) -> HypervisorDriver:
        ...
