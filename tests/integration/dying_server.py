"""A serve-cmd stand-in that crashes mid-run as a real engine does: the fake server's
``exit_after`` fault (exit status 3), with a Python traceback as its last log lines."""

from __future__ import annotations

import sys

from batchprobe.cli import main

if __name__ == "__main__":
    try:
        main(["fake-server", *sys.argv[1:]])
    except SystemExit as exc:
        if exc.code == 3:
            print("Traceback (most recent call last):", flush=True)
            print('  File "engine.py", line 1, in step', flush=True)
            print("RuntimeError: KV cache block table corrupted", flush=True)
        raise
