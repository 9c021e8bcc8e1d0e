"""The JSON body and headers of one request."""

from __future__ import annotations

from typing import Any

from batchprobe.client.types import CompletionRequest

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def request_body(req: CompletionRequest, model: str | None) -> dict[str, Any]:
    """The OpenAI request body; ``extra_body`` is merged last so it can override any field."""
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    if req.api == "chat":
        earlier = [{"role": m.role, "content": m.content} for m in req.messages]
        body["messages"] = [*earlier, {"role": "user", "content": req.prompt}]
    else:
        body["prompt"] = req.prompt
    body["max_tokens"] = req.max_tokens
    body["temperature"] = req.temperature
    body["stream"] = req.stream
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    if req.n > 1:
        body["n"] = req.n
    if req.seed is not None:
        body["seed"] = req.seed
    if req.logprobs is not None:
        if req.api == "chat":
            body["logprobs"] = True
            body["top_logprobs"] = req.logprobs
        else:
            body["logprobs"] = req.logprobs
    body.update(req.extra_body)
    return body


def request_headers(request_id: str | None, api_key: str | None) -> dict[str, str]:
    """JSON, the request id (unless None) and the API key (if any)."""
    headers = {"Content-Type": "application/json"}
    if request_id is not None:
        headers["x-request-id"] = request_id
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers
