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


def qcow2_header(backing_offset: int = 0, incompatible_features: int = 0, version: int = 3) -> bytes:
    """A qcow2 header as the spec lays it out (fields big-endian), padded to 104 bytes."""
    header = b"QFI\xfb" + version.to_bytes(4, "big") + backing_offset.to_bytes(8, "big")
    header += bytes(72 - len(header)) + incompatible_features.to_bytes(8, "big")
    return header + bytes(104 - len(header))


@pytest.mark.parametrize("content, fmt, field, message", [
    (qcow2_header(), "qcow2", None, None),
    (b"\0" * 64, "raw", None, None),
    (qcow2_header(backing_offset=512), "qcow2", "image.source", "names a backing file in its qcow2 header"),
    (qcow2_header(incompatible_features=4), "qcow2", "image.source", "keeps its data in an external file"),
    (qcow2_header(incompatible_features=4, version=2), "qcow2", None, None),  # version 2 has no such field
    (b"\0" * 64, "qcow2", "image.source", "is not a qcow2 file"),
    # The directory pool probes the content: declared raw, it would still be read as qcow2.
    (qcow2_header(backing_offset=512), "raw", "image.format", "is a qcow2 file, not raw"),
])
def test_an_upload_must_stand_alone(tmp_path, content, fmt, field, message):
    source = tmp_path / "image"
    source.write_bytes(content)
    image = {"name": "image", "format": fmt, "source": str(source)}
    if message is None:
        check_image_source(image, [str(tmp_path)], 8192)
        return
    with pytest.raises(InputError, match=message) as refused:
        check_image_source(image, [str(tmp_path)], 8192)
    assert refused.value.field == field


def test_an_upload_source_that_is_not_a_file_is_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="is not a readable file on the controller"):
        check_image_source({"name": "x", "format": "qcow2", "source": str(tmp_path / "dir")}, [str(tmp_path)], 8192)
