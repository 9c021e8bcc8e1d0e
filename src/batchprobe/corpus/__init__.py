"""The corpus of real, published batching bugs: each case reproduced on the real engine,
judged on the broken and the fixed version (cases are data, and other packages add theirs
through the ``batchprobe.corpus`` entry-point group)."""

from batchprobe.corpus.models import Case, CaseResult, Expectation, VersionCase
from batchprobe.corpus.registry import (
    ENTRY_POINT_GROUP,
    Corpus,
    builtin_cases,
    default_corpus,
    plugin_cases,
)
from batchprobe.corpus.run import case_model, check, run_case, run_options

__all__ = [
    "ENTRY_POINT_GROUP",
    "Case",
    "CaseResult",
    "Corpus",
    "Expectation",
    "VersionCase",
    "builtin_cases",
    "case_model",
    "check",
    "default_corpus",
    "plugin_cases",
    "run_case",
    "run_options",
]
