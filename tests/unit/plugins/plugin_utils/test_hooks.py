"""The hooks port: the default does nothing, install replaces it, and a build tells its points
in order and cleans up after a hook that fails it (as Berth's tests inject faults)."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name, seed_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils import _provisioning
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks

UUID = "0b6f1c2e-5d4a-4b3c-9e8f-7a6b5c4d3e2f"
POINTS = (hooks.BEFORE_CLAIM, hooks.AFTER_CLAIM, *hooks.BUILD_POINTS, hooks.AFTER_MOVE, hooks.BEFORE_RESIZE_START)


class Recorder(hooks.Hooks):
    """Records every point reached; raises HypervisorError at ``failing`` (a point), if given."""

    def __init__(self, failing: str | None = None) -> None:
        self.reached_points: list[tuple[str, str | None, str | None]] = []
        self.failing = failing

    def reached(self, point, host=None, instance=None):
        self.reached_points.append((point, host, instance))
        if point == self.failing:
            raise HypervisorError(host, f"injected fault at {point}")


@pytest.fixture
def restored():
    """The process's hooks as they were, whatever a test installs."""
    before = hooks.installed()
    yield
    hooks.install(before)


def test_the_points_are_distinct_and_the_build_points_in_build_order():
    assert len(set(POINTS)) == len(POINTS)
    assert hooks.BUILD_POINTS == ("after-root-volume", "after-seed-volume", "after-define", "after-start")


def test_no_hooks_is_installed_by_default_and_does_nothing():
    assert hooks.installed() is hooks.NO_HOOKS
    for point in POINTS:
        assert hooks.NO_HOOKS.reached(point, host="hv1", instance=UUID) is None


def test_install_makes_the_hooks_the_process_s(restored):
    recorder = Recorder()
    hooks.install(recorder)
    assert hooks.installed() is recorder
    hooks.install(hooks.NO_HOOKS)
    assert hooks.installed() is hooks.NO_HOOKS


class FakeHypervisor:
    """What make() calls, recorded; the pool's volumes and the defined domain kept as sets."""

    def __init__(self) -> None:
        self.volumes: set[str] = set()
        self.domains: set[str] = set()
        self.started: list[str] = []

    def create_volume(self, pool, name, capacity_gb, backing):
        self.volumes.add(name)

    def upload_volume(self, pool, name, reader, size_bytes, volume_format):
        self.volumes.add(name)

    def define(self, xml):
        self.domains.add(UUID)

    def start(self, uuid, autostart):
        self.started.append(uuid)

    def remove_domain(self, uuid):
        found = uuid in self.domains
        self.domains.discard(uuid)
        return found

    def delete_volume(self, pool, name):
        found = name in self.volumes
        self.volumes.discard(name)
        return found


class FakeSession:
    def __init__(self) -> None:
        self.hv, self.host = FakeHypervisor(), "hv1"


PLANNED = {"upload": None, "disk": {"capacity_gb": 1, "backing": None}, "seed": {"data": b"seed"},
           "ephemeral": None, "swap": None,
           "xml": "<domain/>"}


def test_a_build_tells_each_of_its_points_in_order():
    session, recorder = FakeSession(), Recorder()
    _provisioning.make(session, UUID, "default", PLANNED, autostart=False, upload_dirs=[], hooks=recorder)
    assert recorder.reached_points == [(point, "hv1", UUID) for point in hooks.BUILD_POINTS]
    assert session.hv.started == [UUID]


@pytest.mark.parametrize("point", [hooks.AFTER_ROOT_VOLUME, hooks.AFTER_DEFINE])
def test_a_hook_that_fails_a_build_leaves_nothing_behind(point):
    session = FakeSession()
    with pytest.raises(HypervisorError, match=f"hv1: injected fault at {point}"):
        _provisioning.make(session, UUID, "default", PLANNED, autostart=False, upload_dirs=[],
                           hooks=Recorder(failing=point))
    assert session.hv.started == [] and session.hv.domains == set()
    assert not session.hv.volumes & {root_volume_name(UUID), seed_volume_name(UUID)}
