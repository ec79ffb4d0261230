"""Images by URL against a real HTTP(S) server on loopback (in this process): the checksum, the
cache, the size limit, certificate checks and the qcow2 header checks an upload gets; and the
operator's image_url_policy, which must allow the loopback server (``LOCAL``) for any of it."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import ssl
import subprocess
import threading

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_download import fetch_image
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

QCOW2 = b"QFI\xfb" + (3).to_bytes(4, "big") + bytes(96) + b"rest of a small qcow2 image" * 100


class Server:
    """Serves ``files`` ({path: bytes, or a URL string to redirect to}) on ``address`` (127.0.0.1)
    and records each request's path and Host header."""

    def __init__(self, files, tls_dir=None, send_length=True, address="127.0.0.1"):
        self.files, self.requests, self.hosts = files, [], []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):  # noqa: N802 (http.server's name)
                outer.requests.append(self.path)
                outer.hosts.append(self.headers.get("Host"))
                body = outer.files.get(self.path)
                if isinstance(body, str):
                    self.send_response(302)
                    self.send_header("Location", body)
                    self.end_headers()
                    return
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                if send_length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer((address, 0), Handler)
        scheme = "http"
        if tls_dir:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_dir / "cert.pem", tls_dir / "key.pem")
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.port = self.httpd.server_address[1]
        self.base = f"{scheme}://{address}:{self.port}"
        # Polled often, so that shutting it down takes no half second.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def checksum(data, algorithm="sha256"):
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


# The operator's setting that lets the controller download from the tests' own servers.
LOCAL = {"networks": ["127.0.0.1/32"]}
METADATA = b'{"AccessKeyId": "ASIA...", "SecretAccessKey": "the controller\'s cloud credentials"}'
# A name of the tests' own, which the fake resolver below answers.
NAME = "images.example.test"


def args(cache_dir, **over):
    return Settings(**{"image_cache_dir": str(cache_dir), "image_timeout": 10.0, "image_max_mb": 64,
                       "image_validate_certs": True, "image_url_policy": LOCAL, **over})


def image(server, path, sum_, name="cloud.qcow2", fmt="qcow2"):
    return Image.from_option({"name": name, "format": fmt, "url": server.base + path, "checksum": sum_})


def test_downloaded_once_then_taken_from_the_cache_without_a_request(tmp_path):
    with Server({"/cloud.qcow2": QCOW2}) as server:
        first = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
        second = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
    assert server.requests == ["/cloud.qcow2"]
    assert first.downloaded and not second.downloaded
    assert first.source == second.source == str(tmp_path / f"sha256-{hashlib.sha256(QCOW2).hexdigest()}")
    with open(first.source, "rb") as handle:
        assert handle.read() == QCOW2
    assert oct(os.stat(first.source).st_mode & 0o777) == "0o600"


def test_a_damaged_cache_entry_is_downloaded_again(tmp_path):
    with Server({"/cloud.qcow2": QCOW2}) as server:
        fetched = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
        with open(fetched.source, "ab") as handle:
            handle.write(b"bit rot")
        repaired = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
    assert repaired.downloaded and len(server.requests) == 2
    with open(repaired.source, "rb") as handle:
        assert handle.read() == QCOW2


