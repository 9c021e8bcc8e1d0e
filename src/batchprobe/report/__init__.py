"""The output stage: console, HTML, markdown and JUnit renderers of a verdict, and compare/gate."""

from batchprobe.report._registry import (
    Renderer,
    RendererRegistry,
    beside,
    builtin_renderers,
    parse_formats,
    write_beside,
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
from batchprobe.report.html import render_comparison_html, render_html
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
    "render_comparison_html",
    "render_comparison_markdown",
    "render_html",
    "render_junit",
    "render_markdown",
    "stdout_console",
    "summary_table",
    "write_beside",
    "write_rendered",
]
