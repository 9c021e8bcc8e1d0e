"""Server strings are data: one function per place they are written, so none is code there.

A server chooses every byte of its model id, error bodies, header values and answers. The
client keeps them as sent, except lone surrogates (:func:`no_surrogates`: no UTF-8 file can
hold them); each output escapes them for where it writes them: :func:`xml_text` for JUnit,
:func:`md_cell` and :func:`md_code` for markdown, :func:`console_text` for a terminal. HTML is
escaped by the template engine (autoescape).
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"

_SURROGATES = re.compile("[\ud800-\udfff]")
# Characters XML 1.0 forbids anywhere (its Char production), surrogates included.
_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# C0 controls, DEL and C1 controls: a terminal acts on them (ESC c resets it; C1 CSI, \x9b,
# starts an escape sequence on some terminals); lone surrogates, which no stream can encode.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# Markdown punctuation that could open code, a link or an image or a table cell (emphasis
# is left alone: it makes no tag and no link), and a backslash that would escape the next
# character (CommonMark escapes only ASCII punctuation; before a letter it is literal).
_MD_PUNCTUATION = re.compile(r"([`\[\]|]|\\(?=[!-/:-@\[-`{-~]|$))")
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKTICKS = re.compile("`+")


def no_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (a decoder's ``surrogateescape``, a JSON ``\\ud800``)
    replaced by U+FFFD, so it can be written as UTF-8."""
    return _SURROGATES.sub(REPLACEMENT, text)


def xml_text(text: str) -> str:
    """Text or an attribute value XML 1.0 can hold: each character it forbids (NUL, ESC and
    the other C0 controls but tab and newlines, lone surrogates, U+FFFE/FFFF) becomes U+FFFD."""
    return _XML_FORBIDDEN.sub(REPLACEMENT, text)


def console_text(text: str, *, newlines: bool = False) -> str:
    """Text a terminal only shows: C0 controls (tab and carriage return too), DEL and C1
    controls become U+FFFD; ``newlines`` keeps line feeds where the caller prints lines."""
    return (_CONTROLS_BUT_NEWLINE if newlines else _CONTROLS).sub(REPLACEMENT, text)


def md_cell(text: str) -> str:
    """Markdown inline text (a table cell, a list item): one line; ``<``, ``>`` and ``&`` as
    entities and markdown punctuation backslash-escaped, so no server string makes a tag, a
    link, an image, code or a new cell."""
    line = " ".join(console_text(text, newlines=True).split())
    escaped = _MD_PUNCTUATION.sub(r"\\\1", line)
    return "".join(_MD_ENTITIES.get(ch, ch) for ch in escaped)


def md_code(text: str) -> str:
    """A markdown code span of ``text`` on one line: fenced by more backticks than any run in
    it (CommonMark), so nothing in it closes the span; inside, HTML and links are literal."""
    line = " ".join(console_text(text, newlines=True).split())
    longest = max((len(run) for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def md_fence(text: str) -> list[str]:
    """A fenced code block of ``text``: a fence longer than any backtick run in it."""
    body = console_text(text, newlines=True).rstrip("\n")
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, body, fence]
