"""A move whose source goes away once the domain runs on the destination (found by the soak,
benchmarks/soak.py): the move is done, the ledger follows the domain, and what the source kept is
recorded for the next tracker sync to remove. Fake hypervisors for the move, then the ledger on
a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import pytest
from test_ledger import TINY, host, placement

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils import _transfer
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import DOMAIN, VOLUME

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
ROOT = root_volume_name(UUID)


class FakeHypervisor:
    """A hypervisor's domains and pool volumes; once ``gone`` (its libvirtd stopped), every call
    that needs the daemon raises, except find_domain, which answers None as the real one does."""

    def __init__(self, host_name: str, domains=(), volumes=()):
        self.host, self.domains, self.volumes, self.gone = host_name, set(domains), set(volumes), False

    def _daemon(self):
        if self.gone:
            raise HypervisorError(self.host, "internal error: client socket is closed")

    def find_domain(self, uuid):
        return {"uuid": uuid, "state": "running"} if uuid in self.domains and not self.gone else None

    def can_live_migrate(self):
        return True

    def volume(self, pool, name, refresh=True):
        self._daemon()
        return ({"name": name, "backing": None, "link": False, "type": "file", "path": f"/pool/{name}"}
                if name in self.volumes else None)

    def create_volume_like(self, src, pool, name):
        self._daemon()
        self.volumes.add(name)

    def remove_domain(self, uuid):
        self._daemon()
        found = uuid in self.domains
        self.domains.discard(uuid)
        return found

    def delete_volume(self, pool, name):
        self._daemon()
        found = name in self.volumes
        self.volumes.discard(name)
        return found


def migrating(outcome):
    """live_migrate for the source: the domain arrives on the destination, then the source's
    libvirtd goes away - before the call returns (``raises``) or just after."""
    def live_migrate(self, uuid, dst, address, definition, shared_paths):
        dst.domains.add(uuid)
        self.domains.discard(uuid)
        self.gone = True
        if outcome == "raises":
            raise HypervisorError(self.host, "internal error: client socket is closed")
    return live_migrate


@pytest.mark.parametrize("outcome", ["raises", "returns"], ids=["call-fails-at-the-end", "source-gone-after"])
def test_a_live_move_whose_source_goes_away_at_the_end_is_done(monkeypatch, outcome):
    src, dst = FakeHypervisor("hv1", [UUID], [ROOT]), FakeHypervisor("hv2")
    monkeypatch.setattr(FakeHypervisor, "live_migrate", migrating(outcome), raising=False)
    moved = _transfer.move(src, dst, UUID, "web-1", "auto", "default", None, [ROOT], [ROOT])
    assert moved["mode"] == "live" and "client socket is closed" in moved["source_left"]
    # The destination keeps the only running copy; the source's volume is still there.
    assert dst.domains == {UUID} and dst.volumes == {ROOT} and src.volumes == {ROOT}


def test_a_live_move_with_both_hosts_up_leaves_nothing_on_the_source(monkeypatch):
    src, dst = FakeHypervisor("hv1", [UUID], [ROOT]), FakeHypervisor("hv2")

    def live_migrate(self, uuid, target, address, definition, shared_paths):
        target.domains.add(uuid)
        self.domains.discard(uuid)

    monkeypatch.setattr(FakeHypervisor, "live_migrate", live_migrate, raising=False)
    told = []

    class Recorder(hooks.Hooks):
        def reached(self, point, host=None, instance=None):
            # The point comes once the domain runs on the destination, with the source's copy still there.
            told.append((point, host, instance, set(dst.domains), set(src.volumes)))

    moved = _transfer.move(src, dst, UUID, "web-1", "auto", "default", None, [ROOT], [ROOT], hooks=Recorder())
    assert moved == {"mode": "live"}
    assert src.domains == set() and src.volumes == set() and dst.domains == {UUID}
    assert told == [(hooks.AFTER_MOVE, "hv1", UUID, {UUID}, {ROOT})]


def test_the_ledger_follows_the_domain_and_records_what_the_source_kept(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    instance = ledger.mark_active(row["uuid"])
    claim = ledger.claim_move(row["uuid"], "hv-2", "run")
    moved = {"mode": "live", "source_left": "hv1: internal error: client socket is closed"}

    after, warnings = _transfer.finish(ledger, instance, claim["id"], moved, "default", [root_volume_name(row["uuid"])])
    assert after["host"] == "hv2" and [c["hypervisor_uuid"] for c in ledger.claims(row["uuid"])] == ["hv-2"]
    assert warnings == ["web-1 moved, but its copy on hv1 could not be removed (hv1: internal error: client socket "
                        "is closed): recorded, the next gather.yml that reaches hv1 removes it"]
    assert sorted((a["host"], a["kind"], a["name"]) for a in ledger.artefacts(row["uuid"])) == [
        ("hv1", DOMAIN, "web-1"), ("hv1", VOLUME, root_volume_name(row["uuid"]))]
    # The next sync that reaches hv1 finds its old volume a leftover to remove.
    report = ledger.tracker_sync([{**host(), "storage_pool": "default",
                                   "instance_volumes": [root_volume_name(row["uuid"])]}])
    [group] = report["leftovers"]
    assert group["instance_name"] == "web-1" and not group["running"]
    assert report["orphan_volumes"] == []


def test_a_move_that_cleaned_up_its_source_records_nothing(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    instance = ledger.mark_active(row["uuid"])
    claim = ledger.claim_move(row["uuid"], "hv-2", "run")
    after, warnings = _transfer.finish(ledger, instance, claim["id"], {"mode": "live"}, "default", [])
    assert after["host"] == "hv2" and warnings == [] and ledger.artefacts() == []
