# The documentation twin of DOWNLOAD_ARGS (plugins/plugin_utils/_image_download.py), for
# berth.fleet.instance_request and berth.fleet.instance.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  image_cache_dir:
    description:
      - Directory on the controller for images by C(image.url), each file named by its checksum
        (C(sha256-<hex>)). An image already there with the right checksum is not downloaded
        again; a damaged one is.
    type: path
    default: ~/.cache/berth/images
  image_timeout:
    description: Seconds the download's connection and each of its reads may take.
    type: float
    default: 60
  image_max_mb:
    description: Largest image a download may bring, in MiB; a larger one is refused (by its Content-Length, or as it arrives).
    type: int
    default: 8192
  image_validate_certs:
    description: Check the HTTPS server's certificate. Turn off only for a server you trust by other means.
    type: bool
    default: true
"""
