"""The sanitisers: each server string is data wherever it is written (batchprobe._safe)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt

from batchprobe import _json
from batchprobe._safe import console_text, md_cell, md_code, md_fence, no_surrogates, xml_text

NASTY = (
    "a\x1bc\x00\x07\r\x7f\x9b2J\x85 \ud800 \udced"
    "<img src=x onerror=alert(1)></details><script>x</script>"
    "[x](javascript:alert(1)) ![i](javascript:alert(2)) <javascript:alert(3)> "
    "`code` ``` | cell | \\[y](javascript:alert(4)) &amp; \ufffe"
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_no_surrogates_replaces_each_lone_surrogate_and_keeps_the_rest() -> None:
    assert no_surrogates("a\ud800b\udfffc 𐀀 é") == "a\ufffdb\ufffdc 𐀀 é"
    no_surrogates(NASTY).encode("utf-8")  # encodable: it would raise on a surrogate


def test_xml_text_makes_any_string_well_formed_xml() -> None:
    root = ET.Element("testcase", name=xml_text(NASTY))
    ET.SubElement(root, "failure", message=xml_text(NASTY)).text = xml_text(NASTY)
    text = ET.tostring(root, encoding="unicode")
    parsed = ET.fromstring(text)  # raises on NUL, ESC, a surrogate or U+FFFE
    assert parsed.get("name") == xml_text(NASTY)
    assert xml_text("tab\tline\nok") == "tab\tline\nok"
    assert "\x1b" not in xml_text(NASTY) and "\x00" not in xml_text(NASTY)


def test_console_text_leaves_no_control_character() -> None:
    shown = console_text(NASTY)
    assert not _CONTROL.search(shown) and "\n" not in shown and "\r" not in shown
    assert console_text("one\ntwo\x1b", newlines=True) == "one\ntwo\ufffd"
    assert console_text("plain text, ✓ 4.0×") == "plain text, ✓ 4.0×"


def _rendered(markdown: str) -> tuple[str, list[str]]:
    """The HTML CommonMark (with GFM tables) makes of ``markdown``, and its inline token kinds."""
    md = MarkdownIt("commonmark").enable("table")
    kinds = [child.type for token in md.parse(markdown) for child in token.children or ()]
    return md.render(markdown), kinds


@pytest.mark.parametrize("text", [NASTY, "<b>x</b>", "[a](b)", "\\`x\\`", "x\\", "&lt;"])
def test_md_cell_makes_no_tag_link_image_or_code(text: str) -> None:
    cell = md_cell(text)
    assert "\n" not in cell and not _CONTROL.search(cell)
    html, kinds = _rendered(f"| h |\n| --- |\n| {cell} |\n\n- {cell}\n")
    assert not {"link_open", "image", "code_inline", "html_inline"} & set(kinds), kinds
    assert "<img" not in html and "<script" not in html and "</details" not in html
    assert 'href="javascript' not in html
    assert html.count("<td>") == 1  # a pipe in the text did not open a cell


def test_md_cell_reads_back_as_the_text() -> None:
    text = "sweep@8: 3 wrong <a> & [b] `c` | d \\ e"
    tokens = MarkdownIt("commonmark").parse(f"- {md_cell(text)}\n")
    inline = next(t for t in tokens if t.type == "inline")
    assert "".join(child.content for child in inline.children or ()) == text


@pytest.mark.parametrize("text", ["plain", "a ` b", "``` x ````", "`edge`", NASTY])
def test_md_code_is_one_code_span_holding_the_text(text: str) -> None:
    html, kinds = _rendered(f"run {md_code(text)} end\n")
    assert kinds.count("code_inline") == 1 and "html_inline" not in kinds
    assert "<img" not in html and "<script" not in html


def test_md_fence_is_not_closed_by_the_text() -> None:
    tokens = MarkdownIt("commonmark").parse("\n".join(md_fence("a\n````\n<script>\nb")))
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and "<script>" in fences[0].content and len(tokens) == 1


def test_strict_fallback_loads_refuses_what_orjson_refuses() -> None:
    for bad in (b'"\\ud800"', b'"\xed\xa0\x80"', b'"\xff"', '"\ud800"'):
        with pytest.raises(_json.JSONDecodeError):
            _json._strict_loads(bad)
        with pytest.raises(_json.JSONDecodeError):
            _json.loads(bad)
    assert _json._strict_loads(b'"\\ud800\\udc00 \\u001b"') == "𐀀 \x1b"
