"""A live migration's CPU check over several candidate destinations (issue 23), as Nova's
conductor does it: a destination that cannot run the guest's CPU, cannot be reached or fails the
comparison is passed over with its reason, the scheduler is asked again without it, up to
migrate_max_retries; with none left the move is refused naming each, before anything is claimed
(mode auto: a cold move to the first choice, saying why). The scheduler and the ledger are real
(SQLite); the comparator is a fake, table by table. Reading the guest's CPU from its domain XML is
pure and tested here too; the comparison through real libvirt is tests/integration/test_move_cpu.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import (
    BerthError,
    HypervisorError,
    InputError,
    NotSupported,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils import _transfer
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import CpuCheck, destination
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

MOVE_ARGS = {"mode": "live"}
# The moving run's operator settings: host states from the ledger, any age up to 600 s.
SETTINGS = Settings(service_down_time=600, source="ledger")
INCOMPATIBLE = "the CPU is incompatible with host CPU: Host CPU does not provide required features: avx2"


def hypervisor(index: int, ram_mb: int) -> dict:
    name = f"hv{index}"
    return {
        "host": name, "nodename": name, "uuid": f"hv-{index}", "uri": f"qemu+ssh://{name}/system", "service_up": True,
        "disabled": False, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": ram_mb, "free_ram_mb": 0,
        "total_usable_disk_gb": 200, "free_disk_mb": 0, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "kvm", "hvm"]], "availability_zone": None, "aggregates": [],
    }


@pytest.fixture
def placed(tmp_path):
    """web-1 on hv1; the scheduler (RAM weigher, spreading) ranks the others hv2, hv3, hv4, hv5."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    ledger.sync_hypervisors([hypervisor(1, 4096), *(hypervisor(index, 20480 - 2048 * index) for index in (2, 3, 4, 5))])
    tiny = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
    [row] = ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], tiny, "launch")
    ledger.mark_active(row["uuid"])
    [instance] = ledger.instances(["web-1"])
    yield ledger, instance
    ledger.close()


