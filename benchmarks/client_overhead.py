"""How much the batchprobe client costs per streamed token (a benchmark, not a test).

Starts ``batchprobe fake-server`` in its own process and drives it with
``batchprobe.client.OpenAIClient`` (over ``--client-procs`` K worker processes when K > 1,
through ``ClientPool``) at 1, 8, 64, 256 and 1,024 concurrent streams, then with a bare
aiohttp read loop (same requests, no parsing or bookkeeping, kept-alive connections) as the
reference of the same sitting. Prints sustained streamed tokens/s and client CPU ms per 1,000
tokens (this process's ``time.process_time`` plus its workers' CPU from /proc), each as a
ratio to the bare loop, and the peak RSS of the client's processes.

Two modes: ``coalesced`` (a zero-latency fake writes each reply in one syscall: many events
per network read) and ``per-token`` (a 10 ms ITL: every token in its own packet). A last run
injects a 50 ms TTFT at 64 streams (starts staggered, so requests arrive steadily) and
prints the TTFT error against the injected 50 ms and against the bare loop.

Targets (issue 20, 2-core machine): >= 0.9x the bare loop per process in both modes; with
2 processes >= 1.6x one process at 1,024 per-token streams; TTFT error <= 1 ms over the bare
loop at 64 streams; peak RSS <= 200 MB at 1,024 sessions.

    python benchmarks/client_overhead.py [--seconds 3] [--max-tokens 256] [--client-procs 1,2]
        [--levels 1,8,64,256,1024] [--modes coalesced,per-token]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import aiohttp

from batchprobe._json import dumps
from batchprobe.client import ClientPool, Completer, CompletionRequest, OpenAIClient, run
from batchprobe.client._payload import request_body, request_headers
from batchprobe.fake import FakeServerProcess

LEVELS = (1, 8, 64, 256, 1024)
MODES = {"coalesced": ("0", "0"), "per-token": ("0", "10")}  # (ttft ms, itl ms)
TTFT_STREAMS = 64
TTFT_MS = 50.0
# The TTFT run paces tokens so the fake server is not saturated by 64 streams re-requesting
# every 50 ms (with zero ITL a whole reply is due at the TTFT): its queueing would swamp the
# client's error, which is what the run measures.
TTFT_ITL_MS = 10.0
TTFT_MAX_TOKENS = 64
# One request's duration: staggering the streams over it gives a steady arrival rate.
TTFT_SPREAD_S = (TTFT_MS + (TTFT_MAX_TOKENS - 1) * TTFT_ITL_MS) / 1e3
PROMPT = "Count slowly and keep going:"


@dataclass
class Tally:
    """What one measured run moved, and what it cost this process."""

    streams: int
    procs: int = 0
    """Client processes (0: the bare loop)."""
    tokens: int = 0
    requests: int = 0
    errors: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    """This process's peak RSS so far, plus each worker's."""
    ttfts: list[float] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_ms_per_1k(self) -> float:
        return self.cpu_s * 1e6 / self.tokens if self.tokens else float("nan")


def request(streams: int, worker: int, n: int, max_tokens: int) -> CompletionRequest:
    return CompletionRequest(
        request_id=f"bench-{streams}-{worker}-{n}",
        prompt=f"{PROMPT} {worker}",
        max_tokens=max_tokens,
    )


# --- the client under test --------------------------------------------------------------


def _proc_cpu_s(pid: int) -> float:
    """A child process's user + system CPU seconds so far, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def worker_pids(sender: Completer) -> list[int]:
    return [w.process.pid for w in sender._workers] if isinstance(sender, ClientPool) else []


async def client_run(
    url: str, streams: int, seconds: float, max_tokens: int, procs: int, spread_s: float = 0.0
) -> Tally:
    async with OpenAIClient(url) as client:
        pool = ClientPool(client, procs) if procs > 1 else None
        sender: Completer = await pool.__aenter__() if pool is not None else client

        async def one(tally: Tally, worker: int, n: int) -> None:
            record = await sender.complete(request(streams, worker, n, max_tokens))
            tally.requests += 1
            tally.tokens += len(record.token_times)
            tally.errors += not record.ok
            if record.first_token_at is not None:
                tally.ttfts.append(record.first_token_at - record.started_at)

        try:
            tally = await measure(streams, seconds, one, spread_s, worker_pids(sender))
        finally:
            if pool is not None:
                await pool.__aexit__(None, None, None)
        tally.procs = procs
        return tally


# --- the reference: a bare aiohttp read loop with no bookkeeping ---------------------------


