"""Async OpenAI-compatible client (aiohttp) with per-token timing."""
