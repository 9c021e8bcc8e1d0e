"""`python -m batchprobe` is the `batchprobe` command."""

from batchprobe.cli import main

main()
