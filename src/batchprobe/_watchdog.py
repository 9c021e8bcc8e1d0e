"""The watchdog of one engine launch: when batchprobe dies, it stops what batchprobe started.

``python -m batchprobe._watchdog TOKEN GRACE`` reads its stdin, a pipe whose only writer
is the batchprobe process that launched the engine. Lines ``pgid N`` name the engine's
process group. End of file means batchprobe has closed the pipe (a normal stop) or has
died, however (SIGKILL, the OOM killer, a closed terminal): either way the watchdog then
stops the group and every process marked with the launch token, and exits.

It runs in its own session, so neither a terminal hang-up nor a Ctrl-C reaches it, and
it imports only the standard library and :mod:`batchprobe.processes`, to start fast.
"""

from __future__ import annotations

import signal
import sys

from batchprobe.processes import stop_launch


def main(argv: list[str]) -> int:
    token, grace = argv[0], float(argv[1])
    # The probe's own interrupts are none of our business; end of file is the only cue.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pgid: int | None = None
    for line in sys.stdin:
        name, _, value = line.partition(" ")
        if name == "pgid" and value.strip().isdigit():
            pgid = int(value)
    stop_launch(pgid, token, grace=grace)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
