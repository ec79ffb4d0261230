"""An adoption: a domain Berth did not build, taken into the ledger where it runs, Berth's
metadata written into it. What berth.fleet.adopt does. Private to the collection."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The flavor name of an adopted domain's own sizes, where neither the task nor its metadata names one.
ADOPTED_FLAVOR = "adopted"


class Adopt:
    """Adopt the domain ``args["domain"]`` of hypervisor ``args["host"]`` (berth.fleet.adopt's
    validated options; ``settings`` the operator's) with ``flavor``, the task's (resolved by the
    caller; None: the domain's own sizes). ``host_variables``: the inventory's
    variables of that host - its live facts (``berth_host_state``, synced into the ledger
    first) and URI (``berth_libvirt_uri``) -, empty where the inventory lacks it: then the
    ledger's record of the hypervisor is used. ``connect`` opens it (libvirt's by default).

    Everything is checked, and the ledger's write worked out, before anything is written; in
    check mode nothing is. The domain's metadata is written before the ledger's transaction and
    put back if that transaction fails: nothing is left half done."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, flavor: Flavor | None, ledger: Ledger,
                 host_variables: Mapping[str, Any], check_mode: bool, connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.flavor, self.ledger = args, settings, flavor, ledger
        self.host_variables, self.check_mode, self.connect = host_variables, check_mode, connect

    def run(self) -> dict[str, Any]:
        args, ledger, host = self.args, self.ledger, self.args["host"]
        state = self.host_variables.get("berth_host_state")
        if state and not state.get("service_up"):
            raise InputError("host", f"hypervisor {host} did not answer: {state.get('down_reason') or 'down'}")
        uri = self.host_variables.get("berth_libvirt_uri") or self._recorded_uri(host)
        uri_policy = UriPolicy.from_settings(self.settings.uri_policy)
        with self.connect(host, uri, args["timeout"], uri_policy=uri_policy) as hv:
            domain = hv.find_domain_named(args["domain"])
            if domain is None:
                raise InputError("domain", f"no domain {args['domain']!r} on {host}")
            if not domain["persistent"]:
                raise InputError("domain", f"domain {domain['name']} on {host} is transient (started without a "
                                           f"definition, as virsh create does); define it first, then adopt it")
            marked = domain["berth"] or {}
            if marked and marked["instance_uuid"] != domain["uuid"]:
                raise InputError("domain", f"domain {domain['name']} on {host} carries Berth metadata of another "
                                           f"instance ({marked['instance_uuid']}); it is not Berth's to adopt")
            name = dns_label("name", args["name"] or marked.get("name") or domain["name"])
            flavor = self._flavor(domain, marked.get("flavor"))
            owner = run_owner()
            # Everything is checked before anything is written (the hypervisor's sync included).
            instance, adopting = ledger.adopt_instance(host, domain["uuid"], name, flavor, owner, dry_run=True)
            if not adopting:
                self._same_as_before(instance, name, flavor)
            current = {"uuid": marked["instance_uuid"], "name": marked["name"], "flavor": marked["flavor"],
                       "metadata": marked.get("metadata") or {}} if marked else None
            wanted = {"uuid": domain["uuid"], "name": instance["name"], "flavor": instance["flavor"],
                      "metadata": marked.get("metadata") or {}}
            relabel = current != wanted
            result = {"changed": adopting or relabel, "instance": instance, "domain": _shown(domain, host)}
            if not result["changed"]:
                result["msg"] = f"{domain['name']} on {host} is instance {instance['name']} already"
                return result
            would = "would " if self.check_mode else ""
            if adopting:
                result["msg"] = (f"{would}{'adopt' if self.check_mode else 'adopted'} domain {domain['name']} on "
                                 f"{host} as instance {name} ({flavor.vcpus} vCPUs, {flavor.memory_mb} MB, "
                                 f"{flavor.root_gb} GB, flavor {flavor.name})")
            else:
                result["msg"] = (f"{would}{'write' if self.check_mode else 'wrote'} Berth metadata of instance "
                                 f"{wanted['name']} back into domain {domain['name']} on {host}")
            if self.check_mode:
                return result
            if state:
                # The hypervisor's row and the domain's usage as the inventory saw them.
                ledger.sync_hypervisors([{**state, "uri": uri}], uri_policy)
            result["instance"] = self._recorded(hv, domain["uuid"], name, flavor, owner, current, wanted, relabel)
            result["domain"] = _shown(hv.find_domain_named(domain["uuid"]) or domain, host)
        return result

    def _recorded_uri(self, host: str) -> str:
        """The URI of the ledger's last sync of ``host``, for a host the inventory does not list."""
        known = {row["host"]: row["uri"] for row in self.ledger.hypervisors()}
        if not known.get(host):
            listed = ", ".join(sorted(known)) or "none"
            raise InputError("host", f"host {host} is neither in the inventory's hypervisors nor a hypervisor "
                                     f"{self.ledger.label} knows with a URI (known: {listed}): "
                                     f"run playbooks/gather.yml, or point -i at a berth.fleet.hypervisors source")
        return known[host]

    def _recorded(self, hv: HypervisorDriver, uuid: str, name: str, flavor: Flavor, owner: str,
                  current: dict[str, Any] | None, wanted: dict[str, Any], relabel: bool) -> dict[str, Any]:
        """The domain relabelled (where its metadata is not ``wanted``), then the ledger's
        adoption; the metadata goes back to ``current`` if the ledger's write fails. Returns the
        instance as the ledger has it."""
        if relabel:
            hv.set_berth_metadata(uuid, wanted)
        try:
            instance, adopted_now = self.ledger.adopt_instance(self.args["host"], uuid, name, flavor, owner)
        except BaseException:
            if relabel:  # the domain goes back to what it was: nothing half done
                hv.set_berth_metadata(uuid, current)
            raise
        settled = {**wanted, "name": instance["name"], "flavor": instance["flavor"]}
        if not adopted_now and settled != wanted:
            # Another run adopted it meanwhile, under its own name: the domain says what the ledger says.
            hv.set_berth_metadata(uuid, settled)
        return instance

    def _same_as_before(self, instance: dict[str, Any], name: str, flavor: Flavor) -> None:
        """A second run that asks for another name or flavor is an error, not a silent no-op."""
        if self.args["name"] and name != instance["name"]:
            raise InputError("name", f"the domain was adopted as instance {instance['name']}, not {name}; "
                                     f"the name does not change by adopting again")
        if self.flavor is not None and flavor.name != instance["flavor"]:
            raise InputError("flavor", f"instance {instance['name']} was adopted with flavor {instance['flavor']}, "
                                       f"not {flavor.name}; the flavor does not change by adopting again")

    def _flavor(self, domain: dict[str, Any], marked_flavor: str | None) -> Flavor:
        """The task's flavor, which must match the domain's vCPUs and memory; else the domain's
        own sizes (its disks in the pools, rounded up to whole GB)."""
        disk_mb = sum(int(disk["capacity_mb"]) for disk in domain["disks"])
        try:
            own = Flavor(name=marked_flavor or ADOPTED_FLAVOR, vcpus=int(domain["vcpus"]),
                         memory_mb=int(domain["memory_mb"]), root_gb=-(-disk_mb // 1024))
        except InputError as exc:  # a size beyond Berth's limits (module_utils/limits.py)
            raise InputError("domain", f"domain {domain['name']} is larger than Berth takes: {exc}") from exc
        flavor = self.flavor
        if flavor is None:
            return own
        if (flavor.vcpus, flavor.memory_mb) != (own.vcpus, own.memory_mb):
            raise InputError("flavor", f"flavor {flavor.name} has {flavor.vcpus} vCPUs and {flavor.memory_mb} MB, "
                                       f"but domain {domain['name']} has {own.vcpus} vCPUs and {own.memory_mb} MB: "
                                       f"the ledger must count what runs (leave flavor out to take the domain's sizes)")
        return flavor


def _shown(domain: dict[str, Any], host: str) -> dict[str, Any]:
    return {"name": domain["name"], "uuid": domain["uuid"], "host": host, "state": domain["state"],
            "vcpus": domain["vcpus"], "memory_mb": domain["memory_mb"], "berth": domain["berth"]}
