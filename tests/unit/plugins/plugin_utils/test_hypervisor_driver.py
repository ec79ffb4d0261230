"""The driver seam (module_utils/hypervisor_driver.py): libvirt's Hypervisor and the tests' fake
both have every member of HypervisorDriver, each method with the protocol's parameters (names,
kinds and defaults), and libvirt's takes every connection option Connect names. Here, beside the
fake, rather than under module_utils: the fake is what the operations' tests share."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
from fake_hypervisor import FakeHypervisor, connect_to

from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import (
    CONNECTION_OPTIONS,
    HypervisorDriver,
)
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor

CONNECTION_DUNDERS = ("__enter__", "__exit__")


def protocol_methods() -> list[str]:
    return sorted(name for name, value in vars(HypervisorDriver).items()
                  if inspect.isfunction(value) and (not name.startswith("_") or name in CONNECTION_DUNDERS))


def protocol_attributes() -> list[str]:
    return sorted(HypervisorDriver.__annotations__)


def parameters(function) -> list[tuple]:
    """Each parameter as a caller sees it: its name (but a * or ** catch-all's), kind and default."""
    return [(None if item.kind in (item.VAR_POSITIONAL, item.VAR_KEYWORD) else item.name, item.kind, item.default)
            for item in inspect.signature(function).parameters.values()]


DRIVERS = {"libvirt": lambda: Hypervisor("hv1", "test:///default"), "fake": lambda: FakeHypervisor("hv1")}


@pytest.mark.parametrize("make", DRIVERS.values(), ids=DRIVERS.keys())
@pytest.mark.parametrize("method", protocol_methods())
def test_a_driver_has_each_method_with_the_protocols_parameters(make, method):
    driver = make()
    assert callable(getattr(driver, method, None)), f"{type(driver).__name__} lacks {method}"
    expected = parameters(getattr(HypervisorDriver, method))
    assert parameters(getattr(type(driver), method)) == expected


@pytest.mark.parametrize("make", DRIVERS.values(), ids=DRIVERS.keys())
def test_a_driver_names_its_host_and_uri(make):
    driver = make()
    assert protocol_attributes() == ["host", "uri"]
    assert all(isinstance(getattr(driver, name, None), str) for name in protocol_attributes())


def test_libvirts_hypervisor_is_a_connect_taking_every_connection_option():
    accepted = inspect.signature(Hypervisor).parameters
    assert list(accepted)[:3] == ["host", "uri", "timeout_s"]
    assert set(CONNECTION_OPTIONS) <= set(accepted), set(CONNECTION_OPTIONS) - set(accepted)
    with connect_to(FakeHypervisor("hv1"))("hv1", "fake://hv1/system", 5, **dict.fromkeys(CONNECTION_OPTIONS)) as hv:
        assert hv.is_open and hv.connections[0]["timeout_s"] == 5


def test_the_protocol_imports_without_libvirt():
    code = ("import sys; sys.modules['libvirt'] = None; "
            "import ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver as driver; "
            "print(sorted(name for name in sys.modules if 'libvirt_host' in name))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": ":".join(sys.path)})
    assert done.stdout.strip() == "[]"
