"""Headless Chromium for the tests and the benchmark, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: NUL-separated JSON messages on file descriptors 3 and 4), so no
WebDriver, no websocket library and no port is needed — only Debian's ``chromium`` package.

    with Browser() as browser:
        page = browser.open(path)             # waits for the load event
        page.evaluate("document.title")
        page.errors                           # console errors, uncaught exceptions, failed loads

``find_chromium()`` is None where no Chromium is installed; the browser tests then skip loudly.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars", "--mute-audio", "--force-color-profile=srgb",
         "--remote-debugging-pipe")


def find_chromium() -> str | None:
    """The Chromium executable: $RAGEVAL_CHROMIUM, else the first of CANDIDATES on PATH."""
    named = os.environ.get("RAGEVAL_CHROMIUM")
    if named:
        return named if Path(named).exists() else shutil.which(named)
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process; ``open`` gives a :class:`Page` (a tab) on a URL or file."""

    def __init__(self, executable: str | None = None, *, width: int = 1280, height: int = 900,
                 timeout: float = 60.0) -> None:
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError("no Chromium found (apt-get install chromium, or set RAGEVAL_CHROMIUM)")
        self.size, self.timeout = (width, height), timeout
        self.profile = tempfile.mkdtemp(prefix="rageval-chromium-")
        self.next_id, self.buffer, self.events = 0, b"", []
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def pipes() -> None:               # in the child: the pipe ends become fds 3 and 4
            high_in, high_out = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.process = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"], pass_fds=(3, 4), preexec_fn=pipes, stdin=subprocess.DEVNULL,  # noqa: PLW1509
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)

    @staticmethod
    def version(executable: str) -> str:
        """``Chromium 156.0.…`` as the executable reports it."""
        done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=30, check=False)
        return done.stdout.strip()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self.send("Browser.close", timeout=10)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    # --- the protocol ------------------------------------------------------------------------

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium exited (code {self.process.poll()})")
                self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def pump(self, seconds: float) -> None:
        """Collect the events that arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.events.append(self._receive(deadline))
            except BrowserError:
                return

    def open(self, target: str | Path, *, dark: bool = False) -> Page:
        url = target.as_uri() if isinstance(target, Path) else target
        target_id = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride", {"width": self.size[0], "height": self.size[1],
                                                         "deviceScaleFactor": 1, "mobile": False})
        if dark:
            page.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        page.navigate(url)
        return page


class Page:
    """A tab: navigate, evaluate script, press keys, take screenshots; ``errors`` and ``requests``
    are read from the events the browser sent for this tab."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def _events(self, *methods: str) -> list[dict[str, Any]]:
        return [e["params"] for e in self.browser.events if e.get("sessionId") == self.session
                and e.get("method") in methods]

    def navigate(self, url: str) -> float:
        """Load ``url`` and wait for its load event; returns the seconds it took."""
        started = time.monotonic()
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'")
        return time.monotonic() - started

    def evaluate(self, expression: str, *, await_promise: bool = True) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": await_promise})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:80]}: {reply['exceptionDetails'].get('text')} "
                               f"{reply['exceptionDetails'].get('exception', {}).get('description', '')}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            self.browser.pump(0.05)
        raise BrowserError(f"timed out waiting for {expression}")

    def key(self, key: str, code: int, *, text: str = "", shift: bool = False) -> None:
        """Press and release one key (``key("Tab", 9)``, ``key("Enter", 13, text="\\r")``)."""
        base = {"key": key, "code": key, "windowsVirtualKeyCode": code, "modifiers": 8 if shift else 0}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", **base, **({"text": text} if text else {})})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **base})

    def type(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path: Path, *, full_page: bool = True, clip: dict[str, float] | None = None) -> None:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page or clip is not None}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        elif full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params, timeout=120)["data"]))

    def pdf(self) -> bytes:
        return base64.b64decode(self.send("Page.printToPDF", {"printBackground": True}, timeout=120)["data"])

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and log errors (a failed load, a CSP refusal) so far."""
        self.browser.pump(0.1)
        found = [" ".join(str(a.get("value", a.get("description", ""))) for a in e.get("args", []))
                 for e in self._events("Runtime.consoleAPICalled") if e.get("type") in ("error", "assert")]
        found += [e["exceptionDetails"].get("exception", {}).get("description") or e["exceptionDetails"].get("text", "")
                  for e in self._events("Runtime.exceptionThrown")]
        found += [e["entry"].get("text", "") for e in self._events("Log.entryAdded") if e["entry"].get("level") == "error"]
        return found

    @property
    def requests(self) -> list[str]:
        """Every URL the tab requested."""
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]
