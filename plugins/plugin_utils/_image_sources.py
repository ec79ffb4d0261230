"""The files of the controller a launch may upload as its image (``image.source``): only from
the directories the operator allows, and only images that stand alone. Private to the
collection."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Image
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

_QCOW2_MAGIC = b"QFI\xfb"
# The qcow2 header fields read: magic, version, backing file offset, and (version 3) the
# incompatible features at bytes 72-79, whose bit 2 says the data lives in an external file.
_QCOW2_HEADER_BYTES = 104
_QCOW2_EXTERNAL_DATA_FILE = 1 << 2
_BYTES_PER_MIB = 1024 * 1024


def image_source_dirs(settings: Settings) -> list[str]:
    """The directories of the controller an ``image.source`` may be read from: the operator's
    ``image_source_dirs`` (none by default), and Berth's own cache of images by URL."""
    return [*settings.image_source_dirs, settings.image_cache_dir]


def open_image_source(source: str, allowed_dirs: Sequence[str]) -> BinaryIO:
    """The file ``image.source`` names, open for reading, if it is a regular file inside one of
    ``allowed_dirs`` once links are resolved; an InputError naming image.source otherwise.

    The launch requester chooses the path, the operator the directories: /etc/shadow is not an
    image. The place is checked before opening (a FIFO or device elsewhere is never opened) and
    again on the file actually opened (a link swapped in between leads nowhere else)."""
    allowed = [os.path.realpath(directory) for directory in allowed_dirs if directory]

    def refuse_outside(path: str) -> None:
        if not any(os.path.commonpath([path, directory]) == directory for directory in allowed):
            raise InputError("image.source", f"image.source {source} is not in a directory images may be uploaded "
                             f"from on the controller ({', '.join(allowed_dirs)}); the operator allows more with "
                             f"image_source_dirs (berth_image_source_dirs in the inventory)")

    refuse_outside(os.path.realpath(source))
    try:
        descriptor = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise InputError("image.source", f"image.source {source} is not a readable file on the controller "
                         f"({exc.strerror})") from exc
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise InputError("image.source", f"image.source {source} is not a readable file on the controller "
                             f"(not a regular file)")
        refuse_outside(os.path.realpath(f"/proc/self/fd/{descriptor}"))
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def check_image_source(image: Image | None, allowed_dirs: Sequence[str], max_mb: int) -> None:
    """An image to upload must be a file of at most ``max_mb`` MiB in one of ``allowed_dirs`` on
    the controller (open_image_source) and, as qcow2, stand alone: a backing file or an external
    data file named in its header would be opened on the hypervisor, outside the pool. A qcow2
    file declared raw is refused too: the pool reads the header anyway."""
    if not image or not image.source:
        return
    source = image.source
    with open_image_source(source, allowed_dirs) as handle:
        size_bytes = os.fstat(handle.fileno()).st_size
        header = handle.read(_QCOW2_HEADER_BYTES)
    if size_bytes > max_mb * _BYTES_PER_MIB:
        raise InputError("image.source", f"image.source {source} is {size_bytes // _BYTES_PER_MIB} MiB, more than "
                         f"image_max_mb ({max_mb})")
    is_qcow2 = header[:4] == _QCOW2_MAGIC
    if image.format != "qcow2":
        if is_qcow2:
            raise InputError("image.format", f"image.source {source} is a qcow2 file, not {image.format}: "
                             f"libvirt's pool would read it as qcow2 (set image.format to qcow2)")
        return
    if not is_qcow2:
        raise InputError("image.source", f"image.source {source} is not a qcow2 file (set image.format to "
                         f"raw if it is a raw disk)")
    if int.from_bytes(header[8:16], "big"):
        raise InputError("image.source", f"image.source {source} names a backing file in its qcow2 header; "
                         f"upload a standalone image (qemu-img convert -O qcow2)")
    version = int.from_bytes(header[4:8], "big")
    if version >= 3 and int.from_bytes(header[72:80], "big") & _QCOW2_EXTERNAL_DATA_FILE:
        raise InputError("image.source", f"image.source {source} keeps its data in an external file named in "
                         f"its qcow2 header; upload a standalone image (qemu-img convert -O qcow2)")
