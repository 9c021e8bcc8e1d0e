"""How much the batchprobe client costs per streamed token (a benchmark, not a test).

Starts ``batchprobe fake-server`` in zero-latency mode in its own process and drives it
with ``batchprobe.client.OpenAIClient`` at 1, 8, 64 and 256 concurrent streams, then with
a bare aiohttp read loop (same requests, no parsing or bookkeeping) as the in-process
reference. Prints sustained streamed tokens/s and client CPU ms per 1,000 tokens
(``time.process_time`` of this process), each relative to its reference.

A zero-latency fake server writes each reply in one syscall, so those runs measure the
client with many events per network read. A second run injects a 50 ms TTFT and a 10 ms
ITL at 64 streams (starts staggered, so requests arrive steadily rather than in bursts)
and prints the TTFT error against the injected 50 ms and against the bare loop, plus the
CPU cost per token when every token arrives in its own packet.

Targets (issue 5, 2-core machine): >= 60k tokens/s at 256 streams, <= 15 ms CPU per
1,000 tokens, TTFT error <= 3 ms.

    python benchmarks/client_overhead.py [--seconds 3] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from batchprobe._json import dumps
from batchprobe.client import CompletionRequest, OpenAIClient, run
from batchprobe.client._payload import request_body, request_headers
from batchprobe.fake import FakeServerProcess

LEVELS = (1, 8, 64, 256)
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
    tokens: int = 0
    requests: int = 0
    errors: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
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


async def client_run(
    url: str, streams: int, seconds: float, max_tokens: int, spread_s: float = 0.0
) -> Tally:
    async with OpenAIClient(url) as client:

        async def one(tally: Tally, worker: int, n: int) -> None:
            record = await client.complete(request(streams, worker, n, max_tokens))
            tally.requests += 1
            tally.tokens += len(record.token_times)
            tally.errors += not record.ok
            if record.first_token_at is not None:
                tally.ttfts.append(record.first_token_at - record.started_at)

        return await measure(streams, seconds, one, spread_s)


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

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(streams)))
    tally.cpu_s = time.process_time() - cpu0
    tally.wall_s = time.perf_counter() - wall0
    return tally


# --- report ------------------------------------------------------------------------------


def throughput_table(clients: list[Tally], bares: list[Tally]) -> None:
    base = clients[0].tokens_per_s
    print(
        f"{'streams':>7} {'tok/s':>9} {'x 1-stream':>10} {'CPU ms/1k':>9} "
        f"{'bare tok/s':>10} {'bare CPU ms/1k':>14} {'CPU x bare':>10} {'errors':>6}"
    )
    for c, b in zip(clients, bares):
        print(
            f"{c.streams:>7} {c.tokens_per_s:>9.0f} {c.tokens_per_s / base:>10.2f} "
            f"{c.cpu_ms_per_1k:>9.2f} {b.tokens_per_s:>10.0f} {b.cpu_ms_per_1k:>14.2f} "
            f"{c.cpu_ms_per_1k / b.cpu_ms_per_1k:>10.2f} {c.errors + b.errors:>6}"
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
    with FakeServerProcess("--ttft-ms", "0", "--itl-ms", "0") as server:
        print(f"fake server: {' '.join(server.argv)} -> {server.base_url}")
        clients, bares = [], []
        for streams in LEVELS:
            clients.append(await client_run(server.base_url, streams, args.seconds, args.max_tokens))
            bares.append(await bare_run(server.base_url, streams, args.seconds, args.max_tokens))
        throughput_table(clients, bares)
    with FakeServerProcess("--ttft-ms", f"{TTFT_MS:g}", "--itl-ms", f"{TTFT_ITL_MS:g}") as server:
        print(f"fake server: {' '.join(server.argv)} -> {server.base_url}")
        seconds = max(args.seconds, 3.0)
        shape = (TTFT_STREAMS, seconds, TTFT_MAX_TOKENS, TTFT_SPREAD_S)
        client = await client_run(server.base_url, *shape)
        bare = await bare_run(server.base_url, *shape)
        ttft_lines(client, bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured time per run")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per request")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} CPUs")
    run(benchmark(args))


if __name__ == "__main__":
    main()
