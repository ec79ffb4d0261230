"""The vCPU topology as Nova's virt/hardware.py chooses it: flavor extra specs, image properties,
limits, preferences, and the contradictions refused naming the spec."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.cpu_topology import (
    best_topology,
    possible_topologies,
    topology_constraints,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError


def triple(topology):
    return topology["sockets"], topology["cores"], topology["threads"]


BEST = [
    pytest.param(1, {}, {}, (1, 1, 1), id="one-vcpu"),
    # Nothing said: as many sockets as vCPUs (Nova prefers sockets, then cores, over threads).
    pytest.param(4, {}, {}, (4, 1, 1), id="nothing-said-all-sockets"),
    pytest.param(4, {"hw:cpu_sockets": "2"}, {}, (2, 2, 1), id="two-sockets-of-four"),
    pytest.param(16, {"hw:cpu_sockets": "8", "hw:cpu_cores": "2", "hw:cpu_threads": "1"}, {}, (8, 2, 1),
                 id="flavor-preference-exact"),
    # Any preferred count on the image replaces the flavor's whole preference.
    pytest.param(16, {"hw:cpu_sockets": "8", "hw:cpu_cores": "2", "hw:cpu_threads": "1"},
                 {"hw_cpu_sockets": "4", "hw_cpu_cores": "2", "hw_cpu_threads": "2"}, (4, 2, 2),
                 id="image-preference-wins"),
    pytest.param(16, {"hw:cpu_sockets": "8", "hw:cpu_cores": "2"}, {"hw_cpu_sockets": 2}, (2, 8, 1),
                 id="partial-image-preference"),
    pytest.param(16, {"hw:cpu_max_threads": "1"}, {}, (16, 1, 1), id="threads-limited"),
    pytest.param(16, {"hw:cpu_max_sockets": "8", "hw:cpu_max_cores": "8", "hw:cpu_max_threads": "1"},
                 {"hw_cpu_max_sockets": 4}, (4, 4, 1), id="image-limit-narrows-flavor"),
    # The image's limit rules the flavor's preference out: Nova forgets it, no error.
    pytest.param(16, {"hw:cpu_sockets": "2", "hw:cpu_cores": "8", "hw:cpu_threads": "1"},
                 {"hw_cpu_max_cores": 4}, (16, 1, 1), id="image-limit-drops-flavor-preference"),
    pytest.param(8, {"hw:cpu_max_sockets": "1"}, {}, (1, 8, 1), id="one-socket-many-cores"),
    pytest.param(8, {"hw:cpu_max_sockets": "1", "hw:cpu_max_cores": "2"}, {}, (1, 2, 4), id="threads-when-forced"),
    # A preference that no product meets is not an error: the best of the others.
    pytest.param(4, {"hw:cpu_sockets": "3"}, {}, (4, 1, 1), id="preference-not-a-divisor"),
    pytest.param(6, {"hw:cpu_cores": "3"}, {}, (2, 3, 1), id="preferred-cores"),
    pytest.param(4, {"hw:cpu_threads": "2"}, {}, (2, 1, 2), id="preferred-threads"),
]


@pytest.mark.parametrize("vcpus, extra_specs, properties, expected", BEST)
def test_best_topology(vcpus, extra_specs, properties, expected):
    topology = best_topology(vcpus, extra_specs, properties)
    assert triple(topology) == expected
    assert topology["sockets"] * topology["cores"] * topology["threads"] == vcpus


def test_possible_topologies_in_novas_order():
    assert [triple(t) for t in possible_topologies(4, {"sockets": 65536, "cores": 65536, "threads": 65536})] == [
        (4, 1, 1), (2, 2, 1), (1, 4, 1), (2, 1, 2), (1, 2, 2), (1, 1, 4)]
    assert [triple(t) for t in possible_topologies(6, {"sockets": 2, "cores": 2, "threads": 3})] == [(2, 1, 3), (1, 2, 3)]


def test_constraints_without_anything_said():
    preferred, maximum = topology_constraints({}, {})
    assert preferred == {"sockets": 0, "cores": 0, "threads": 0}
    assert maximum == {"sockets": 65536, "cores": 65536, "threads": 65536}


REFUSED = [
    pytest.param(4, {"hw:cpu_sockets": "two"}, {}, "flavor.extra_specs.hw:cpu_sockets", id="not-a-number"),
    pytest.param(4, {"hw:cpu_cores": "-1"}, {}, "flavor.extra_specs.hw:cpu_cores", id="negative"),
    pytest.param(4, {"hw:cpu_threads": "1.5"}, {}, "flavor.extra_specs.hw:cpu_threads", id="fraction"),
    pytest.param(4, {}, {"hw_cpu_sockets": True}, "image.properties.hw_cpu_sockets", id="boolean"),
    pytest.param(4, {"hw:cpu_max_sockets": "99999999"}, {}, "flavor.extra_specs.hw:cpu_max_sockets", id="absurd"),
    # The image may only lower the flavor's limits...
    pytest.param(8, {"hw:cpu_max_sockets": "2"}, {"hw_cpu_max_sockets": "4"}, "image.properties.hw_cpu_max_sockets",
                 id="image-limit-above-flavor-limit"),
    # ...and prefer within them.
    pytest.param(8, {"hw:cpu_max_sockets": "2"}, {"hw_cpu_sockets": "4"}, "image.properties.hw_cpu_sockets",
                 id="image-preference-above-limit"),
    # Limits whose products never reach the vCPU count.
    pytest.param(8, {"hw:cpu_max_sockets": "1", "hw:cpu_max_cores": "2", "hw:cpu_max_threads": "2"}, {},
                 "flavor.extra_specs.hw:cpu_max_sockets", id="limits-leave-no-topology"),
    pytest.param(8, {}, {"hw_cpu_max_sockets": "1", "hw_cpu_max_cores": "1", "hw_cpu_max_threads": "1"},
                 "image.properties.hw_cpu_max_sockets", id="image-limits-leave-no-topology"),
]


@pytest.mark.parametrize("vcpus, extra_specs, properties, field", REFUSED)
def test_contradictions_are_refused_naming_the_spec(vcpus, extra_specs, properties, field):
    with pytest.raises(InputError) as caught:
        best_topology(vcpus, extra_specs, properties)
    assert caught.value.field == field
    assert field in str(caught.value)
