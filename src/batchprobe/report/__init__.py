"""The output stage: console, HTML, markdown, JUnit, CSV and JSON Lines renderers of a verdict,
and compare/gate."""

from batchprobe.report._registry import (
    Renderer,
    RendererRegistry,
    beside,
    builtin_renderers,
    parse_formats,
    write_beside,
    write_output,
    write_rendered,
)
from batchprobe.report.compare import (
    DEFAULT_MAX_THROUGHPUT_DROP,
    RunsComparison,
    check_comparable,
    compare_reports,
)
from batchprobe.report.console import (
    print_comparison,
    print_summary,
    stdout_console,
    summary_table,
)
from batchprobe.report.csv import render_csv
from batchprobe.report.html import render_comparison_html, render_html
from batchprobe.report.jsonl import RequestRecord, read_jsonl, render_jsonl
from batchprobe.report.junit import render_junit
from batchprobe.report.load import load_verdict
from batchprobe.report.markdown import (
    append_step_summary,
    render_comparison_markdown,
    render_markdown,
)

__all__ = [
    "DEFAULT_MAX_THROUGHPUT_DROP",
    "Renderer",
    "RendererRegistry",
    "RequestRecord",
    "RunsComparison",
    "append_step_summary",
    "beside",
    "builtin_renderers",
    "check_comparable",
    "compare_reports",
    "load_verdict",
    "parse_formats",
    "print_comparison",
    "print_summary",
    "read_jsonl",
    "render_comparison_html",
    "render_comparison_markdown",
    "render_csv",
    "render_html",
    "render_jsonl",
    "render_junit",
    "render_markdown",
    "stdout_console",
    "summary_table",
    "write_beside",
    "write_output",
    "write_rendered",
]