def test_a_wrong_checksum_is_refused_and_leaves_nothing_in_the_cache(tmp_path):
    wrong = checksum(b"another image")
    with Server({"/cloud.qcow2": QCOW2}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/cloud.qcow2", wrong), args(tmp_path))
    assert caught.value.field == "image.checksum"
    assert "checksum mismatch" in str(caught.value) and wrong in str(caught.value)
    # What the server answered is never told by its digest: a second launch giving that digest
    # would keep the answer in the cache, an upload source.
    assert checksum(QCOW2).split(":")[1] not in str(caught.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("send_length", [True, False], ids=["content-length", "no-content-length"])
def test_an_image_over_the_size_limit_is_refused(tmp_path, send_length):
    big = QCOW2 + bytes(2 * 1024 * 1024)
    with Server({"/big.qcow2": big}, send_length=send_length) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/big.qcow2", checksum(big)), args(tmp_path, image_max_mb=1))
    assert caught.value.field == "image.url" and "image_max_mb (1)" in str(caught.value)
    assert os.listdir(tmp_path) == []


def test_a_missing_file_names_the_url(tmp_path):
    with Server({}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/gone.qcow2", checksum(QCOW2)), args(tmp_path))
    assert caught.value.field == "image.url" and "404" in str(caught.value)


def test_nothing_listening_is_an_error_naming_the_url(tmp_path):
    with Server({}) as server:
        dead = image(server, "/x.qcow2", checksum(QCOW2))
    with pytest.raises(InputError) as caught:
        fetch_image(dead, args(tmp_path, image_timeout=2.0))
    assert caught.value.field == "image.url"


@pytest.mark.parametrize("header, fmt, message", [
    (b"QFI\xfb" + (3).to_bytes(4, "big") + (104).to_bytes(8, "big") + bytes(88), "qcow2", "backing file"),
    (b"QFI\xfb" + (3).to_bytes(4, "big") + bytes(64) + (4).to_bytes(8, "big") + bytes(24), "qcow2", "external file"),
    (QCOW2, "raw", "is a qcow2 file, not raw"),
    (b"plain raw bytes" * 10, "qcow2", "is not a qcow2 file"),
], ids=["backing-file", "data-file", "qcow2-as-raw", "raw-as-qcow2"])
def test_the_upload_checks_apply_to_a_download_and_name_the_url(tmp_path, header, fmt, message):
    with Server({"/x": header}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/x", checksum(header), fmt=fmt), args(tmp_path))
    assert message in str(caught.value)
    assert server.base + "/x" in str(caught.value) and str(tmp_path) not in str(caught.value)


def certificate(directory, name):
    """A self-signed certificate for ``name`` (subjectAltName, as IP:... or DNS:...) in ``directory``."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=berth-test",
                    "-addext", f"subjectAltName={name}", "-keyout", str(directory / "key.pem"),
                    "-out", str(directory / "cert.pem")], check=True, capture_output=True)
    return directory


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    return certificate(tmp_path_factory.mktemp("tls"), "IP:127.0.0.1")


@pytest.fixture(scope="module")
def named_certificate(tmp_path_factory):
    return certificate(tmp_path_factory.mktemp("tls-named"), f"DNS:{NAME}")


def test_https_certificates_are_checked_unless_turned_off(tmp_path, self_signed):
    with Server({"/cloud.qcow2": QCOW2}, tls_dir=self_signed) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
        assert caught.value.field == "image.url" and "certificate" in str(caught.value).lower()
        assert os.listdir(tmp_path) == []
        fetched = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)),
                              args(tmp_path, image_validate_certs=False))
    assert fetched.downloaded


def test_images_without_url_pass_through_untouched(tmp_path):
    plain = Image.from_option({"name": "base.qcow2"})
    assert fetch_image(plain, args(tmp_path)) is plain and fetch_image(None, args(tmp_path)) is None
    assert os.listdir(tmp_path) == []


# ---- the operator's image_url_policy -------------------------------------------------------------

@pytest.fixture
def resolver(monkeypatch):
    """socket.getaddrinfo answering NAME with the addresses of ``answers`` in turn (the last one
    again once they run out), as a DNS server whose answer changes would; other names as the real
    resolver does. ``asked`` counts the questions for NAME."""
    real = socket.getaddrinfo

    class Resolver:
        answers = [["127.0.0.1"]]
        asked = 0

        def __call__(self, host, port, *rest, **kwargs):
            if host != NAME:
                return real(host, port, *rest, **kwargs)
            addresses = self.answers[min(self.asked, len(self.answers) - 1)]
            self.asked += 1
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))
                    for address in addresses]

    fake = Resolver()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def test_by_default_the_controller_s_loopback_is_refused_before_anything_is_fetched(tmp_path):
    """The issue's attack: a "metadata" document on the controller's loopback. Without the
    operator's policy nothing is requested, nothing is kept, and no digest of it is told."""
    with Server({"/latest/meta-data": METADATA}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/latest/meta-data", checksum(b"x"), fmt="raw"),
                        args(tmp_path, image_url_policy=None))
    assert caught.value.field == "image.url"
    assert "loopback address" in str(caught.value) and "berth_image_url_policy" in str(caught.value)
    assert server.requests == [] and os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["127.0.0.2", NAME, "169.254.169.254", "[::ffff:127.0.0.2]", "2130706434"],
                         ids=["loopback-address", "name-of-loopback", "metadata-service", "ipv4-mapped", "decimal"])
def test_a_redirect_from_an_allowed_server_to_a_refused_address_is_not_followed(tmp_path, resolver, where):
    resolver.answers = [["127.0.0.2"]]
    with Server({"/metadata": METADATA}, address="127.0.0.2") as hidden:
        target = f"http://{where}:{hidden.port}/metadata"
        with Server({"/cloud.qcow2": target}) as allowed:
            with pytest.raises(InputError) as caught:
                fetch_image(image(allowed, "/cloud.qcow2", checksum(METADATA), fmt="raw"), args(tmp_path))
    assert caught.value.field == "image.url" and str(caught.value).startswith("image.url redirects to ")
    assert allowed.requests == ["/cloud.qcow2"] and hidden.requests == []
    assert os.listdir(tmp_path) == []


def test_a_redirect_to_an_allowed_address_is_followed(tmp_path):
    with Server({"/latest": "/cloud.qcow2", "/cloud.qcow2": QCOW2}) as server:
        fetched = fetch_image(image(server, "/latest", checksum(QCOW2)), args(tmp_path))
    assert fetched.downloaded and server.requests == ["/latest", "/cloud.qcow2"]


def test_redirects_end(tmp_path):
    with Server({"/loop": "/loop"}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/loop", checksum(QCOW2)), args(tmp_path))
    assert caught.value.field == "image.url" and "more than 10 times" in str(caught.value)
    assert len(server.requests) == 11


def test_the_connection_goes_to_the_address_checked_never_to_the_name_resolved_again(tmp_path, resolver):
    """DNS rebinding: the name answers an allowed address to the check, then another one. The
    download goes to the first, asks once, and still sends the name as its Host."""
    resolver.answers = [["127.0.0.1"], ["127.0.0.2"]]
    with Server({"/cloud.qcow2": QCOW2}) as server:
        url = f"http://{NAME}:{server.port}/cloud.qcow2"
        fetched = fetch_image(Image.from_option({"name": "c.qcow2", "format": "qcow2", "url": url,
                                                 "checksum": checksum(QCOW2)}), args(tmp_path))
    assert fetched.downloaded and resolver.asked == 1
    assert server.hosts == [f"{NAME}:{server.port}"]


def test_a_name_that_resolves_to_a_refused_address_among_others_is_refused(tmp_path, resolver):
    resolver.answers = [["127.0.0.1", "169.254.169.254"]]
    with Server({"/cloud.qcow2": QCOW2}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(Image.from_option({"name": "c.qcow2", "url": f"http://{NAME}:{server.port}/cloud.qcow2",
                                           "checksum": checksum(QCOW2)}), args(tmp_path))
    assert f"{NAME}, which resolves to a link-local address" in str(caught.value)
    assert "169.254" not in str(caught.value)  # the operator's network is not told to the requester
    assert server.requests == []


def test_a_host_the_operator_names_is_allowed_whatever_it_resolves_to(tmp_path, resolver):
    with Server({"/cloud.qcow2": QCOW2}) as server:
        fetched = fetch_image(Image.from_option({"name": "c.qcow2", "url": f"http://{NAME}:{server.port}/cloud.qcow2",
                                                 "checksum": checksum(QCOW2)}),
                              args(tmp_path, image_url_policy={"hosts": [NAME.upper() + "."]}))
    assert fetched.downloaded


def test_https_to_a_pinned_address_checks_the_certificate_against_the_url_s_host(
        tmp_path, resolver, named_certificate, self_signed, monkeypatch):
    """The connection goes to the checked address; TLS still names and checks the URL's host: a
    certificate the controller trusts for that name passes, one for another name does not."""
    monkeypatch.setenv("SSL_CERT_FILE", str(named_certificate / "cert.pem"))  # the controller's trusted CA
    with Server({"/cloud.qcow2": QCOW2}, tls_dir=named_certificate) as server:
        url = f"https://{NAME}:{server.port}/cloud.qcow2"
        fetched = fetch_image(Image.from_option({"name": "c.qcow2", "url": url, "checksum": checksum(QCOW2)}),
                              args(tmp_path / "a"))
    assert fetched.downloaded and server.hosts == [f"{NAME}:{server.port}"]
    # A server whose certificate is for 127.0.0.1 (the address connected to), not for the name.
    monkeypatch.setenv("SSL_CERT_FILE", str(self_signed / "cert.pem"))
    with Server({"/cloud.qcow2": QCOW2}, tls_dir=self_signed) as server:
        url = f"https://{NAME}:{server.port}/cloud.qcow2"
        with pytest.raises(InputError) as caught:
            fetch_image(Image.from_option({"name": "c.qcow2", "url": url, "checksum": checksum(QCOW2)}),
                        args(tmp_path / "b"))
    assert caught.value.field == "image.url" and "certificate" in str(caught.value).lower()
    assert NAME in str(caught.value).split("certificate", 1)[1], str(caught.value)  # the host name did not match


def test_an_image_in_the_cache_connects_to_nothing_so_no_policy_is_asked(tmp_path):
    with Server({"/cloud.qcow2": QCOW2}) as server:
        fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path))
        again = fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)), args(tmp_path, image_url_policy=None))
    assert not again.downloaded and server.requests == ["/cloud.qcow2"]


def test_the_policy_setting_is_checked_naming_its_field(tmp_path):
    with Server({"/cloud.qcow2": QCOW2}) as server:
        with pytest.raises(InputError) as caught:
            fetch_image(image(server, "/cloud.qcow2", checksum(QCOW2)),
                        args(tmp_path, image_url_policy={"networks": ["127.0.0.1/33"]}))
    assert caught.value.field == "image_url_policy.networks" and server.requests == []