async def bare_run(
    url: str, streams: int, seconds: float, max_tokens: int, spread_s: float = 0.0
) -> Tally:
    connector = aiohttp.TCPConnector(limit=1024, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(tally: Tally, worker: int, n: int) -> None:
            req = request(streams, worker, n, max_tokens)
            started = time.perf_counter()
            first = None
            async with session.post(
                f"{url}/v1/completions",
                data=dumps(request_body(req, None)),
                headers=request_headers(req.request_id, None),
            ) as resp:
                async for _ in resp.content.iter_any():
                    if first is None:
                        first = time.perf_counter()
            tally.requests += 1
            # The fake server answers a decode prompt with exactly max_tokens tokens.
            tally.tokens += max_tokens
            tally.errors += resp.status != 200
            if first is not None:
                tally.ttfts.append(first - started)

        return await measure(streams, seconds, one, spread_s)


async def measure(
    streams: int,
    seconds: float,
    one: Callable[[Tally, int, int], Awaitable[None]],
    spread_s: float = 0.0,
    children: Sequence[int] = (),
) -> Tally:
    """Warm every stream's connection, then keep ``streams`` requests in flight for a while.

    ``spread_s`` staggers the streams' starts over that many seconds, so that requests
    arrive at a steady rate instead of in bursts of ``streams`` at once.
    """
    await asyncio.gather(*(one(Tally(streams), w, -1) for w in range(streams)))
    tally = Tally(streams)
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        await asyncio.sleep(spread_s * w / streams)
        n = 0
        while time.perf_counter() < deadline:
            await one(tally, w, n)
            n += 1

    def cpu() -> float:
        return time.process_time() + sum(_proc_cpu_s(pid) for pid in children)

    cpu0, wall0 = cpu(), time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(streams)))
    tally.cpu_s = cpu() - cpu0
    tally.wall_s = time.perf_counter() - wall0
    peaks = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
    tally.peak_rss_mb = sum(peaks + [_proc_peak_mb(pid) for pid in children])
    return tally


# --- report ------------------------------------------------------------------------------


def throughput_table(mode: str, rows: list[tuple[list[Tally], Tally]]) -> None:
    """Per level: the bare loop, then each client process count as ratios to it (and to
    the client with one process)."""
    print(f"mode {mode}")
    print(
        f"{'streams':>7} {'procs':>5} {'tok/s':>9} {'x bare':>7} {'x 1 proc':>8} "
        f"{'CPU ms/1k':>9} {'CPU x bare':>10} {'peak MB':>8} {'errors':>6}"
    )
    for clients, bare in rows:
        print(
            f"{bare.streams:>7} {'bare':>5} {bare.tokens_per_s:>9.0f} {1:>7.2f} {'':>8} "
            f"{bare.cpu_ms_per_1k:>9.2f} {1:>10.2f} {bare.peak_rss_mb:>8.0f} {bare.errors:>6}"
        )
        one = clients[0].tokens_per_s
        for c in clients:
            print(
                f"{'':>7} {c.procs:>5} {c.tokens_per_s:>9.0f} "
                f"{c.tokens_per_s / bare.tokens_per_s:>7.2f} {c.tokens_per_s / one:>8.2f} "
                f"{c.cpu_ms_per_1k:>9.2f} {c.cpu_ms_per_1k / bare.cpu_ms_per_1k:>10.2f} "
                f"{c.peak_rss_mb:>8.0f} {c.errors:>6}"
            )


def ttft_lines(client: Tally, bare: Tally) -> None:
    c_ms = [t * 1e3 for t in client.ttfts]
    b_ms = [t * 1e3 for t in bare.ttfts]
    c_med, b_med = statistics.median(c_ms), statistics.median(b_ms)
    c_p90 = statistics.quantiles(c_ms, n=10)[-1]
    print(
        f"TTFT at {client.streams} streams, injected {TTFT_MS:g} ms: client median "
        f"{c_med:.2f} ms (error {c_med - TTFT_MS:+.2f} ms, p90 {c_p90:.2f} ms, "
        f"{len(c_ms)} requests); bare aiohttp median {b_med:.2f} ms; client - bare "
        f"{c_med - b_med:+.2f} ms"
    )
    # Paced tokens arrive one per packet: the per-read cost is not amortised here.
    print(
        f"same run, one token per packet: client {client.tokens_per_s:.0f} tok/s, "
        f"{client.cpu_ms_per_1k:.2f} CPU ms/1k tokens; bare {bare.cpu_ms_per_1k:.2f} CPU ms/1k; "
        f"client/bare {client.cpu_ms_per_1k / bare.cpu_ms_per_1k:.2f}"
    )


async def benchmark(args: argparse.Namespace) -> None:
    for mode in args.modes:
        ttft_ms, itl_ms = MODES[mode]
        with FakeServerProcess("--ttft-ms", ttft_ms, "--itl-ms", itl_ms, "--batch-cap", "1024") as server:
            print(f"fake server: {' '.join(server.argv)} -> {server.base_url}")
            rows = []
            for streams in args.levels:
                shape = (server.base_url, streams, args.seconds, args.max_tokens)
                clients = [await client_run(*shape, procs) for procs in args.client_procs]
                rows.append((clients, await bare_run(*shape)))
            throughput_table(mode, rows)
    with FakeServerProcess("--ttft-ms", f"{TTFT_MS:g}", "--itl-ms", f"{TTFT_ITL_MS:g}") as server:
        print(f"fake server: {' '.join(server.argv)} -> {server.base_url}")
        seconds = max(args.seconds, 3.0)
        shape = (server.base_url, TTFT_STREAMS, seconds, TTFT_MAX_TOKENS)
        client = await client_run(*shape, 1, TTFT_SPREAD_S)
        bare = await bare_run(*shape, TTFT_SPREAD_S)
        ttft_lines(client, bare)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured time per run")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per request")
    parser.add_argument(
        "--client-procs", type=_ints, default=[1, 2], help="client process counts, e.g. 1,2"
    )
    parser.add_argument("--levels", type=_ints, default=list(LEVELS), help="stream counts")
    parser.add_argument(
        "--modes", type=lambda t: t.split(","), default=list(MODES), help=",".join(MODES)
    )
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} CPUs")
    run(benchmark(args))


if __name__ == "__main__":
    main()
