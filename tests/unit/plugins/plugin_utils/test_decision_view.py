"""A recorded decision explained for explain.yml: found by the instance it placed, and told in lines -
the request, the hosts each filter removed, the instance's host and weight by weigher beside the
runners-up (plugin_utils/_decision_view.py, through berth.fleet.ledger_info)."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.action.ledger_info import ActionModule
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec

SMALL = Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20)


def host(name, free_ram_mb):
    return HostState.from_dict({
        "host": name, "nodename": name, "uuid": f"uuid-{name}", "service_up": True, "disabled": False,
        "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 16384, "free_ram_mb": free_ram_mb,
        "total_usable_disk_gb": 100, "free_disk_mb": 102400, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0})


def record(ledger, launch, names, hosts):
    spec = RequestSpec(flavor=SMALL, count=len(names), weighers=["RAMWeigher"])
    decision = schedule(hosts, spec)
    request = {"flavor": SMALL.to_dict(), "count": len(names), "names": names, "availability_zone": None}
    return ledger.record_decision(launch, "test", request, [], decision.to_dict(), "claimed")


def test_the_decision_that_placed_an_instance_is_told_for_it_alone(ledger):
    # hv3 has no room for 2048 MB: RamFilter removes it. hv1 has the most free RAM: web-1 there,
    # then web-2 on hv2 (hv1 then has 2048 MB less).
    hosts = [host("hv1", 15000), host("hv2", 14000), host("hv3", 1000)]
    first = record(ledger, "web", ["web-1", "web-2"], hosts)
    record(ledger, "db", ["db-1"], hosts)  # another launch's decision, newer
    (found,) = ActionModule._decisions(ledger, None, "web-2", 20)
    assert found["id"] == first and found["request"]["names"] == ["web-1", "web-2"]
    lines = found["explanation"]
    assert lines[0].startswith(f"decision {first} (claimed, ") and lines[0].endswith(
        "launch web): placed 2 instances on hv1, hv2")
    assert lines[1] == "request: flavor m1.small (1 vCPU, 2048 MB RAM, 20 GB disk); count 2; names web-1, web-2"
    assert lines[2] == "filters: 3 hosts, 1 removed: RamFilter 1 (hv3)"
    # web-2 only: hv2 won on RAM, hv1 (12952 MB free after web-1) the runner-up.
    assert lines[3] == "web-2 -> hv2: weight 1 (RAMWeigher 1)"
    assert lines[4].startswith("  runner-up hv1: weight 0.9") and "(RAMWeigher 0.9" in lines[4]
    assert not any(line.startswith("web-1") for line in lines)


def test_an_instance_no_decision_names_is_an_error_naming_the_ledger(ledger):
    record(ledger, "web", ["web-1"], [host("hv1", 15000)])
    # Named with its password hidden (the PostgreSQL ledger has one).
    with pytest.raises(InputError, match=r"no decision in the ledger at (sqlite:///|postgresql\+psycopg://berth:\*\*\*@)"
                                         r".* placed web-7 \(of the newest 20 of launch web or web-7\)") as error:
        ActionModule._decisions(ledger, None, "web-7", 20)
    assert error.value.field == "instance"


def test_every_decision_comes_with_its_explanation(ledger):
    record(ledger, "web", ["web-1"], [host("hv1", 15000), host("hv2", 14000)])
    (found,) = ActionModule._decisions(ledger, "web", None, 20)
    assert found["explanation"][3].startswith("web-1 -> hv1: weight 1")
