#!/usr/bin/env python3
"""A batching bug, reproduced: these requests, sent this way, get a wrong answer.

Written by `batchprobe repro`; standard library only (Python 3.9 or later). It sends each
request as the run did (at its offset, or once the requests it waited for had streamed so far,
ended or gone out), streamed, to --base-url (the server it was found on by default), and
checks every answer as batchprobe's judge would: its own needle (and no other session's),
its count, its length, no error. It prints "BUG: ..." with the evidence and exits 1, or "OK"
and exits 0.

    python3 repro.py [--base-url URL] [--model ID] [--tries N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

CASE: dict[str, Any] = json.loads("{}")  # batchprobe: the case

_SEPARATORS = re.compile(r"[\s\-_.,'\"`]")


def _stream(url: str, body: dict[str, Any], timeout: float,
            on_chunk: Callable[[], None]) -> dict[str, Any]:
    """One streamed request: its text, finish reason and error, read as the server sent it."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    text, finish, error = [], None, None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            for raw in reply:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                event = json.loads(payload)
                if event.get("error"):
                    error = f"error event: {json.dumps(event['error'])[:200]}"
                for choice in event.get("choices") or []:
                    if choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta") or {}
                    piece = delta.get("content") or choice.get("text") or ""
                    text.append(piece)
                    finish = choice.get("finish_reason") or finish
                    if piece:
                        on_chunk()
    except urllib.error.HTTPError as exc:
        error = f"HTTP {exc.code}: {exc.read()[:200]!r}"
    except (OSError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    return {"text": "".join(text), "finish_reason": finish, "error": error}


def _count_problem(count: dict[str, Any], text: str) -> str | None:
    lead = 0 if count["leading_space"] else len(text) - len(text.lstrip())
    body = text[lead:]
    if not body.strip():
        return f"no number generated ({text!r})"
    numbers = (count["skip"] + len(body)) // 2 + 2
    ideal = ", ".join(str(n) for n in range(count["first"], count["first"] + numbers)) + ","
    ideal = ((" " if count["leading_space"] else "") + ideal)[count["skip"]:]
    if not count["leading_space"]:
        ideal = ideal.lstrip()
    for pos, (a, b) in enumerate(zip(body, ideal)):
        if a != b:
            return f"count broke at character {pos}: {body[max(0, pos - 12):pos + 12]!r}"
    return None


def problems(request: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    """What the judge would fail in this answer."""
    if answer["error"] is not None:
        return [f"errored: {answer['error']}"]
    if answer["finish_reason"] in (None, "error"):
        return [f"finish_reason {answer['finish_reason']!r}"]
    expect, text = request["expect"], answer["text"]
    flat = _SEPARATORS.sub("", text)
    found = []
    others = sorted(int(s) for s, code in CASE["codes"].items()
                    if int(s) != request["session"] and code in flat
                    and code not in request["sent_codes"])
    if others:
        found.append(f"answered with the code of session(s) {others} (cross-talk)")
    if expect.get("code") is not None and expect["code"] not in flat:
        found.append(f"missed its needle {expect['code']}")
    if expect.get("count") is not None:
        broke = _count_problem(expect["count"], text)
        if broke is not None:
            found.append(broke)
    if expect.get("length") and answer["finish_reason"] != "length":
        found.append(f"ended early (finish_reason {answer['finish_reason']!r}, its serial "
                     "reference ran to max_tokens)")
    return found


def _continued(body: dict[str, Any], before: dict[str, Any], answer: str,
               tail: str) -> dict[str, Any]:
    """A conversation's next turn, built from the turn before as this run sent it and got
    its answer: the earlier prompt, the answer, the new text (chat: as messages)."""
    if "messages" in body:
        return dict(body, messages=[*before["messages"], {"role": "assistant", "content": answer},
                                    {"role": "user", "content": tail}])
    return dict(body, prompt=before["prompt"] + answer + tail)


class _Wave:
    """Who has gone out, how far each has streamed, who has ended: what a request waits for."""

    def __init__(self, n: int) -> None:
        self.started, self.chunks, self.done = [False] * n, [0] * n, [False] * n
        self.changed = threading.Condition()

    def mark(self, what: str, index: int) -> None:
        with self.changed:
            if what == "chunk":
                self.chunks[index] += 1
            else:
                getattr(self, what)[index] = True
            self.changed.notify_all()

    def _met(self, request: dict[str, Any]) -> bool:
        if not all(self.done[j] for j in request["phase_after"]):
            return False
        after = request["after"]
        if after is None:
            return True
        if after["kind"] == "start":
            return all(self.started[j] or self.done[j] for j in after["requests"])
        if after["kind"] == "finish":
            return all(self.done[j] for j in after["requests"])
        return all(self.done[j] or self.chunks[j] >= after["tokens"] for j in after["requests"])

    def wait(self, request: dict[str, Any]) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self._met(request))


def run_once(base_url: str, model: str | None, timeout: float) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    requests = CASE["requests"]
    answers: list[Any] = [None] * len(requests)
    bodies: list[Any] = [None] * len(requests)
    wave = _Wave(len(requests))

    def send(index: int, request: dict[str, Any]) -> None:
        try:
            wave.wait(request)
            time.sleep(request["delay_s"])
            body = dict(request["body"])
            if request["continues"] is not None:
                before = request["continues"]
                body = _continued(body, bodies[before], answers[before]["text"], request["tail"])
            if model is not None:
                body["model"] = model
            bodies[index] = body
            wave.mark("started", index)
            answers[index] = _stream(base_url.rstrip("/") + request["path"], body, timeout,
                                     lambda: wave.mark("chunk", index))
        finally:
            wave.mark("done", index)

    threads = [threading.Thread(target=send, args=(i, r)) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return list(zip(requests, answers))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=CASE["base_url"])
    parser.add_argument("--model", default=CASE["model"])
    parser.add_argument("--tries", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if not args.base_url:
        parser.error("--base-url is required (the case was found on a server batchprobe launched)")
    for attempt in range(1, args.tries + 1):
        for request, answer in run_once(args.base_url, args.model, args.timeout):
            found = problems(request, answer)
            if found:
                print(f"BUG: session {request['session']} (try {attempt}/{args.tries}): "
                      + "; ".join(found))
                print(f"  answer: {answer['text'][:160]!r}")
                print(f"  seen in the run: {CASE['kept']['message'][:300]}")
                return 1
    print(f"OK: {len(CASE['requests'])} request(s) answered right in {args.tries} try(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
