"""Failover headroom (plugin_utils/_headroom.py) on small fleets worked by hand.

Every host has 16384 MB of RAM at ratio 1.0, so RamFilter's room on it is its free_ram_mb; the
HA instances are 8192 MB (1 vCPU, 10 GB), so one fits where 8192 MB or more is free. Summing
free RAM would call each fleet below absorbed; the filters (group, zone) say where it is not.
"""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import ServerGroup
from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import (
    HaInstance,
    failover_headroom,
    instance_key,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import request_spec
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

LARGE = Flavor(name="large", vcpus=1, memory_mb=8192, root_gb=10)


def host(name, free_ram_mb, zone=None):
    return HostState(host=name, uuid=f"uuid-{name}", vcpus_total=8, total_usable_ram_mb=16384,
                     free_ram_mb=free_ram_mb, total_usable_disk_gb=100, free_disk_mb=100 * 1024,
                     availability_zone=zone)


def ha(name, on, priority=0, group=None, zone=None):
    spec = request_spec(Request(flavor=LARGE, availability_zone=zone), Settings(), 1,
                        group.copy() if group is not None else None, image_volume=None)
    return HaInstance(name, on, priority, spec, instance_key(spec))


def answer(hosts, instances, k=1):
    headroom = failover_headroom(HostTable.from_states(hosts), instances, k)
    return headroom, {loss.failed: (loss.placed, sorted(loss.unplaced)) for loss in [*headroom.single,
                                                                                     *headroom.combined]}


def test_two_loaded_hosts_and_one_spare_hold_one_failure_not_two():
    # hv1 and hv2 hold one HA instance each (4096 MB left); hv3 has 10000 MB free: room for one.
    hosts = [host("hv1", 4096), host("hv2", 4096), host("hv3", 10000)]
    instances = [ha("a", "hv1"), ha("b", "hv2")]
    headroom, losses = answer(hosts, instances, k=1)
    assert headroom.held and headroom.single_hosts_unabsorbed == []
    assert losses == {("hv1",): ({"a": "hv3"}, []), ("hv2",): ({"b": "hv3"}, [])}
    headroom, losses = answer(hosts, instances, k=2)
    assert not headroom.held and headroom.single_hosts_unabsorbed == []
    # Both lost: hv3 takes the first restarted (by name at equal priority), then has 1808 MB.
    assert losses[("hv1", "hv2")] == ({"a": "hv3"}, ["b"])
    assert "the loss of hv1 and hv2 could not be absorbed: b (" in headroom.unabsorbed[0].sentence()


def test_the_highest_priority_is_restarted_first_and_takes_the_room():
    hosts = [host("hv1", 4096), host("hv2", 4096), host("hv3", 10000)]
    _headroom, losses = answer(hosts, [ha("a", "hv1", priority=1), ha("b", "hv2", priority=50)], k=2)
    assert losses[("hv1", "hv2")] == ({"b": "hv3"}, ["a"])


def test_priority_orders_the_instances_of_one_host():
    # hv1 holds three HA instances; hv2 (nothing reserved) has room for two: the two highest go.
    hosts = [host("hv1", 0), host("hv2", 16384)]
    instances = [ha("low", "hv1", priority=0), ha("high", "hv1", priority=9), ha("mid", "hv1", priority=5)]
    headroom, losses = answer(hosts, instances)
    assert losses[("hv1",)] == ({"high": "hv2", "mid": "hv2"}, ["low"])
    assert headroom.single_hosts_unabsorbed == ["hv1"]


def test_an_anti_affinity_member_cannot_go_where_another_member_is():
    # web-1..3 on hv1..3, each host with 10000 MB free: 20000 MB free beside hv1, yet no host
    # without a member of web.
    web = ServerGroup("web", "anti-affinity", 1, ["hv1", "hv2", "hv3"], {"hv1": 1, "hv2": 1, "hv3": 1})
    hosts = [host("hv1", 10000), host("hv2", 10000), host("hv3", 10000)]
    instances = [ha(f"web-{n}", f"hv{n}", group=web) for n in (1, 2, 3)]
    headroom, losses = answer(hosts, instances)
    assert headroom.single_hosts_unabsorbed == ["hv1", "hv2", "hv3"]
    assert losses[("hv1",)][1] == ["web-1"]
    assert "anti-affinity" in headroom.unabsorbed[0].unplaced["web-1"]
    # A fourth host with room absorbs any one loss.
    headroom, losses = answer([*hosts, host("hv4", 10000)], instances)
    assert headroom.held and losses[("hv2",)] == ({"web-2": "hv4"}, [])


def test_two_members_of_a_group_lost_together_need_two_hosts():
    web = ServerGroup("web", "anti-affinity", 1, ["hv1", "hv2"], {"hv1": 1, "hv2": 1})
    hosts = [host("hv1", 0), host("hv2", 0), host("hv3", 16384)]
    instances = [ha("web-1", "hv1", group=web), ha("web-2", "hv2", group=web)]
    headroom, losses = answer(hosts, instances, k=2)
    # hv3 has room for both by RAM, but the group lets it take one.
    assert losses[("hv1", "hv2")] == ({"web-1": "hv3"}, ["web-2"])
    assert headroom.single_hosts_unabsorbed == []


def test_a_zone_with_one_host_left():
    # az1 is hv1 and hv2; hv2 is full, hv3 (az2) has all the room: hv1's az1 instance has
    # nowhere to go, its az-less neighbour goes to hv3.
    hosts = [host("hv1", 0, "az1"), host("hv2", 1000, "az1"), host("hv3", 16384 - 512, "az2")]
    instances = [ha("zoned", "hv1", zone="az1"), ha("free", "hv1")]
    headroom, losses = answer(hosts, instances)
    assert losses[("hv1",)] == ({"free": "hv3"}, ["zoned"])
    why = headroom.unabsorbed[0].unplaced["zoned"]
    assert why.startswith("on hv3: 0/1 hosts are available") and "availability zone" in why
    assert "on the rest of the fleet (1 lost, 1 above): " in why and "insufficient RAM" in why


def test_no_ha_instance_means_nothing_to_absorb():
    headroom, losses = answer([host("hv1", 0), host("hv2", 0)], [], k=1)
    assert headroom.held and losses == {} and headroom.to_dict()["losses_checked"] == 0


@pytest.mark.parametrize("k", [1, 2])
def test_a_fleet_larger_than_the_shortlist_finds_room_beyond_it(k):
    # 30 hosts, every one but hv29 1 MB short of the instance: the shortlist is the best few
    # of the whole fleet, and the one host that fits is found whatever its rank.
    hosts = [host(f"hv{n:02d}", 8191 if n < 29 else 8192) for n in range(30)]
    hosts[0] = host("hv00", 0)
    headroom, losses = answer(hosts, [ha("a", "hv00")], k=k)
    assert headroom.held and losses[("hv00",)] == ({"a": "hv29"}, [])


def test_a_loss_of_the_host_an_earlier_loss_restarted_on_is_decided_anew():
    # a and b ask alike; a's restart goes to hv2 (the most free), b's cannot: hv2 is b's own.
    hosts = [host("hv1", 0), host("hv2", 12000), host("hv3", 9000)]
    _headroom, losses = answer(hosts, [ha("a", "hv1"), ha("b", "hv2")])
    assert losses == {("hv1",): ({"a": "hv2"}, []), ("hv2",): ({"b": "hv3"}, [])}


def member(name, free_ram_mb, *aggregates):
    state = host(name, free_ram_mb)
    state.aggregates = [{"name": aggregate, "metadata": {}} for aggregate in aggregates]
    return state


def test_per_aggregate_each_host_keeps_its_aggregates_k_and_is_lost_with_its_own():
    # prod (hv1..hv3) keeps 2, batch (hv4, hv5) keeps none; hv5 is also in db, which keeps 1.
    hosts = [member("hv1", 4096, "prod"), member("hv2", 4096, "prod"), member("hv3", 10000, "prod"),
             member("hv4", 0, "batch"), member("hv5", 9000, "batch", "db")]
    instances = [ha("a", "hv1"), ha("b", "hv2"), ha("heavy-1", "hv4"), ha("heavy-2", "hv4"), ha("d", "hv5")]
    headroom, losses = answer(hosts, instances, k={"prod": 2, "batch": 0, "db": 1})
    # hv4 keeps no headroom: neither its loss nor its instances are counted, though it holds the
    # most HA memory; prod's pair is lost together, never with hv4 or hv5.
    assert sorted(losses) == [("hv1",), ("hv1", "hv2"), ("hv2",), ("hv5",)]
    assert headroom.ha_instances == 3
    # Restarts go wherever the filters let them: b leaves prod for hv5 once hv3 took a.
    assert losses[("hv1", "hv2")] == ({"a": "hv3", "b": "hv5"}, [])
    assert losses[("hv5",)] == ({"d": "hv3"}, [])
    assert headroom.held
    assert headroom.summary().startswith("failover headroom for batch: 0 hosts, db: 1 host, prod: 2 hosts (3 HA")


def test_per_aggregate_a_host_in_no_aggregate_named_keeps_none():
    hosts = [member("hv1", 0, "prod"), member("hv2", 0), member("hv3", 16384)]
    headroom, losses = answer(hosts, [ha("a", "hv1"), ha("b", "hv2")], k={"prod": 1})
    assert list(losses) == [("hv1",)] and headroom.held
    headroom, _losses = answer(hosts, [ha("a", "hv1")], k={"prod": 0})
    assert headroom.summary() == "no failover headroom is kept (berth_failover_hosts is 0)"


@pytest.mark.parametrize("value", [-1, "2", True, {"prod": -1}, {"prod": "2"}, {"": 1}, [1]])
def test_a_bad_failover_setting_is_refused_naming_it(value):
    from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
    from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import check_failover_settings

    with pytest.raises(InputError, match=r"failover_hosts \(berth_failover_hosts\) must be an integer"):
        check_failover_settings(Settings(failover_hosts=value))
