"""What the traffic shapes need to know about the server, asked once per run."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from pydantic import JsonValue

from batchprobe.client.types import Api, CompletionRequest, RequestRecord
from batchprobe.results.items import Constraint, CountSpec
from batchprobe.send.asking import Asker
from batchprobe.workload import constraints as constrained
from batchprobe.workload.shapes import BiasToken

# Words most tokenizers read as one token; each biased row takes its own.
BIAS_WORDS = (" apple", " river", " garden", " silver", " yellow", " window", " orange", " music")
_COUNT_SAMPLE = 20
FALLBACK_TOKENS_PER_NUMBER = 6.0  # digits one by one plus ", ": the most a tokenizer spends


async def serves_other_path(
    client: Asker, run_id: str, prompt_style: str, extra: dict[str, JsonValue]
) -> bool:
    """Whether the request path the prompt style does not use (chat for the completion
    style, completions for chat) answers a real 1-token generation. Only then do the
    shapes send every other item over it: a path a server does not serve is no bug of it."""
    api: Api = "completions" if prompt_style == "chat" else "chat"
    record = await _hello(client, f"{run_id}-probe-{api}", run_id, api, extra)
    return record.error is None


async def _hello(
    client: Asker, request_id: str, run_id: str, api: Api, extra: dict[str, JsonValue]
) -> RequestRecord:
    """One unmeasured 1-token generation over ``api``."""
    return await client.complete(
        CompletionRequest(
            request_id=request_id,
            api=api,
            prompt=f"[probe {run_id}] Say hello.",
            max_tokens=1,
            extra_body=dict(extra),
        )
    )


async def _probe(
    client: Asker, run_id: str, what: str, prompt_style: str, prompt: str,
    max_tokens: int, extra: dict[str, JsonValue], **fields: int,
) -> RequestRecord:
    """One unmeasured short request over the run's own path, asking for ``what`` (its
    request id) with ``fields`` (logprobs, n)."""
    return await client.complete(
        CompletionRequest(
            request_id=f"{run_id}-probe-{what}",
            api="chat" if prompt_style == "chat" else "completions",
            prompt=f"[probe {run_id}] {prompt}",
            max_tokens=max_tokens,
            extra_body=dict(extra),
            **fields,  # type: ignore[arg-type]
        )
    )


_NOT_SERVED = frozenset({404, 405, 501})


async def refuses(
    client: Asker, run_id: str, api: Api, extra: dict[str, JsonValue]
) -> bool:
    """Whether the server refuses a 1-token generation over ``api`` outright (404, 405, 501):
    a path it does not serve, not one that failed once."""
    record = await _hello(client, f"{run_id}-probe-{api}-served", run_id, api, extra)
    error = record.error
    return error is not None and error.http_status in _NOT_SERVED


async def top_logprobs(
    client: Asker, run_id: str, prompt_style: str, extra: dict[str, JsonValue], top: int
) -> tuple[bool, bool]:
    """Whether a 1-token request asking for ``top`` logprobs is answered, not refused (some
    servers reject the field), and whether any came back (then each greedy row checks its
    own top-1, the params wave needs fewer rows for its divergence test, and the serial
    references ask for them: a wrong answer's near tie)."""
    record = await _probe(client, run_id, "logprobs", prompt_style, "The sky is", 1, extra,
                          logprobs=top)
    return record.error is None, record.error is None and bool(record.top_logprobs)


async def constraints(
    client: Asker, run_id: str, apis: Sequence[Api], extra: dict[str, JsonValue]
) -> tuple[list[tuple[Constraint, Api]], list[str]]:
    """Each constraint the server honours and the first of ``apis`` (the request paths the
    run uses) that honours it: a short request under it whose answer fits it (llama.cpp takes
    ``response_format`` on chat only). A note for each it honours on none: refused, or
    accepted and not applied."""
    honoured: list[tuple[Constraint, Api]] = []
    notes = []
    for kind in constrained.CONSTRAINTS:
        whys = []
        for api in apis:
            record = await client.complete(
                CompletionRequest(
                    request_id=f"{run_id}-probe-{kind}-{api}",
                    api=api,
                    prompt=constrained.prompt(f"probe {run_id}", api == "chat"),
                    max_tokens=constrained.MAX_TOKENS,
                    extra_body={**extra, **constrained.request_fields(kind)},
                )
            )
            if record.error is None and constrained.fits(kind, record.text.strip()):
                honoured.append((kind, api))
                break
            whys.append(f"{api}: " + (f"refused ({record.error.kind.value})" if record.error
                                      else f"not applied (answered {record.text[:24]!r})"))
        else:
            notes.append(f"params: no {kind} row: {constrained.describe(kind)} "
                         + "; ".join(whys))
    return honoured, notes


async def choices(
    client: Asker, run_id: str, prompt_style: str, extra: dict[str, JsonValue], n: int
) -> str | None:
    """Why the server cannot answer ``n`` choices in one request (None: it can): a short
    greedy request asking for them must come back with indices 0 to n-1, each once."""
    record = await _probe(client, run_id, "choices", prompt_style,
                          "Counting from 10: 10, 11, 12,", 2, extra, n=n)
    if record.error is not None:
        return f"refused ({record.error.kind.value})"
    got = [0, *(c.index for c in record.choices)]
    return None if got == list(range(n)) else f"answered choice indices {got}"


async def streams(client: Asker, run_id: str, api: str, extra: dict[str, JsonValue]) -> bool:
    """Whether tokens arrive one after the other (join is triggered by stream progress)."""
    # Long enough that a client busy for a moment still sees two arrivals.
    record = await _probe(client, run_id, "stream", api, "Counting from 10: 10, 11, 12, 13,",
                          16, extra)
    times = record.token_times
    return record.error is None and record.streamed and len(set(times)) >= 2


async def bias_tokens(client: Asker, model: str | None) -> tuple[list[BiasToken], str | None]:
    """Words the model's tokenizer reads as exactly one token, with their ids, and a note
    when there are none: from the engine's ``/tokenize`` (llama.cpp, vLLM, SGLang), else
    from the model folder's ``tokenizer.json``."""
    served = await _served_ids(client)
    if served is not None:
        found = _single_tokens(served)
        return found, None if found else "no bias row: no single-token word from /tokenize"
    local = _local_ids(model)
    if isinstance(local, str):
        return [], f"no bias row: the server has no /tokenize, and {local}"
    found = _single_tokens(local)
    return found, None if found else "no bias row: no single-token word in tokenizer.json"


def _single_tokens(ids: dict[str, list[int]]) -> list[BiasToken]:
    return [BiasToken(text=w, token_id=t[0]) for w, t in ids.items() if len(t) == 1]


async def _served_ids(client: Asker) -> dict[str, list[int]] | None:
    """Each bias word's ids from the engine's tokenizer endpoint; None: it has none."""
    found = {}
    for word in BIAS_WORDS:
        ids = await client.token_ids(word)
        if ids is None:
            return None
        found[word] = ids
    return found


def _local_ids(model: str | None) -> dict[str, list[int]] | str:
    """Each bias word's ids from ``<model>/tokenizer.json``, or why there are none."""
    path = Path(model) / "tokenizer.json" if model is not None else None
    if path is None or not path.is_file():
        return "the model is not a local folder with a tokenizer.json"
    try:
        # Optional: pip install "batchprobe[tokenizer]".
        from tokenizers import Tokenizer  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return 'reading tokenizer.json needs the tokenizers package (pip install "batchprobe[tokenizer]")'
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - the Rust library raises its own bare Exception
        return f"{path} does not load ({exc})"
    return {w: list(tokenizer.encode(w, add_special_tokens=False).ids) for w in BIAS_WORDS}


async def tokens_per_number(client: Asker) -> float:
    """How many tokens one ' 1234,' of a count costs (stop strings are placed with it)."""
    sample = CountSpec(first=4100, leading_space=True).ideal(_COUNT_SAMPLE)
    count = await client.tokenize(sample)
    return count / _COUNT_SAMPLE if count else FALLBACK_TOKENS_PER_NUMBER


# GGUF metadata value types: fixed sizes, 8 = string, 9 = array.
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_INTS = {4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
_GGUF_KEYS_LIMIT = 64  # the architecture's keys come before the tokenizer's long arrays


def _read(f: BinaryIO, fmt: str) -> int:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    value: int = struct.unpack(fmt, data)[0]
    return value


def _skip(f: BinaryIO, kind: int) -> None:
    if kind == 8:
        f.seek(_read(f, "<Q"), 1)
    elif kind == 9:
        item, count = _read(f, "<I"), _read(f, "<Q")
        if item in _GGUF_SIZES:
            f.seek(_GGUF_SIZES[item] * count, 1)
        else:
            for _ in range(count):
                _skip(f, item)
    elif kind in _GGUF_SIZES:
        f.seek(_GGUF_SIZES[kind], 1)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


def gguf_sliding_window(path: Path) -> int | None:
    """``<arch>.attention.sliding_window`` from a GGUF file's metadata, if it has one."""
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return None
            _read(f, "<I")  # version
            _read(f, "<Q")  # tensors
            for _ in range(min(_read(f, "<Q"), _GGUF_KEYS_LIMIT)):
                key = f.read(_read(f, "<Q")).decode("utf-8", "replace")
                kind = _read(f, "<I")
                if key.endswith(".attention.sliding_window") and kind in _GGUF_INTS:
                    window = _read(f, _GGUF_INTS[kind])
                    return window if window > 0 else None
                _skip(f, kind)
    except (OSError, ValueError, struct.error):
        return None
    return None


def sliding_window(model: str | None) -> int | None:
    """The model's sliding window from a local Hugging Face config or GGUF file."""
    if model is None:
        return None
    if model.endswith(".gguf"):
        return gguf_sliding_window(Path(model))
    config = Path(model) / "config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for scope in (data, data.get("text_config") or {}):
        window = scope.get("sliding_window") if isinstance(scope, dict) else None
        if isinstance(window, int) and window > 0:
            return window
    return None


def context_tokens(props: JsonValue | None) -> int | None:
    """The context one request may use, from llama.cpp's ``/props``."""
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
