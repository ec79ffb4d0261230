from __future__ import annotations

import re

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    check_image_source,
    instance_names,
    pool_image,
    resolve_flavor,
)

FLAVORS = {"m1.tiny": {"vcpus": 1, "memory_mb": 512, "root_gb": 1}}


def test_names_are_indexed_from_one():
    assert instance_names("web", 3) == ["web-1", "web-2", "web-3"]
    assert instance_names("db", 1) == ["db-1"]


@pytest.mark.parametrize(
    "name, count, field",
    [
        ("Web", 1, "name"),
        ("web_1", 1, "name"),
        ("-web", 1, "name"),
        ("a" * 62, 1, "name"),  # a-61 would be 64 characters with "-1"
        ("we<b", 1, "name"),
        ("web", 0, "count"),
        ("web", -2, "count"),
        ("web", 1001, "count"),
        ("web", "3", "count"),
        ("web", True, "count"),
    ],
    ids=["upper", "underscore", "leading-dash", "too-long", "angle", "zero", "negative", "absurd", "string", "bool"],
)
def test_bad_names_and_counts_name_the_field(name, count, field):
    with pytest.raises(InputError) as info:
        instance_names(name, count)
    assert info.value.field == field
    assert field in str(info.value)


def test_flavor_by_name_and_inline():
    assert resolve_flavor("m1.tiny", FLAVORS).memory_mb == 512
    inline = resolve_flavor({"name": "custom", "vcpus": 2, "memory_mb": 1024, "root_gb": 5}, FLAVORS)
    assert (inline.name, inline.vcpus, inline.requested_disk_mb) == ("custom", 2, 5 * 1024)


def test_unknown_flavor_lists_the_known_ones():
    with pytest.raises(InputError, match=r"unknown flavor 'm1\.huge' \(known flavors: m1\.tiny\)"):
        resolve_flavor("m1.huge", FLAVORS)


@pytest.mark.parametrize("memory_mb", [0, -512, 1.5, "512", None], ids=["zero", "negative", "fraction", "string", "none"])
def test_inline_flavor_sizes_are_checked(memory_mb):
    with pytest.raises(InputError) as info:
        resolve_flavor({"vcpus": 1, "memory_mb": memory_mb, "root_gb": 1}, FLAVORS)
    assert info.value.field == "flavor.memory_mb"


class Pool:
    """Volumes as Hypervisor.volume() reports them, for walking backing chains."""

    def __init__(self, **backing):
        self.backing = backing  # volume name -> its backing path (None: standalone)

    def volume(self, _pool, name):
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


def qcow2_header(backing_offset: int) -> bytes:
    return b"QFI\xfb" + (3).to_bytes(4, "big") + backing_offset.to_bytes(8, "big") + bytes(8)


@pytest.mark.parametrize("content, fmt, message", [
    (qcow2_header(0), "qcow2", None),
    (qcow2_header(512), "qcow2", "names a backing file in its qcow2 header"),
    (b"\0" * 64, "qcow2", "is not a qcow2 file"),
    (qcow2_header(512), "raw", None),  # read as raw, its header means nothing to QEMU
])
def test_an_upload_must_stand_alone(tmp_path, content, fmt, message):
    source = tmp_path / "image"
    source.write_bytes(content)
    image = {"name": "image", "format": fmt, "source": str(source)}
    if message is None:
        check_image_source(image)
        return
    with pytest.raises(InputError, match=message) as refused:
        check_image_source(image)
    assert refused.value.field == "image.source"


def test_an_upload_source_that_is_not_a_file_is_refused(tmp_path):
    with pytest.raises(InputError, match="is not a readable file on the controller"):
        check_image_source({"name": "x", "format": "qcow2", "source": str(tmp_path)})
