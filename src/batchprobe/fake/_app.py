"""Building the aiohttp application: routes plus the per-app state."""

from __future__ import annotations

from aiohttp import web

from batchprobe.fake import _handlers
from batchprobe.fake._config import FakeServerConfig
from batchprobe.fake._state import STATE_KEY, ServerState

# Haystack prompts of tens of thousands of tokens exceed aiohttp's 1 MiB default.
_MAX_BODY_BYTES = 64 * 1024 * 1024


def build_app(config: FakeServerConfig) -> web.Application:
    """The fake server as an aiohttp application; all its state lives on the app."""
    app = web.Application(client_max_size=_MAX_BODY_BYTES)
    app[STATE_KEY] = ServerState(config)
    app.router.add_get("/v1/models", _handlers.models)
    app.router.add_get("/health", _handlers.health)
    app.router.add_get("/metrics", _handlers.metrics)
    completions = _handlers.completions if config.serve_completions else _handlers.not_found
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", _handlers.chat_completions)
    # llama.cpp's tokenizer endpoint, so a client can aim a logit_bias at a word.
    app.router.add_post("/tokenize", _handlers.tokenize)
    if config.prefix_cache or config.kv_tokens is not None:
        # Only a server with a prompt cache or a stated KV pool has llama.cpp's /props;
        # without either, 404.
        app.router.add_get("/props", _handlers.props)
    return app
