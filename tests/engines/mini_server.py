"""A stand-in server for lifecycle tests (stdlib only), started through the serve-cmd engine.

Modes: ready (answers /health and /v1/models, with a child process in its group),
exit (prints a traceback and exits 3 at once), never (never listens),
stubborn (ready, but ignores SIGTERM so teardown must SIGKILL).
``--setsid-child`` adds a child that calls setsid (it leaves the group, as daemons do).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "mini-model"}]}).encode()
        elif self.path == "/health":
            body = b'{"status": "ok"}'
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        print(format % args, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=["ready", "exit", "never", "stubborn"], default="ready")
    parser.add_argument("--tag", default="", help="lets a test find its processes")
    parser.add_argument("--setsid-child", action="store_true")
    args = parser.parse_args()
    print(f"mini server starting in mode {args.mode}", flush=True)
    if args.mode == "exit":
        print("Traceback (most recent call last):", flush=True)
        print('  File "mini_server.py", line 1, in <module>', flush=True)
        print("FileNotFoundError: no model at /does/not/exist", flush=True)
        sys.exit(3)
    if args.mode == "never":
        time.sleep(3600)
        return
    if args.mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A grandchild in the same process group: teardown must reach it too.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", args.tag])
    if args.setsid_child:
        code = "import os, time; os.setsid(); time.sleep(3600)"
        subprocess.Popen([sys.executable, "-c", code, args.tag, "escapee"])
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
