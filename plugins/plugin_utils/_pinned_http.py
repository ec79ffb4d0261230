"""A GET over HTTP or HTTPS that connects only where an ImageUrlPolicy allows, at the address it
checked: the image downloads' client (plugin_utils/_image_download.py). Private to the collection.

Python's and Ansible's URL openers resolve the host name again when they connect, and follow
redirects by themselves: a name that answers a public address to the check and a loopback one
to the connection (DNS rebinding), or a redirect to 169.254.169.254, would pass. Here the policy
resolves each URL once (ImageUrlPolicy.target), and the connection goes to one of the addresses
it checked; the URL's host name is still what the Host header, the TLS server name (SNI) and the
certificate's host name check take.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
from typing import Iterator
from urllib.parse import urljoin

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils._image_url_policy import DEFAULT_PORTS, ImageUrlPolicy, Target

REDIRECTS = (301, 302, 303, 307, 308)
# As many as Python's urllib follows.
MAX_REDIRECTS = 10


@contextlib.contextmanager
def get(url: str, policy: ImageUrlPolicy, timeout_s: float, validate_certs: bool) -> Iterator[http.client.HTTPResponse]:
    """The answer to a GET of ``url`` (status 200), redirects followed: each URL is checked by
    ``policy`` and connected to at an address it checked, before anything is sent. Environment
    proxies are not used: a proxy would resolve the name itself, past the check."""
    context = None
    for hops in range(MAX_REDIRECTS + 1):
        target = policy.target(url, redirected=hops > 0)
        if target.scheme == "https" and context is None:
            context = _tls_context(validate_certs)
        connection = _PinnedConnection(target, timeout_s, context if target.scheme == "https" else None)
        try:
            connection.request("GET", target.path, headers={"User-Agent": "berth.fleet",
                                                            "Accept-Encoding": "identity"})
            response = connection.getresponse()
            location = response.getheader("Location")
            if response.status in REDIRECTS and location:
                url = urljoin(url, location)
                continue
            if response.status != 200:
                raise http.client.HTTPException(f"HTTP {response.status} {response.reason}")
            yield response
            return
        finally:
            connection.close()
    raise InputError("image.url", f"image.url redirects more than {MAX_REDIRECTS} times")


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP, or HTTPS with ``context``, to the addresses of ``target`` the policy checked, never to
    its name resolved again; the Host header, the TLS server name and the certificate's host name
    check take the URL's host."""

    def __init__(self, target: Target, timeout_s: float, context: ssl.SSLContext | None) -> None:
        super().__init__(target.host, target.port, timeout=timeout_s)
        self._addresses, self._context = target.addresses, context
        if context is not None:
            self.default_port = DEFAULT_PORTS["https"]  # the Host header names no port for 443

    def connect(self) -> None:
        failure: OSError | None = None
        for family, address in self._addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(address)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            self.sock = self._context.wrap_socket(sock, server_hostname=self.host) if self._context else sock
            return
        raise failure or OSError("no address to connect to")


def _tls_context(validate_certs: bool) -> ssl.SSLContext:
    """The system's trusted CAs and host name check; or, where the operator turned
    image_validate_certs off, no check at all."""
    context = ssl.create_default_context()
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
