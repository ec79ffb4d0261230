"""berth.fleet.capacity's controller side on a real SQLite ledger: what it counts under."""
from __future__ import annotations

from ansible_collections.berth.fleet.plugins.action.capacity import ActionModule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

TINY = {"name": "m1.tiny", "vcpus": 1, "memory_mb": 512, "root_gb": 1}


def synced_host(name):
    """A hypervisor as a tracker sync records it: room for many m1.tiny."""
    return {"host": name, "nodename": name, "uuid": f"uuid-{name}", "service_up": True,
            "disabled": False, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192,
            "free_ram_mb": 7680, "total_usable_disk_gb": 100, "free_disk_mb": 102400,
            "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 4.0,
            "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": []}


def count(url, **options):
    args = {name: spec.get("default") for name, spec in ActionModule.ARGUMENT_SPEC.items()}
    args.update(flavor=TINY, ledger_url=url, **options)
    # _run is the action's whole work once Ansible has checked the arguments.
    return ActionModule._run(None, args, {})  # type: ignore[arg-type]


def test_a_server_group_named_by_its_ledger_name_is_counted_under_its_policy(tmp_path):
    # Anti-affinity, one member a host: web-1 holds hv1, so hv1 takes no more and hv2 one.
    # RAM alone would admit 15 m1.tiny on each (7680 / 512).
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    ledger = Ledger(url).open(create=True)
    ledger.sync_hypervisors([synced_host("hv1"), synced_host("hv2")])
    ledger.create_server_group("web", "anti-affinity")
    ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "uuid-hv1"}],
                 Flavor(**TINY), "test", server_group="web")
    ledger.close()
    assert count(url)["total"] == 14 + 15
    answer = count(url, server_group="web")
    assert [(host["host"], host["fits"], host["limited_by"]) for host in answer["hosts"]] == [
        ("hv1", 0, "ServerGroupAntiAffinityFilter"), ("hv2", 1, "ServerGroupAntiAffinityFilter")]
    assert answer["total"] == 1
