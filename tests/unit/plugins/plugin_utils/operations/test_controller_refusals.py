"""A failure belongs to whoever caused it (issue 34, item 5): what the controller itself refuses -
its URI policy, the credentials it withholds, an image it cannot read, a guest CPU the request
cannot have - is never a host's failed build (BuildFailureWeigher weighs those at -1,000,000).
What can be found before the claim is: the launch fails once, with the reason, and claims
nothing. Through berth.fleet.server's operation, fake hypervisors (fake_hypervisor.py) and a real
SQLite ledger; the same through ansible-playbook on the lab fleet:
tests/integration/test_controller_refusals_lab.py."""

from __future__ import annotations

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, synced_state

from ansible_collections.berth.fleet.plugins.module_utils.errors import ControllerRefusal, HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ERROR, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, failed_on_host
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import Launch, check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.server import Server
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ARGS = {"name": "web", "count": 1, "state": "present", "shutdown_timeout": 60, "timeout": 30, "flavor": "m1.tiny"}
# What the lab's URIs need: Berth's default policy refuses socket=.
SOCKETS_ALLOWED = Settings(uri_policy={"allow_parameters": ["socket"]})
# The policy of the inventory source the hosts were gathered with (which records only the URIs
# it allows).
GATHER_POLICY = UriPolicy.from_settings({"allow_parameters": ["socket"], "allow_tcp": True})


def host(name: str, uri: str | None = None, memory_mb: int = 8192, **facts) -> dict:
    """A synced host state; ``memory_mb`` decides which host the RAM weigher prefers."""
    state = synced_state(name, f"uuid-{name}")
    state.update(total_usable_ram_mb=memory_mb, **facts)
    if uri is not None:
        state["uri"] = uri
    return state


@pytest.fixture
def fleet(tmp_path):
    """``fleet(*states)``: a real SQLite ledger synced with those host states, and a fake
    hypervisor for each."""
    opened = []

    def make(*states):
        ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open(create=True)
        opened.append(ledger)
        ledger.sync_hypervisors(list(states), GATHER_POLICY)
        return ledger, {state["host"]: FakeHypervisor(state["host"]) for state in states}

    yield make
    for ledger in opened:
        ledger.close()


def launch(ledger, hypervisors, settings=Settings(), connect=None, **args):
    return Server({**ARGS, **args}, settings, ledger, {}, DEFAULT_TEMPLATE, check_mode=False, diff=False,
                  connect=connect or connect_to(*hypervisors.values())).run()


def failed_builds(ledger) -> dict[str, int]:
    return {row["host"]: row["usage"]["failed_builds"] for row in ledger.hypervisors()}


def test_uris_the_policy_refuses_fail_the_launch_once_before_anything_is_claimed(fleet):
    # The lab's URIs, recorded by a gather whose inventory source allowed socket=; this launch
    # runs without that policy.
    ledger, hypervisors = fleet(*(host(name, uri=f"qemu+unix:///system?socket=/run/{name}/libvirt-sock")
                                  for name in ("hv1", "hv2", "hv3")))
    result = launch(ledger, hypervisors)
    assert result["failed"]
    assert result["msg"].startswith("nothing was claimed, and no host is charged a failed build: this controller "
                                    "refuses to build web-1 on hv")
    assert "its URI is refused by Berth's URI policy: parameter socket= picks the unix socket" in result["msg"]
    assert ledger.instances() == [] and ledger.claims() == []
    assert failed_builds(ledger) == {"hv1": 0, "hv2": 0, "hv3": 0}
    assert all(hv.connections == [] for hv in hypervisors.values())
    # Each host it was placed on refused, it decided again without it, until none was left.
    assert sorted(decision["outcome"] for decision in ledger.decisions("web")) == [
        "no_valid_host", "refused", "refused", "refused"]

    # The operator's policy that allows them: the same launch builds, so the policy was the cause.
    built = launch(ledger, hypervisors, settings=SOCKETS_ALLOWED)
    assert not built.get("failed"), built["msg"]
    assert [row["state"] for row in ledger.instances(["web-1"])] == ["ACTIVE"]


def test_a_refused_alternate_is_never_tried_nor_counted(fleet):
    ledger, hypervisors = fleet(host("hv1", memory_mb=16384), host("hv2", uri="qemu+tcp://hv2/system"),
                                host("hv3", memory_mb=4096))
    # hv1 is chosen and fails on the host; hv2 is refused by the controller; hv3 takes it.
    hypervisors["hv1"].faults["define"] = HypervisorError("hv1", "internal error: injected")
    result = launch(ledger, hypervisors)
    assert not result.get("failed"), result["msg"]
    [warning] = result["warnings"]
    assert warning.startswith("web-1 is not to be retried on hv2: its URI is refused by Berth's URI policy: qemu+tcp")
    [build] = result["results"]
    assert build["host"] == "hv3" and build["failed_attempts"] == ["hv1: internal error: injected"]
    assert hypervisors["hv2"].connections == []
    # Only the host's own failure counts.
    assert failed_builds(ledger) == {"hv1": 1, "hv2": 0, "hv3": 0}


