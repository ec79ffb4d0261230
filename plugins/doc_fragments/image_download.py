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
  image_url_policy:
    description:
      - Where the controller may download images from by C(image.url). A launch requester (an AWX
        survey) chooses the URL; without this check it could make the controller fetch its own
        loopback services, a cloud's metadata and credentials service (C(169.254.169.254)) or the
        private networks it reaches, and hand the answer to a guest.
      - By default C(https) and C(http) to public addresses only. Not public, and refused unless
        listed in O(image_url_policy.networks) or O(image_url_policy.hosts) - loopback
        (C(127.0.0.0/8), C(::1)), C(0.0.0.0/8) and C(::), link-local (C(169.254.0.0/16),
        C(fe80::/10)), private (C(10.0.0.0/8), C(172.16.0.0/12), C(192.168.0.0/16),
        C(fc00::/7)), shared C(100.64.0.0/10), multicast, documentation, benchmarking and
        reserved ranges, IPv4-compatible C(::/96), 6to4 C(2002::/16), C(2001::/23), and IPv6
        outside C(2000::/3). An IPv4-mapped (C(::ffff:127.0.0.1)) or NAT64 (C(64:ff9b::/96))
        address counts as its IPv4 address.
      - The host is resolved once and every address it resolves to is checked (a decimal, octal
        or hexadecimal spelling of an IPv4 address is the address it means); the connection goes
        to an address that was checked, never to the name resolved again, with the URL's host
        still the one the TLS certificate is checked against. Each redirect is checked the same
        way before it is followed (10 at most). Proxies of the environment (C(https_proxy)...) are
        not used.
      - An image already in O(image_cache_dir) with its checksum is taken from there without
        connecting anywhere.
      - An operator's setting, as C(berth_image_url_policy) in the inventory or a job template;
        never a launch request's.
    type: dict
    suboptions:
      schemes:
        description: The URL schemes allowed; C([https]) refuses plain HTTP.
        type: list
        elements: str
        choices: [https, http]
        default: [https, http]
      networks:
        description:
          - IP networks (or single addresses) allowed, public or not, for example C(10.20.0.0/16)
            for an internal mirror, or C(127.0.0.1/32) for a lab's own server.
        type: list
        elements: str
      hosts:
        description:
          - Host names allowed whatever addresses they resolve to (compared without case and
            final dot; no wildcards). The name's DNS is then trusted as the operator's.
        type: list
        elements: str
      public:
        description: Allow public addresses. V(false) allows only O(image_url_policy.networks) and O(image_url_policy.hosts).
        type: bool
        default: true
"""
