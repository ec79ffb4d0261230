"""A pool's image is refused unless it and every backing file under it are plain files of the pool."""

from __future__ import annotations

import re

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.pool_images import pool_image


class Pool:
    """Volumes as Hypervisor.volume() reports them, for walking backing chains."""

    def __init__(self, **backing):
        self.backing = backing  # volume name -> its backing path (None: standalone)

    def volume(self, _pool, name, _refresh=True):
        if name not in self.backing:
            return None
        return {"name": name, "path": f"/pool/{name}", "type": "file", "link": False, "backing": self.backing[name]}


def test_a_chain_inside_the_pool_gives_the_top_image():
    pool = Pool(top="/pool/mid", mid="base", base=None)
    assert pool_image(pool, "default", "top", "hv1")["path"] == "/pool/top"
    assert pool_image(pool, "default", "absent", "hv1") is None


@pytest.mark.parametrize("backing, message", [
    ("/etc/shadow", "image top in storage pool default on hv1 is backed by /etc/shadow, outside the pool"),
    ("../etc/shadow", "is backed by ../etc/shadow, outside the pool"),
    ("/pool/sub/x", "outside the pool"),
    ("/pool/gone", "is backed by gone, which is not a volume of the pool"),
])
def test_a_backing_file_outside_the_pool_is_refused(backing, message):
    with pytest.raises(InputError, match=re.escape(message)) as refused:
        pool_image(Pool(top=backing), "default", "top", "hv1")
    assert refused.value.field == "image"


def test_a_backing_chain_that_loops_is_refused():
    with pytest.raises(InputError, match="backing chain deeper than"):
        pool_image(Pool(a="/pool/b", b="/pool/a"), "default", "a", "hv1")
