# The options of images from the controller (downloaded by URL, or uploaded from image.source) of
# berth.fleet.instance_request, berth.fleet.instance and berth.fleet.server
# (plugins/plugin_utils/_image_download.py, plugins/plugin_utils/_image_sources.py,
# plugins/module_utils/request.py); their argument specs derive from it.
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
    description:
      - Largest image a download may bring, in MiB; a larger one is refused (by its Content-Length, or as it arrives).
      - The same bound holds for a file uploaded from C(image.source).
    type: int
    default: 8192
  image_source_dirs:
    description:
      - The directories on the controller that C(image.source) files may be uploaded from, links
        resolved (a link in one of them to a file elsewhere is refused). None by default, so
        C(image.source) is refused until the operator names one; O(image_cache_dir) is always
        allowed, as Berth's own.
      - An operator's setting, as C(berth_image_source_dirs) in the inventory; a launch request
        (an AWX survey) chooses the file, never where files may come from.
      - An upload is streamed to each hypervisor that lacks the image in chunks of 4 MiB (the
        controller never holds the whole image), within the call timeout plus one second per
        5 MiB.
    type: list
    elements: path
    default: []
  image_validate_certs:
    description: Check the HTTPS server's certificate. Turn off only for a server you trust by other means.
    type: bool
    default: true
"""
