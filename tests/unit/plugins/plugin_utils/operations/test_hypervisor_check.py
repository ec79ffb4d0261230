"""A hypervisor's prerequisites (operations/check.py): what libvirt reports, judged; and a real
read of libvirt's test driver, which is not the QEMU driver Berth needs."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.action.hypervisor_check import ActionModule as HypervisorCheck
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.check import (
    check_hypervisor,
    judge,
    version_text,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Target


def readiness(**changes):
    ready = {"libvirt_version": 9_000_000, "hypervisor_type": "QEMU", "domain_types": ["kvm", "qemu"],
             "pools": [{"name": "default", "active": True, "autostart": True, "capacity_mb": 102400}],
             "networks": [{"name": "default", "active": True, "autostart": True},
                          {"name": "lab", "active": False, "autostart": False}]}
    ready.update(changes)
    return ready


def failed(checks):
    return {check["check"]: check["detail"] for check in checks if not check["ok"]}


def test_a_ready_hypervisor_passes_every_check():
    checks = judge(readiness(), "default", ["default"])
    assert failed(checks) == {}
    assert [check["check"] for check in checks] == ["libvirt", "driver", "storage_pool", "network default"]
    assert checks[2]["detail"] == "storage pool 'default' active and autostarted, 100 GiB"


@pytest.mark.parametrize(("changes", "pool", "networks", "check", "says"), [
    pytest.param({"libvirt_version": 8_000_000}, "default", [], "libvirt",
                 "libvirt 8.0.0 is older than 9.0.0", id="old-libvirt"),
    pytest.param({"hypervisor_type": "Xen"}, "default", [], "driver", "libvirt's Xen driver", id="not-qemu"),
    pytest.param({"domain_types": ["tcg"]}, "default", [], "driver", "QEMU offers no kvm or qemu guests",
                 id="no-guests"),
    pytest.param({"pools": []}, "default", [], "storage_pool",
                 "storage pool 'default' not found (pools: none): virsh pool-define-as default dir", id="no-pool"),
    pytest.param({}, "images", [], "storage_pool", "storage pool 'images' not found (pools: default)",
                 id="other-pool"),
    pytest.param({"pools": [{"name": "default", "active": False, "autostart": True, "capacity_mb": 0}]},
                 "default", [], "storage_pool", "is not active: virsh pool-start default", id="pool-inactive"),
    pytest.param({"pools": [{"name": "default", "active": True, "autostart": False, "capacity_mb": 0}]},
                 "default", [], "storage_pool", "not autostarted", id="pool-not-autostarted"),
    pytest.param({}, "default", ["lab"], "network lab", "network 'lab' is not active: virsh net-start lab",
                 id="network-inactive"),
    pytest.param({}, "default", ["web"], "network web", "network 'web' not found (networks: default, lab)",
                 id="network-missing"),
])
def test_what_is_missing_is_said_with_how_to_mend_it(changes, pool, networks, check, says):
    problems = failed(judge(readiness(**changes), pool, networks))
    assert list(problems) == [check]
    assert says in problems[check]


def test_without_networks_named_the_active_ones_are_listed():
    (networks,) = [check for check in judge(readiness(), "default", []) if check["check"] == "networks"]
    assert networks["ok"] and networks["detail"].startswith("active networks: default ")


def test_version_text():
    assert version_text(10_005_001) == "10.5.1"


def target(uri, pool="default-pool"):
    return Target.from_hostvars("hv1", {"berth_libvirt_uri": uri, "berth_hypervisor": {
        "storage_pool": pool, "timeout": 5.0, "settings": {}, "aggregates": [], "availability_zone": "nova",
        "keepalive_interval": 5, "keepalive_count": 3}})


def test_libvirt_s_test_driver_is_read_and_is_not_qemu():
    result = check_hypervisor(target("test:///default"), ["default"])
    assert not result["ready"]
    assert [check["check"] for check in result["checks"] if check["ok"]] == ["connection", "libvirt", "network default"]
    assert result["missing"] == [
        "driver: the URI reaches libvirt's TEST driver: Berth needs QEMU (qemu:///system, qemu+ssh://USER@HOST/system)",
        "storage_pool: storage pool 'default-pool' is active but not autostarted, so it is gone after libvirt "
        "restarts: virsh pool-autostart default-pool"]


def test_a_refused_connection_is_the_one_finding_with_where_to_look(tmp_path):
    result = check_hypervisor(target(f"qemu+unix:///system?socket={tmp_path}/none.sock"))
    assert [check["check"] for check in result["checks"]] == ["connection"]
    (missing,) = result["missing"]
    assert missing.startswith("connection: cannot connect: ")
    assert "libvirt group, or a polkit rule for org.libvirt.unix.manage" in missing


def test_the_action_on_a_host_that_is_no_hypervisor_says_where_to_run_it():
    with pytest.raises(BerthError, match="^host localhost has no berth_libvirt_uri .*run berth.fleet.hypervisor_check "
                                         "on the hypervisors' group$"):
        HypervisorCheck.run_berth(None, {"networks": [], "uri_policy": None}, {"inventory_hostname": "localhost"})  # type: ignore[arg-type]
