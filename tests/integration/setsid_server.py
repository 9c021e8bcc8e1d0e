"""A serve-cmd stand-in: the fake server, plus a child that calls ``setsid`` first.

``python setsid_server.py TAG FAKE-SERVER-ARGS...``: the child leaves the engine's
process group and session (as some servers' workers do), so only batchprobe's launch
token can find it; TAG in both command lines lets a test find them independently.
"""

from __future__ import annotations

import subprocess
import sys

from batchprobe.cli import main

if __name__ == "__main__":
    tag, args = sys.argv[1], sys.argv[2:]
    subprocess.Popen(
        [sys.executable, "-c", "import os, time; os.setsid(); time.sleep(3600)", tag],
        stdin=subprocess.DEVNULL,
    )
    main(["fake-server", *args])
