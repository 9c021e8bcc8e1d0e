"""One reply's tokens as they are generated: counted on its flight (the triggers read the
counts), and revised once when the ``early`` trigger marks the flight mid-reply."""

from __future__ import annotations

from batchprobe.fake._answer import Answer, fault_from, repeated
from batchprobe.fake._clock import TokenClock, sleep_until
from batchprobe.fake._config import LateFault
from batchprobe.fake._pool import REPEATED
from batchprobe.fake._state import Flight, ServerState

_LATE_FAULTS: dict[str, LateFault] = {
    "corrupt": "corrupt",
    "finish_error": "finish_error",
    "truncated_stream": "truncated_stream",
    "clean_stop": "clean_stop",
}


def late_fault(state: ServerState) -> LateFault | None:
    """The fault the early trigger applies mid-reply, or None when it is not configured."""
    config = state.config
    return _LATE_FAULTS.get(config.fault) if config.fault_when == "early" else None


class Progress:
    def __init__(self, state: ServerState, flight: Flight, late: LateFault | None) -> None:
        self._state = state
        self._flight = flight
        self._late = late
        self._revised = False
        self._pool_revised = False

    @property
    def cut(self) -> bool:
        """The reply was ended by ``truncated_stream``: drop the connection, send no end."""
        return self._revised and self._late == "truncated_stream"

    def token(self) -> None:
        """Token sent (or, without streaming, generated)."""
        self._state.note_token(self._flight)

    @property
    def wedged(self) -> bool:
        """The server stopped generating (abort_wedge): no token is due any more."""
        return self._state.wedged

    def gone(self) -> None:
        """The client hung up before the reply's end."""
        self._state.client_gone(self._flight)

    def finish(self) -> None:
        """Only the reply's last bytes are left to write: it stops counting as in flight."""
        self._state.finish(self._flight)

    def revise(self, answer: Answer, index: int) -> Answer:
        """``answer`` as it stands when token ``index`` is due: from the departure that
        marked the flight on, faulted, or from where a pool fault cut it (each once; later
        calls return it unchanged)."""
        cut = self._flight.pool_cut
        if cut is not None and not self._pool_revised and index >= cut[0]:
            self._pool_revised = True
            at, how = cut
            return answer.kept(at, "error") if how == "error" else repeated(answer, at, REPEATED)
        start = self._flight.fault_from
        if self._late is None or self._revised or start is None or index < start:
            return answer
        self._revised = True
        return fault_from(answer, start, self._late)


async def generate_silently(clock: TokenClock, progress: Progress, answer: Answer) -> Answer:
    """Live through the reply's tokens without emitting them (a non-streaming reply);
    return it as it ended."""
    index = 0
    while index < len(answer.texts):
        if index:
            clock.advance()
        await sleep_until(clock.due())
        answer = progress.revise(answer, index)
        if index >= len(answer.texts):
            break
        progress.token()
        index += 1
    return answer
