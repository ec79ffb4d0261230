"""Image sources come from directories the operator allows, and go to the pool in chunks within a
time limit that grows with their size (issue 22)."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.berth.fleet.plugins.module_utils import libvirt_host
from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import Image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import (
    check_image_source,
    image_source_dirs,
    open_image_source,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

RAW = b"\0" * 4096


@pytest.fixture
def allowed(tmp_path):
    directory = tmp_path / "images"
    directory.mkdir()
    (directory / "disk.raw").write_bytes(RAW)
    return directory


def raw(path):
    return Image("disk.raw", "raw", str(path))


def refused(image, dirs, max_mb=8192) -> str:
    with pytest.raises(InputError) as caught:
        check_image_source(image, [str(directory) for directory in dirs], max_mb)
    assert caught.value.field == "image.source"
    return str(caught.value)


def test_a_file_in_an_allowed_directory_is_taken(allowed, tmp_path):
    assert check_image_source(raw(allowed / "disk.raw"), [str(allowed)], 8192) is None
    # Taken because its directory is allowed: with another one allowed instead, it is refused.
    (tmp_path / "other").mkdir()
    refused(raw(allowed / "disk.raw"), [tmp_path / "other"])


def test_etc_shadow_is_refused_naming_the_field_and_the_setting(allowed):
    message = refused(raw("/etc/shadow"), [allowed])
    assert "/etc/shadow is not in a directory images may be uploaded from" in message
    assert "image_source_dirs" in message and "berth_image_source_dirs" in message


def test_nothing_is_allowed_by_default_but_berth_s_own_cache(tmp_path, allowed):
    cache = tmp_path / "cache"
    settings = Settings(image_cache_dir=str(cache))
    assert image_source_dirs(settings) == [str(cache)]
    refused(raw(allowed / "disk.raw"), image_source_dirs(settings))
    assert image_source_dirs(Settings(image_source_dirs=(str(allowed),), image_cache_dir=str(cache))) == [
        str(allowed), str(cache)]


@pytest.mark.parametrize("make", [
    pytest.param(lambda allowed, tmp_path: allowed / ".." / "outside.raw", id="dot-dot"),
    pytest.param(lambda allowed, tmp_path: _link(allowed / "link.raw", tmp_path / "outside.raw"), id="link-out"),
    pytest.param(lambda allowed, tmp_path: _link(allowed / "shadow.raw", "/etc/shadow"), id="link-to-shadow"),
    pytest.param(lambda allowed, tmp_path: tmp_path / "images-evil" / "disk.raw", id="prefix-sibling"),
])
def test_a_path_that_leads_out_of_the_allowed_directories_is_refused(allowed, tmp_path, make):
    (tmp_path / "outside.raw").write_bytes(RAW)
    (tmp_path / "images-evil").mkdir()
    (tmp_path / "images-evil" / "disk.raw").write_bytes(RAW)
    message = refused(raw(make(allowed, tmp_path)), [allowed])
    assert "is not in a directory images may be uploaded from" in message


def test_a_link_inside_an_allowed_directory_to_a_file_inside_is_taken(allowed):
    _link(allowed / "current.raw", allowed / "disk.raw")
    assert check_image_source(raw(allowed / "current.raw"), [str(allowed)], 8192) is None
    # What the link leads to is what is uploaded: the file inside.
    with open_image_source(str(allowed / "current.raw"), [str(allowed)]) as handle:
        assert os.path.realpath(f"/proc/self/fd/{handle.fileno()}") == str((allowed / "disk.raw").resolve())
        assert handle.read() == RAW


def test_a_fifo_or_device_is_refused_without_blocking(allowed):
    os.mkfifo(allowed / "pipe.raw")
    assert "not a regular file" in refused(raw(allowed / "pipe.raw"), [allowed])
    assert "not a regular file" in refused(raw("/dev/zero"), ["/dev"])


def test_an_image_over_image_max_mb_is_refused(allowed):
    with open(allowed / "big.raw", "wb") as big:
        big.truncate(2 * 1024 * 1024 + 1)  # sparse: 2 MiB and a byte
    check_image_source(raw(allowed / "big.raw"), [str(allowed)], 3)
    assert "more than image_max_mb (2)" in refused(raw(allowed / "big.raw"), [allowed], max_mb=2)


def test_the_file_opened_is_the_one_checked(allowed):
    with open_image_source(str(allowed / "disk.raw"), [str(allowed)]) as handle:
        assert handle.read() == RAW


def _link(link, target):
    os.symlink(target, link)
    return link


# ---- the upload: chunks, bounded memory, a time limit that grows with the size -------------------

class FakeStream:
    def __init__(self):
        self.sizes = []
        self.finished = self.aborted = False

    def send(self, data):
        self.sizes.append(len(data))
        return len(data)

    def finish(self):
        self.finished = True

    def abort(self):
        self.aborted = True


class FakeVolume:
    def __init__(self):
        self.deleted = False

    def upload(self, stream, offset, length, flags):
        self.length = length

    def delete(self, flags):
        self.deleted = True

    def path(self):
        return "/pool/disk.raw"


class FakePool:
    def __init__(self, volume):
        self.volume = volume

    def createXML(self, xml, flags):
        self.xml = xml
        return self.volume


class FakeConnection:
    def __init__(self):
        self.stream, self.volume = FakeStream(), FakeVolume()
        self.pool = FakePool(self.volume)

    def storagePoolLookupByName(self, name):
        return self.pool

    def newStream(self, flags):
        return self.stream


class CountingReader(io.RawIOBase):
    """Gives ``size`` bytes and remembers the largest read asked of it."""

    def __init__(self, size):
        self.left, self.largest = size, 0

    def readable(self):
        return True

    def read(self, count=-1):
        self.largest = max(self.largest, count)
        count = min(count, self.left)
        self.left -= count
        return b"\0" * count


def hypervisor():
    hv = Hypervisor("hv1", "test:///default", 10, bounded_by_caller=True)
    hv.conn = FakeConnection()
    return hv


def test_an_upload_is_sent_in_chunks_and_never_read_whole():
    hv = hypervisor()
    size = 10 * libvirt_host.UPLOAD_CHUNK_BYTES + 123
    reader = CountingReader(size)
    assert hv.upload_volume("default", "disk.raw", reader, size, "raw") == "/pool/disk.raw"
    stream = hv.conn.stream
    assert sum(stream.sizes) == size and max(stream.sizes) <= libvirt_host.UPLOAD_CHUNK_BYTES
    assert reader.largest <= libvirt_host.UPLOAD_CHUNK_BYTES and stream.finished
    assert str(size) in hv.conn.pool.xml


class PartialStream(FakeStream):
    """Takes at most ``most`` bytes a call, as libvirt's remote streams do, and keeps them."""

    def __init__(self, most):
        super().__init__()
        self.most, self.received = most, bytearray()

    def send(self, data):
        taken = bytes(data[:self.most])
        self.received += taken
        return len(taken)


