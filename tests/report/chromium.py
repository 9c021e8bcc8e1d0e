"""Open a page in headless Chromium over the DevTools protocol (aiohttp websocket).

Records console messages, exceptions and every network request the page makes, measures
elements with a script, and takes full-page PNG screenshots at a given viewport width.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
_START_TIMEOUT_S = 60.0
_CALL_TIMEOUT_S = 60.0


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no chromium on PATH: apt-get install -y chromium (.ci/run does this)")


@dataclass
class PageLog:
    console: list[str] = field(default_factory=list)  # console errors/warnings, exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page requested


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self.log = PageLog()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data:
                future = self._waiting.pop(data["id"])
                if "error" in data:
                    future.set_exception(RuntimeError(f"CDP error: {data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
                continue
            self._on_event(data["method"], data.get("params", {}))

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.log.console.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            self.log.console.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            self.log.console.append(f"log {params['entry']['level']}: {params['entry']['text']}")
        elif method == "Network.requestWillBeSent":
            self.log.requests.append(params["request"]["url"])
        self._events.setdefault(method, asyncio.Event()).set()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        await self._ws.send_str(json.dumps({"id": self._next, "method": method, "params": params}))
        return await asyncio.wait_for(future, _CALL_TIMEOUT_S)

    async def open(self, url: str, width: int, height: int, mobile: bool) -> None:
        await self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                        deviceScaleFactor=1, mobile=mobile)
        loaded = self._events.setdefault("Page.loadEventFired", asyncio.Event())
        loaded.clear()
        await self.call("Page.navigate", url=url)
        await asyncio.wait_for(loaded.wait(), _CALL_TIMEOUT_S)

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        """A full-page PNG at the current viewport width."""
        metrics = await self.call("Page.getLayoutMetrics")
        size = metrics["cssContentSize"]
        shot = await self.call(
            "Page.captureScreenshot", format="png", captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        )
        path.write_bytes(base64.b64decode(shot["data"]))


@asynccontextmanager
async def chromium_page() -> AsyncIterator[Page]:
    """A fresh headless Chromium (own profile, loopback DevTools port) and its first page."""
    with tempfile.TemporaryDirectory(prefix="batchprobe-chromium-") as profile:
        argv = [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
                "about:blank"]
        # stderr to a file, not a pipe: a pipe nobody drains would stall chromium once full.
        log = Path(profile) / "stderr.log"
        with log.open("w") as sink:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.DEVNULL, stderr=sink, start_new_session=True
            )
        try:
            browser_ws = await _ws_url(proc, log)
            port = browser_ws.split(":")[2].split("/")[0]
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as reply:
                    targets = await reply.json()
                page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                async with http.ws_connect(page_ws, max_msg_size=0) as ws:
                    page = Page(ws)
                    for domain in ("Page", "Runtime", "Log", "Network"):
                        await page.call(f"{domain}.enable")
                    yield page
        finally:
            # Its own process group: the renderer and zygote children go with it.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


async def _ws_url(proc: asyncio.subprocess.Process, log: Path) -> str:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if proc.returncode is not None:
            break
        await asyncio.sleep(0.1)
    raise RuntimeError(f"chromium did not open its DevTools port:\n{log.read_text()[-2000:]}")
