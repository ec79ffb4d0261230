"""Hypervisor.compare_cpu: libvirt's answer turned into "fits" (None), a reason naming the
features, NotSupported (nothing to compare with), or an error. The daemon's answers come from a
fake connection raising real libvirt errors; the libvirt test driver, which compares nothing,
is asked for real."""

from __future__ import annotations

import libvirt
import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, NotSupported
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor

CPU = "<cpu mode='custom' match='exact'><model>kvm64</model></cpu>"
LACKS = "the CPU is incompatible with host CPU: Host CPU does not provide required features: avx2"


def libvirt_error(code: int, message: str) -> libvirt.libvirtError:
    error = libvirt.libvirtError(message)
    error.err = (code, libvirt.VIR_FROM_CPU, message, 2, None, None, None, 0, 0)
    return error


class FakeConnection:
    """compareHypervisorCPU and compareCPU answering from ``answers`` (a value, or an error to
    raise), each call recorded with its flags."""

    def __init__(self, hypervisor_answer, host_answer=libvirt.VIR_CPU_COMPARE_IDENTICAL):
        self.answers = {"compareHypervisorCPU": hypervisor_answer, "compareCPU": host_answer}
        self.calls = []

    def _answer(self, name, *args):
        self.calls.append((name, *args))
        answer = self.answers[name]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def compareHypervisorCPU(self, emulator, arch, machine, virttype, xml, flags):  # noqa: N802 (libvirt's name)
        return self._answer("compareHypervisorCPU", emulator, arch, machine, virttype, flags)

    def compareCPU(self, xml, flags):  # noqa: N802 (libvirt's name)
        return self._answer("compareCPU", flags)


def hypervisor(conn) -> Hypervisor:
    hv = Hypervisor("hv2", "test:///default", timeout_s=5)
    hv.conn = conn
    return hv


FLAG = libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE


def test_a_guest_cpu_is_compared_with_what_the_hypervisor_gives_its_domain_type_naming_missing_features():
    conn = FakeConnection(libvirt_error(libvirt.VIR_ERR_CPU_INCOMPATIBLE, LACKS))
    assert hypervisor(conn).compare_cpu(CPU, "kvm", "x86_64") == LACKS
    # No emulator: a path from the source's XML would pick a program on the destination.
    assert conn.calls == [("compareHypervisorCPU", None, "x86_64", None, "kvm", FLAG)]


@pytest.mark.parametrize("answer", [libvirt.VIR_CPU_COMPARE_IDENTICAL, libvirt.VIR_CPU_COMPARE_SUPERSET])
def test_a_cpu_the_host_can_run_fits(answer):
    assert hypervisor(FakeConnection(answer)).compare_cpu(CPU, "kvm", "x86_64") is None


def test_a_daemon_without_the_hypervisor_comparison_is_asked_for_its_host_cpu():
    unsupported = libvirt_error(libvirt.VIR_ERR_NO_SUPPORT, "this function is not supported")
    conn = FakeConnection(unsupported, libvirt_error(libvirt.VIR_ERR_CPU_INCOMPATIBLE, LACKS))
    assert hypervisor(conn).compare_cpu(CPU, "kvm", "x86_64") == LACKS
    assert [call[0] for call in conn.calls] == ["compareHypervisorCPU", "compareCPU"]


def test_another_hosts_own_cpu_is_compared_with_this_hosts():
    conn = FakeConnection(AssertionError("not asked"), libvirt.VIR_CPU_COMPARE_SUPERSET)
    assert hypervisor(conn).compare_cpu("<cpu><arch>x86_64</arch><model>EPYC</model></cpu>", host_kind=True) is None
    assert conn.calls == [("compareCPU", FLAG)]


def test_an_incompatible_answer_without_the_error_still_refuses():
    assert hypervisor(FakeConnection(libvirt.VIR_CPU_COMPARE_INCOMPATIBLE)).compare_cpu(CPU, "kvm") == \
        "the CPU is incompatible with host CPU"


def test_any_other_libvirt_error_is_the_hosts_error():
    conn = FakeConnection(libvirt_error(libvirt.VIR_ERR_INTERNAL_ERROR, "internal error: Unknown CPU feature x"))
    with pytest.raises(HypervisorError, match="hv2: internal error: Unknown CPU feature x") as raised:
        hypervisor(conn).compare_cpu(CPU, "kvm")
    assert not isinstance(raised.value, NotSupported)


def test_the_libvirt_test_driver_compares_nothing():
    with Hypervisor("hv2", "test:///default", timeout_s=5) as hv:
        with pytest.raises(NotSupported, match="hv2: it cannot compare CPUs"):
            hv.compare_cpu(CPU, "kvm", "x86_64")