def test_an_upload_taken_a_part_at_a_time_arrives_whole_and_in_order():
    hv = hypervisor()
    hv.conn.stream = PartialStream(most=100_000)
    source = os.urandom(3 * libvirt_host.UPLOAD_CHUNK_BYTES + 5)
    hv.upload_volume("default", "disk.raw", io.BytesIO(source), len(source), "raw")
    assert hv.conn.stream.received == source and hv.conn.stream.finished


def test_a_file_that_ends_early_fails_the_upload_and_removes_the_volume():
    hv = hypervisor()
    with pytest.raises(HypervisorError, match="ended 100 bytes short"):
        hv.upload_volume("default", "disk.raw", CountingReader(900), 1000, "raw")
    assert hv.conn.volume.deleted and hv.conn.stream.aborted


def test_the_time_limit_grows_with_the_size():
    hv = hypervisor()
    two_gib = 2 * 1024**3
    assert hv.upload_timeout_s(0) == 10
    assert hv.upload_timeout_s(two_gib) == 10 + two_gib / libvirt_host.UPLOAD_FLOOR_BYTES_PER_S
    assert hv.upload_timeout_s(two_gib) > 400


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
    image = Image("image", fmt, str(source))
    if message is None:
        check_image_source(image, [str(tmp_path)], 8192)
        return
    with pytest.raises(InputError, match=message) as refused:
        check_image_source(image, [str(tmp_path)], 8192)
    assert refused.value.field == field


def test_an_upload_source_that_is_not_a_file_is_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="is not a readable file on the controller"):
        check_image_source(Image("x", "qcow2", str(tmp_path / "dir")), [str(tmp_path)], 8192)
