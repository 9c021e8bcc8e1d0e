"""Workloads: recall (needle in a haystack, unique needle per session) and decode."""
