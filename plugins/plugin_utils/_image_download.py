"""Images by URL: downloaded on the controller, checked against their checksum before anything is
claimed, and kept in a cache named by the checksum, so that a launch downloads an image at most
once and a later launch on the same controller not at all. Private to the collection.

The controller connects only where the operator's image_url_policy allows
(_image_url_policy.py), at the address that policy checked (_pinned_http.py). A download whose
checksum differs is refused without telling its digest: with it, a requester could have any
answer of an address the controller reaches kept in the cache by a second launch.

The hypervisors get the file as they get ``image.source``: uploaded through a libvirt stream
where their pool lacks the image (berth.fleet's _provisioning).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import check_image_source
from ansible_collections.berth.fleet.plugins.plugin_utils._image_url_policy import ImageUrlPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

_CHUNK_BYTES = 1024 * 1024
_BYTES_PER_MB = 1024 * 1024


def file_digest(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_image(image: Image | None, settings: Settings) -> Image | None:
    """``image`` with ``source`` set to a verified file of the cache when it has a ``url``, and
    ``downloaded`` saying whether this call fetched it; any other image unchanged. Raises
    InputError naming image.url or image.checksum when the download fails or its checksum
    differs, or when the operator's image_url_policy refuses an address it would connect to (a
    cached image connects to nothing); nothing is left in the cache then."""
    if image is None or not image.url:
        return image
    policy = ImageUrlPolicy.from_settings(settings.image_url_policy)
    algorithm, expected = image.digest
    cache_dir = settings.image_cache_dir
    cached = os.path.join(cache_dir, f"{algorithm}-{expected}")
    downloaded = False
    if not (os.path.isfile(cached) and file_digest(cached, algorithm) == expected):
        # Missing, or damaged since it was stored: fetched again.
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        _download(image, settings, policy, algorithm, expected, cached)
        downloaded = True
    fetched = dataclasses.replace(image, source=cached, downloaded=downloaded)
    try:
        check_image_source(fetched, [cache_dir], settings.image_max_mb)
    except InputError as exc:
        # The same refusals as an upload's (backing or data files in the qcow2 header, the wrong
        # format), told of the URL rather than of the cache's file.
        field = "image.url" if exc.field == "image.source" else exc.field
        raise InputError(field, f"image {image.name} from {image.url}: "
                         + str(exc).replace(f"image.source {cached}", "the download")) from exc
    return fetched


def _download(image: Image, settings: Settings, policy: ImageUrlPolicy, algorithm: str, expected: str,
              cached: str) -> None:
    """Stream ``image.url`` into ``cached``, hashing as it comes, within the size limit."""
    # Imported here, by the one launch in many that downloads: http.client (with its TLS
    # connection) costs every launch's controller a few milliseconds otherwise.
    import http.client

    from ansible_collections.berth.fleet.plugins.plugin_utils._pinned_http import get

    url, limit_bytes = image.url, settings.image_max_mb * _BYTES_PER_MB
    where = f"image {image.name} from {url}"
    handle, partial = tempfile.mkstemp(prefix=".download-", dir=os.path.dirname(cached))
    digest = hashlib.new(algorithm)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                with get(url, policy, settings.image_timeout, settings.image_validate_certs) as response:
                    length = response.getheader("Content-Length")
                    if length and length.isdigit() and int(length) > limit_bytes:
                        raise InputError("image.url", f"{where} is {int(length) // _BYTES_PER_MB} MB, more than "
                                         f"image_max_mb ({settings.image_max_mb})")
                    size_bytes = 0
                    for chunk in iter(lambda: response.read(_CHUNK_BYTES), b""):
                        size_bytes += len(chunk)
                        if size_bytes > limit_bytes:
                            raise InputError("image.url", f"{where} is larger than image_max_mb "
                                             f"({settings.image_max_mb})")
                        digest.update(chunk)
                        out.write(chunk)
            except InputError:
                raise
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise InputError("image.url", f"cannot download {where}: {exc}") from exc
        if digest.hexdigest() != expected:
            raise InputError("image.checksum", f"{where}: checksum mismatch, the download is not image.checksum "
                                               f"{algorithm}:{expected}; refused before anything was claimed")
        os.chmod(partial, 0o600)
        os.replace(partial, cached)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