@pytest.mark.parametrize(("error", "counted"), [
    (ControllerRefusal("hv1", "it asked for a login, and the libvirt credentials are only sent to ..."), 0),
    (HypervisorError("hv1", "unable to connect to server: Connection refused"), 1),
], ids=["credentials-withheld-by-the-controller", "host-does-not-answer"])
def test_a_refusal_met_on_connecting_is_the_controllers_and_a_host_failure_the_hosts(fleet, error, counted):
    ledger, hypervisors = fleet(host("hv1", memory_mb=16384), host("hv2"))
    reach = connect_to(*hypervisors.values())

    def connect(name, uri, timeout_s=10.0, **connection):
        if name == "hv1":
            raise error
        return reach(name, uri, timeout_s, **connection)

    result = launch(ledger, hypervisors, connect=connect)
    assert not result.get("failed"), result["msg"]
    [build] = result["results"]
    assert build["host"] == "hv2" and build["failed_attempts"] == [str(error)]
    assert failed_builds(ledger) == {"hv1": counted, "hv2": 0}


def test_an_image_the_controller_cannot_read_any_more_is_no_hosts_failed_build(fleet, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    disk = images / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    settings = Settings(image_source_dirs=(str(images),))
    ledger, hypervisors = fleet(host("hv1", memory_mb=16384), host("hv2"))
    request = check_request({"flavor": "m1.tiny", "image": {"name": "disk.raw", "source": str(disk), "format": "raw"}},
                            settings)
    disk.unlink()  # checked with the request, gone before the build reads it
    result = Launch(request, settings, ["web-1"], "web", ledger, {}, DEFAULT_TEMPLATE, check_mode=False, diff=False,
                    connect=connect_to(*hypervisors.values())).run()
    assert result["failed"] and "hv1: the controller cannot read image.source" in result["msg"]
    [row] = ledger.instances(["web-1"])
    assert row["state"] == ERROR
    assert failed_builds(ledger) == {"hv1": 0, "hv2": 0}


def test_a_guest_cpu_the_request_cannot_have_fails_the_launch_before_the_claim(fleet):
    # The operator's CPU settings of every host ask for host-passthrough, which plain QEMU
    # emulation (the only domain type these hosts offer) cannot give.
    passthrough = {"guest": {"settings": {"cpu_mode": "host-passthrough"},
                             "domain_capabilities": {"qemu": {"modes": {"host-passthrough": False}}}}}
    ledger, hypervisors = fleet(host("hv1", cpu_info=passthrough), host("hv2", cpu_info=passthrough))
    result = launch(ledger, hypervisors)
    assert result["failed"]
    assert "this controller refuses to build web-1 on hv" in result["msg"]
    assert "cpu_mode host-passthrough cannot run on hv" in result["msg"]
    assert ledger.instances() == [] and ledger.claims() == []
    assert failed_builds(ledger) == {"hv1": 0, "hv2": 0}
    assert all(hv.connections == [] for hv in hypervisors.values())


def test_a_host_whose_cpu_the_request_cannot_have_is_passed_over_before_the_claim(fleet):
    # hv1 (more memory: the RAM weigher's choice) asks for host-passthrough, which plain QEMU
    # emulation cannot give; hv2 takes QEMU's default model. The launch goes to hv2, and hv1 is
    # neither connected to nor charged.
    passthrough = {"guest": {"settings": {"cpu_mode": "host-passthrough"},
                             "domain_capabilities": {"qemu": {"modes": {"host-passthrough": False}}}}}
    ledger, hypervisors = fleet(host("hv1", memory_mb=16384, cpu_info=passthrough), host("hv2", memory_mb=4096))
    result = launch(ledger, hypervisors)
    assert not result.get("failed"), result["msg"]
    assert [(row["host"], row["state"]) for row in ledger.instances(["web-1"])] == [("hv2", "ACTIVE")]
    assert failed_builds(ledger) == {"hv1": 0, "hv2": 0}
    assert hypervisors["hv1"].connections == []
    assert sorted(decision["outcome"] for decision in ledger.decisions("web")) == ["claimed", "refused"]


@pytest.mark.parametrize(("error", "expected"), [
    (HypervisorError("hv1", "internal error"), True),
    (ControllerRefusal("hv1", "its URI is refused by Berth's URI policy: ..."), False),
    (ValueError("a bug of the controller's own"), False),
], ids=["libvirt-failed-on-the-host", "refused-by-the-controller", "not-a-host-failure"])
def test_only_a_failure_on_the_host_is_its_failed_build(error, expected):
    assert failed_on_host(error) is expected


def test_libvirt_s_connection_refuses_a_uri_as_the_controller_before_opening_it():
    # The one check of a URI wherever it is opened: raised as the controller's refusal, which the
    # sync and the inventories still skip as an unreachable host (a HypervisorError).
    with pytest.raises(ControllerRefusal, match="hv1: its URI is refused by Berth's URI policy: parameter socket="):
        Hypervisor("hv1", "qemu+unix:///system?socket=/run/hv1/libvirt-sock").__enter__()
    assert issubclass(ControllerRefusal, HypervisorError)
