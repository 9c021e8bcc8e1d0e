"""Conversation turns: a later turn is built at send time from the turn before, as it was
sent and answered in the same arm.

Completions: the earlier prompt, its whole answer, then the new message (empty for a pure
continuation: the prompt is then exactly the earlier prompt plus its completion). Chat: the
earlier messages, the earlier user message, the answer as the assistant's message, then the
new message as the next user message.
"""

from __future__ import annotations

from batchprobe.client.types import ChatMessage
from batchprobe.results.items import WorkItem


def continue_turn(item: WorkItem, previous: WorkItem, answer: str) -> WorkItem:
    """``item`` (a turn whose ``prompt`` is its new message) as sent after ``previous`` (the
    turn before, as it was sent) answered ``answer``.

    A count turn (one planned with a count) keeps counting where the answer stopped; when
    the answer broke the count, what follows is not determined and the turn has no count.
    """
    count = None if item.count is None or previous.count is None else previous.count.continued(answer)
    if item.api == "chat":
        history = (
            *previous.history,
            ChatMessage(role="user", content=previous.prompt),
            ChatMessage(role="assistant", content=answer),
        )
        return item.model_copy(update={"history": history, "count": count})
    prompt = previous.prompt + answer + item.prompt
    return item.model_copy(update={"prompt": prompt, "count": count})
