"""The needle format shared by the recall workload, the scorer and the fake server.

A needle is one log-style line ``ACCESS_CODE=<code>``. Codes are digits only:
the base Gemma 3 270M recalls digit codes reliably, while letter-led hex codes
tokenise badly (see ENVIRONMENT.md). All codes in a run have the same length,
so one can never be a substring of another unless they are equal.
"""

from __future__ import annotations

import random
import re

NEEDLE_KEY = "ACCESS_CODE"
CODE_LENGTH = 7
CODE_ALPHABET = "0123456789"

_NEEDLE_RE = re.compile(rf"{NEEDLE_KEY}=([0-9]{{{CODE_LENGTH}}})(?![0-9])")


def needle_line(code: str, key: str = NEEDLE_KEY) -> str:
    return f"{key}={code}"


def find_needle_code(prompt: str) -> str | None:
    """The code of the needle planted in ``prompt``, or None when there is none."""
    match = _NEEDLE_RE.search(prompt)
    return match.group(1) if match else None


# What a prompt asks for: a completion prompt ends with the key and '=', a chat prompt's last
# question names the key (see recall.ending).
_ASKED_COMPLETION = re.compile(r"(?<![A-Z_])([A-Z][A-Z_]*)=$")
_ASKED_CHAT = re.compile(r"What is the value of ([A-Z][A-Z_]*)\?")


def asked_key(prompt: str) -> str | None:
    """The key ``prompt`` asks for: the one it ends with (completions) or its last question
    names (chat); None when it asks for none."""
    match = _ASKED_COMPLETION.search(prompt)
    if match is not None:
        return match.group(1)
    questions = _ASKED_CHAT.findall(prompt)
    return str(questions[-1]) if questions else None


def planted_code(prompt: str, key: str) -> str | None:
    """The code of the first ``key=<code>`` line of ``prompt`` (where it was planted)."""
    planted = re.search(rf"(?<![A-Z_]){key}=([0-9]{{{CODE_LENGTH}}})(?![0-9])", prompt)
    return planted.group(1) if planted else None


def asked_code(prompt: str) -> str | None:
    """The code of the key ``prompt`` asks for, or None when it asks for none or holds none.

    A conversation plants several keys over its turns and each turn asks for one of them.
    """
    key = asked_key(prompt)
    return None if key is None else planted_code(prompt, key)


def make_codes(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct codes; the first digit is never 0 so none reads as padding."""
    codes: list[str] = []
    seen: set[str] = set()
    while len(codes) < count:
        code = rng.choice("123456789") + "".join(
            rng.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH - 1)
        )
        if code not in seen:
            seen.add(code)
            codes.append(code)
    return codes


def normalise(text: str) -> str:
    """Digits only, so ``7 412 093`` and ``7-412-093`` both count as ``7412093``."""
    return "".join(ch for ch in text if ch.isdigit())
