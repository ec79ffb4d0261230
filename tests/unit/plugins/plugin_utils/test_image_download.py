"""Images by URL against a real HTTP(S) server on loopback (in this process): the checksum, the
cache, the size limit, certificate checks and the qcow2 header checks an upload gets."""

from __future__ import annotations

import hashlib
import http.server
import os
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
    """Serves ``files`` ({path: bytes}) on 127.0.0.1 and counts the requests per path."""

    def __init__(self, files, tls_dir=None, send_length=True):
        self.files, self.requests = files, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):  # noqa: N802 (http.server's name)
                outer.requests.append(self.path)
                body = outer.files.get(self.path)
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

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls_dir:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_dir / "cert.pem", tls_dir / "key.pem")
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.base = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def checksum(data, algorithm="sha256"):
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


def args(cache_dir, **over):
    return Settings(**{"image_cache_dir": str(cache_dir), "image_timeout": 10.0, "image_max_mb": 64,
                       "image_validate_certs": True, **over})


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
    assert checksum(QCOW2) in str(caught.value) and wrong in str(caught.value)
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


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(directory / "key.pem"),
                    "-out", str(directory / "cert.pem")], check=True, capture_output=True)
    return directory


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
