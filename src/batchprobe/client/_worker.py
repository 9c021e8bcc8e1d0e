"""A client worker process's entry point: ``python -m batchprobe.client._worker FD``."""

from __future__ import annotations

import sys

from batchprobe.client._procs import worker_main

if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