class TableScreen:
    """A fake CPU check: each host's answer from a table ({host: refusal or None}), every host
    asked recorded in order."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers, self.asked = answers, []

    def __call__(self, target):
        self.asked.append(target["host"])
        return self.answers.get(target["host"]), None


# (id, each host's answer, migrate_max_retries, the host chosen or None (refused), hosts asked)
TABLE = [
    ("first-fits", {}, -1, "hv2", ["hv2"]),
    ("incompatible-unreachable-then-fits", {"hv2": INCOMPATIBLE, "hv3": "cannot be reached to compare the CPU: down"},
     -1, "hv4", ["hv2", "hv3", "hv4"]),
    ("comparison-error-passed-over", {"hv2": "the CPU comparison failed: internal error: Unknown CPU feature x"},
     -1, "hv3", ["hv2", "hv3"]),
    ("all-incompatible", {host: INCOMPATIBLE for host in ("hv2", "hv3", "hv4", "hv5")}, -1, None,
     ["hv2", "hv3", "hv4", "hv5"]),
    ("no-retry", {"hv2": INCOMPATIBLE}, 0, None, ["hv2"]),
    ("one-retry-enough", {"hv2": INCOMPATIBLE}, 1, "hv3", ["hv2", "hv3"]),
    ("two-retries-exhausted", {host: INCOMPATIBLE for host in ("hv2", "hv3", "hv4")}, 2, None, ["hv2", "hv3", "hv4"]),
]


@pytest.mark.parametrize(("answers", "retries", "chosen", "asked"), [row[1:] for row in TABLE],
                         ids=[row[0] for row in TABLE])
def test_a_live_migration_passes_over_hosts_that_cannot_run_its_cpu(placed, answers, retries, chosen, asked):
    ledger, instance = placed
    screen = TableScreen(answers)
    settings = Settings(service_down_time=600, source="ledger", migrate_max_retries=retries)
    if chosen is None:
        with pytest.raises(BerthError) as refused:
            destination(MOVE_ARGS, settings, {}, ledger, instance, screen=screen)
        message = str(refused.value)
        assert message.startswith("cannot live-migrate web-1: no destination can run it live: ")
        for host in asked:
            assert f"{host}: {answers[host]}" in message
        ending = "migrate_max_retries" if retries >= 0 else "no other host: no valid host"
        assert ending in message
    else:
        target = destination(MOVE_ARGS, settings, {}, ledger, instance, screen=screen)
        assert target["host"] == chosen
        for host in asked[:-1]:
            assert f"{host} ({answers[host]})" in target["why"]
        assert ("passed over" in target["why"]) == (len(asked) > 1)
    assert screen.asked == asked
    # Nothing is claimed while destinations are looked for.
    assert [claim["hypervisor_uuid"] for claim in ledger.claims(instance["uuid"])] == ["hv-1"]


def test_mode_auto_with_no_host_that_runs_its_cpu_goes_cold_to_the_first_choice(placed):
    ledger, instance = placed
    screen = TableScreen({host: INCOMPATIBLE for host in ("hv2", "hv3", "hv4", "hv5")})
    target = destination({**MOVE_ARGS, "mode": "auto"}, SETTINGS, {}, ledger, instance, screen=screen)
    assert target["host"] == "hv2" and "refused" not in target
    assert target["live_refused"].startswith(f"no destination can run it live: hv2: {INCOMPATIBLE}; hv3: ")


def test_a_named_host_that_cannot_run_its_cpu_is_refused_not_replaced(placed):
    ledger, instance = placed
    screen = TableScreen({"hv3": INCOMPATIBLE})
    with pytest.raises(BerthError, match=f"cannot live-migrate web-1: no destination can run it live: hv3: {INCOMPATIBLE}$"):
        destination({**MOVE_ARGS, "to_host": "hv3"}, SETTINGS, {}, ledger, instance, screen=screen)
    assert screen.asked == ["hv3"]
    cold = destination({**MOVE_ARGS, "to_host": "hv3", "mode": "auto"}, SETTINGS, {}, ledger, instance, screen=screen)
    assert (cold["host"], cold["live_refused"]) == ("hv3", f"no destination can run it live: hv3: {INCOMPATIBLE}")
    assert destination({**MOVE_ARGS, "to_host": "hv4"}, SETTINGS, {}, ledger, instance, screen=screen)["host"] == "hv4"


def test_a_retry_bound_below_minus_one_is_refused_naming_the_option(placed):
    ledger, instance = placed
    with pytest.raises(InputError, match="migrate_max_retries must be -1 .no limit. or more, got -2"):
        destination(MOVE_ARGS, Settings(migrate_max_retries=-2), {}, ledger, instance, screen=TableScreen({}))


def test_a_resize_or_a_cold_move_has_no_screen_and_takes_the_first_choice(placed):
    ledger, instance = placed
    assert destination({**MOVE_ARGS, "mode": "cold"}, SETTINGS, {}, ledger, instance)["host"] == "hv2"


# ---- the guest's CPU, read from its domain XML ------------------------------------------------

def domain(domain_type: str, cpu: str = "") -> str:
    return (f"<domain type='{domain_type}'><name>g</name><os><type arch='x86_64' machine='pc'>hvm</type></os>"
            f"{cpu}<devices/></domain>")


RUNNING = ("<cpu mode='custom' match='exact' check='full'><model fallback='forbid'>kvm64</model>"
           "<vendor>AMD</vendor><feature policy='disable' name='avx2'/><feature policy='require' name='vme'/>"
           "<topology sockets='1' dies='1' cores='1' threads='1'/><numa><cell id='0' cpus='0' memory='1'/></numa>"
           "</cpu>")
ASKED_AVX2 = "<cpu mode='custom' match='exact' check='none'><model>kvm64</model><feature name='avx2'/></cpu>"


def test_a_guest_under_plain_qemu_emulation_is_not_compared():
    guest = _transfer.guest_cpu(domain("qemu", RUNNING), domain("qemu", ASKED_AVX2))
    assert guest.compared == () and "plain QEMU emulation (TCG)" in guest.not_compared


def test_the_running_cpu_is_compared_as_model_vendor_and_features_only():
    guest = _transfer.guest_cpu(domain("kvm", RUNNING), domain("kvm", "<cpu mode='host-model'/>"))
    assert (guest.domain_type, guest.arch, guest.not_compared, guest.host_cpu) == ("kvm", "x86_64", None, False)
    [(what, cpu_xml)] = guest.compared
    assert what == "its running CPU"
    cpu = ET.fromstring(cpu_xml)
    assert cpu.attrib == {"mode": "custom", "match": "exact"}
    assert [(child.tag, child.text, child.attrib) for child in cpu] == [
        ("model", "kvm64", {}), ("vendor", "AMD", {}), ("feature", None, {"policy": "disable", "name": "avx2"}),
        ("feature", None, {"policy": "require", "name": "vme"})]


def test_a_definition_that_asks_for_more_than_the_guest_got_is_compared_too():
    guest = _transfer.guest_cpu(domain("kvm", RUNNING), domain("kvm", ASKED_AVX2))
    assert [what for what, _xml in guest.compared] == ["its running CPU", "the CPU its definition asks for"]
    # The same model and features as it runs with: nothing more to compare.
    same = _transfer.guest_cpu(domain("kvm", RUNNING), domain("kvm", RUNNING))
    assert [what for what, _xml in same.compared] == ["its running CPU"]


@pytest.mark.parametrize("mode", ["host-passthrough", "maximum"])
def test_a_guest_with_the_hosts_own_cpu_is_compared_as_that_cpu(mode):
    guest = _transfer.guest_cpu(domain("kvm", f"<cpu mode='{mode}' check='none' migratable='on'/>"), None)
    assert guest.host_cpu and guest.compared == ()


def test_a_domain_without_a_cpu_model_has_nothing_to_compare():
    assert _transfer.guest_cpu(domain("kvm"), None).not_compared == "its domain describes no CPU model"


# ---- the CPU check against fake hypervisors ----------------------------------------------------

class FakeHost:
    """A hypervisor that answers compare_cpu from ``answer`` (a refusal, None, or an exception to
    raise) and records whether it was closed."""

    def __init__(self, host: str, answer=None, live: str = domain("kvm", RUNNING), defined: str | None = None):
        self.host, self.answer, self.live, self.defined, self.closed = host, answer, live, defined, False
        self.compared: list[tuple] = []

    def domain_xml(self, uuid, inactive=False):
        return self.defined if inactive else self.live

    def host_cpu_xml(self):
        return "<cpu><arch>x86_64</arch><model>EPYC</model></cpu>"

    def compare_cpu(self, cpu_xml, domain_type=None, arch=None, host_kind=False):
        self.compared.append((ET.fromstring(cpu_xml).findtext("model"), domain_type, arch, host_kind))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def __exit__(self, *_exc):
        self.closed = True


def check_with(source: FakeHost, hosts: dict[str, FakeHost | Exception]) -> CpuCheck:
    def open_host(target):
        found = hosts[target["host"]]
        if isinstance(found, Exception):
            raise found
        return found
    return CpuCheck(source, "uuid", open_host)


def test_the_cpu_check_asks_each_candidates_own_libvirt_and_keeps_the_accepted_connection():
    fits, lacks = FakeHost("hv3"), FakeHost("hv2", answer=INCOMPATIBLE)
    check = check_with(FakeHost("hv1"), {"hv2": lacks, "hv3": fits,
                                         "hv4": HypervisorError("hv4", "libvirt did not answer openAuth")})
    refusal, _note = check({"host": "hv2"})
    assert refusal == f"cannot run the guest's CPU, its running CPU: {INCOMPATIBLE}"
    assert lacks.compared == [("kvm64", "kvm", "x86_64", False)] and lacks.closed
    refusal, _note = check({"host": "hv4"})
    assert refusal == "cannot be reached to compare the CPU: hv4: libvirt did not answer openAuth"
    assert check({"host": "hv3"}) == (None, "its CPU can run the guest's")
    assert check.accepted is fits and not fits.closed


@pytest.mark.parametrize(("error", "refusal"), [
    (HypervisorError("hv2", "internal error: Unknown CPU feature x"),
     "the CPU comparison failed: hv2: internal error: Unknown CPU feature x"),
    (HypervisorError("hv2", "libvirt did not answer compareHypervisorCPU within 120 s"),
     "the CPU comparison failed: hv2: libvirt did not answer compareHypervisorCPU within 120 s"),
], ids=["libvirt-error", "timeout"])
def test_a_comparison_that_fails_otherwise_passes_the_host_over(error, refusal):
    host = FakeHost("hv2", answer=error)
    assert check_with(FakeHost("hv1"), {"hv2": host})({"host": "hv2"}) == (refusal, None)
    assert host.closed


def test_a_driver_that_cannot_compare_lets_the_migration_go_on_saying_so():
    host = FakeHost("hv2", answer=NotSupported("hv2", "it cannot compare CPUs: this function is not supported"))
    refusal, note = check_with(FakeHost("hv1"), {"hv2": host})({"host": "hv2"})
    assert refusal is None and note.startswith("CPU not compared: hv2: it cannot compare CPUs")


def test_a_tcg_guest_is_not_compared_and_no_host_is_contacted():
    check = check_with(FakeHost("hv1", live=domain("qemu", RUNNING)), {})
    refusal, note = check({"host": "hv2"})
    assert refusal is None and note.startswith("CPU not compared: it runs under plain QEMU emulation (TCG)")


def test_a_host_passthrough_guest_needs_the_source_hosts_cpu():
    lacks = FakeHost("hv2", answer=INCOMPATIBLE)
    check = check_with(FakeHost("hv1", live=domain("kvm", "<cpu mode='host-passthrough'/>")), {"hv2": lacks})
    refusal, _note = check({"host": "hv2"})
    assert refusal == f"cannot run the guest's CPU, its host-passthrough CPU (the CPU of hv1): {INCOMPATIBLE}"
    assert lacks.compared == [("EPYC", None, None, True)]
