"""A real headless browser for tests: Debian's Chromium, driven by Debian's chromedriver over the
W3C WebDriver protocol, which is plain HTTP and JSON, so the standard library is the whole
client (no browser or driver is downloaded, no Selenium).

    with Browser() as browser:
        browser.open(Path("fleet.html"))
        row = browser.find("#h0")
        browser.type_into(browser.find("#q"), "hv1")
        browser.screenshot(Path("page.png"))

Every process it starts (chromedriver, and the Chromium processes under it) is stopped by its
PID when the block ends; the browser profile is a new temporary directory, removed afterwards.
Chromium is told not to reach anything: no background networking, updates or sync, and every
host name resolves to nothing, so a page that tried to load something from outside would fail
to (the fleet report must not need to).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The W3C name of an element reference in WebDriver's JSON.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
]


class WebDriverError(AssertionError):
    pass


class Browser:
    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="berth-chromium-")
        self.driver: subprocess.Popen | None = None
        self.session = ""
        self.base = ""

    def __enter__(self) -> Browser:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for program in (CHROMIUM, CHROMEDRIVER):
            if not os.access(program, os.X_OK):
                raise WebDriverError(f"{program} is missing: scripts/setup installs chromium and chromium-driver")
        port = _free_port()
        self.base = f"http://127.0.0.1:{port}"
        log = open(os.path.join(self.profile, "chromedriver.log"), "w")  # noqa: SIM115 - closed with the process
        self.driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}", "--allowed-ips=127.0.0.1"],
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._call("GET", "/status", in_session=False)["ready"]:
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self.driver.poll() is not None:
                raise WebDriverError(f"chromedriver did not start: {self.log()}")
            time.sleep(0.1)
        options = {"binary": CHROMIUM, "args": [*CHROMIUM_ARGS, f"--user-data-dir={self.profile}/profile",
                                                f"--window-size={self.width},{self.height}"]}
        answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options, "pageLoadStrategy": "normal"}}},
            in_session=False)
        self.session = answer["sessionId"]

    def stop(self) -> None:
        """Close the session (chromedriver quits Chromium), then stop chromedriver and anything
        left under it, by PID."""
        if self.session:
            try:
                self._call("DELETE", "")
            except (OSError, WebDriverError):
                pass
            self.session = ""
        if self.driver is not None:
            left = _descendants(self.driver.pid)
            self.driver.terminate()
            try:
                self.driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.driver = None
        shutil.rmtree(self.profile, ignore_errors=True)

    def log(self) -> str:
        try:
            return Path(self.profile, "chromedriver.log").read_text()[-3000:]
        except OSError:
            return ""

    # ---- WebDriver commands --------------------------------------------------------------------

    def open(self, path: Path) -> None:
        self._call("POST", "/url", {"url": path.resolve().as_uri()})

    def find(self, css: str, within: str | None = None) -> str:
        prefix = f"/element/{within}" if within else ""
        return self._call("POST", f"{prefix}/element", {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css: str, within: str | None = None) -> list[str]:
        prefix = f"/element/{within}" if within else ""
        found = self._call("POST", f"{prefix}/elements", {"using": "css selector", "value": css})
        return [item[ELEMENT] for item in found]

    def text(self, element: str) -> str:
        """The element's text as rendered: what a person reads (hidden parts left out)."""
        return self._call("GET", f"/element/{element}/text")

    def displayed(self, element: str) -> bool:
        return self._call("GET", f"/element/{element}/displayed")

    def type_into(self, element: str, text: str) -> None:
        """Key presses into the element, as a person types them (input events included)."""
        self._call("POST", f"/element/{element}/value", {"text": text})

    def clear(self, element: str) -> None:
        self._call("POST", f"/element/{element}/clear")

    def click(self, element: str) -> None:
        self._call("POST", f"/element/{element}/click")

    def run(self, script: str, *args: Any) -> Any:
        """Run ``script`` in the page (a function body: ``arguments`` holds ``args``); its return value."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        """A PNG of the window; ``full_page`` makes the window as tall as the page first."""
        if full_page:
            height = self.run("return document.documentElement.scrollHeight;")
            self._call("POST", "/window/rect", {"width": self.width, "height": int(height) + 100})
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))
        if full_page:
            self._call("POST", "/window/rect", {"width": self.width, "height": self.height})

    def _call(self, method: str, command: str, body: dict | None = None, in_session: bool = True) -> Any:
        url = f"{self.base}/session/{self.session}{command}" if in_session else f"{self.base}{command}"
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read() or b"{}")
            value = answer.get("value") or {}
            raise WebDriverError(f"{method} {command}: {value.get('error')}: {value.get('message', '')[:500]}") from exc
        return answer.get("value")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid``, read from /proc (Chromium's helpers leave their session)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The command name may hold spaces or parentheses: the fields after the last ")".
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found
