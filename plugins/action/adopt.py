"""berth.fleet.adopt: take a domain that already runs on a hypervisor into the ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, run_owner

ADOPTED_FLAVOR = "adopted"


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        host = args["host"]
        check_mode = bool(self._task.check_mode)
        ledger = Ledger(args["ledger_url"]).open()
        # The inventory's live facts where it gathered them (synced before adopting), else the
        # ledger's record of the hypervisor.
        # Asked with ``in`` first: HostVars cannot answer get() for a host it lacks outside a
        # template (a ledger-only run has no hypervisor hosts).
        hostvars = task_vars.get("hostvars", {})
        variables = (hostvars[host] if host in hostvars else None) or {}
        state = variables.get("berth_host_state")
        uri = variables.get("berth_libvirt_uri")
        if state and not state.get("service_up"):
            raise InputError("host", f"hypervisor {host} did not answer: {state.get('down_reason') or 'down'}")
        if not uri:
            known = {row["host"]: row["uri"] for row in ledger.hypervisors()}
            uri = known.get(host)
            if not uri:
                raise InputError("host", f"host {host} is neither in the inventory's hypervisors nor a hypervisor "
                                         f"{ledger.label} knows with a URI (known: {', '.join(sorted(known)) or 'none'}): "
                                         f"run playbooks/gather.yml, or point -i at a berth.fleet.hypervisors source")
        uri_policy = UriPolicy.from_settings(args["uri_policy"])
        with Hypervisor(host, uri, args["timeout"], uri_policy=uri_policy) as hv:
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
            flavor = self._flavor(args, domain, marked.get("flavor"))
            owner = run_owner()
            # Everything is checked before anything is written (the hypervisor's sync included).
            instance, adopting = ledger.adopt_instance(host, domain["uuid"], name, flavor, owner, dry_run=True)
            if not adopting:
                self._same_as_before(args, instance, name, flavor)
            current = {"uuid": marked["instance_uuid"], "name": marked["name"], "flavor": marked["flavor"],
                       "metadata": marked.get("metadata") or {}} if marked else None
            wanted = {"uuid": domain["uuid"], "name": instance["name"], "flavor": instance["flavor"],
                      "metadata": marked.get("metadata") or {}}
            relabel = current != wanted
            result = {"changed": adopting or relabel, "instance": instance, "domain": _shown(domain, host)}
            if not result["changed"]:
                result["msg"] = f"{domain['name']} on {host} is instance {instance['name']} already"
                return result
            would = "would " if check_mode else ""
            if adopting:
                result["msg"] = (f"{would}{'adopt' if check_mode else 'adopted'} domain {domain['name']} on {host} as "
                                 f"instance {name} ({flavor.vcpus} vCPUs, {flavor.memory_mb} MB, {flavor.root_gb} GB, "
                                 f"flavor {flavor.name})")
            else:
                result["msg"] = (f"{would}{'write' if check_mode else 'wrote'} Berth metadata of instance "
                                 f"{wanted['name']} back into domain {domain['name']} on {host}")
            if check_mode:
                return result
            if state:
                # The hypervisor's row and the domain's usage as the inventory saw them.
                ledger.sync_hypervisors([{**state, "uri": uri}], uri_policy)
            if relabel:
                hv.set_berth_metadata(domain["uuid"], wanted)
            try:
                result["instance"], adopted_now = ledger.adopt_instance(host, domain["uuid"], name, flavor, owner)
            except BaseException:
                if relabel:  # the domain goes back to what it was: nothing half done
                    hv.set_berth_metadata(domain["uuid"], current)
                raise
            settled = {**wanted, "name": result["instance"]["name"], "flavor": result["instance"]["flavor"]}
            if not adopted_now and settled != wanted:
                # Another run adopted it meanwhile, under its own name: the domain says what the ledger says.
                hv.set_berth_metadata(domain["uuid"], settled)
            result["domain"] = _shown(hv.find_domain_named(domain["uuid"]) or domain, host)
        return result

    @staticmethod
    def _same_as_before(args: dict[str, Any], instance: dict[str, Any], name: str, flavor: Flavor) -> None:
        """A second run that asks for another name or flavor is an error, not a silent no-op."""
        if args["name"] and name != instance["name"]:
            raise InputError("name", f"the domain was adopted as instance {instance['name']}, not {name}; "
                                     f"the name does not change by adopting again")
        if args["flavor"] is not None and flavor.name != instance["flavor"]:
            raise InputError("flavor", f"instance {instance['name']} was adopted with flavor {instance['flavor']}, "
                                       f"not {flavor.name}; the flavor does not change by adopting again")

    @staticmethod
    def _flavor(args: dict[str, Any], domain: dict[str, Any], marked_flavor: str | None) -> Flavor:
        """The named or inline flavor, which must match the domain's vCPUs and memory; else the
        domain's own sizes (its disks in the pools, rounded up to whole GB)."""
        disk_mb = sum(int(disk["capacity_mb"]) for disk in domain["disks"])
        try:
            own = Flavor(name=marked_flavor or ADOPTED_FLAVOR, vcpus=int(domain["vcpus"]),
                         memory_mb=int(domain["memory_mb"]), root_gb=-(-disk_mb // 1024))
        except InputError as exc:  # a size beyond Berth's limits (module_utils/limits.py)
            raise InputError("domain", f"domain {domain['name']} is larger than Berth takes: {exc}") from exc
        if args["flavor"] is None:
            return own
        flavor = flavor_option(args["flavor"], args["flavors_file"])
        if (flavor.vcpus, flavor.memory_mb) != (own.vcpus, own.memory_mb):
            raise InputError("flavor", f"flavor {flavor.name} has {flavor.vcpus} vCPUs and {flavor.memory_mb} MB, "
                                       f"but domain {domain['name']} has {own.vcpus} vCPUs and {own.memory_mb} MB: "
                                       f"the ledger must count what runs (leave flavor out to take the domain's sizes)")
        return flavor


def _shown(domain: dict[str, Any], host: str) -> dict[str, Any]:
    return {"name": domain["name"], "uuid": domain["uuid"], "host": host, "state": domain["state"],
            "vcpus": domain["vcpus"], "memory_mb": domain["memory_mb"], "berth": domain["berth"]}
