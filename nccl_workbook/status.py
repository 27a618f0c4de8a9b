"""How a rank's run ended, how a whole run ended, and error text made readable: a leaf module.

Everything that records or shows a rank's fate (the tracer on the ranks, the cluster, the observer,
the diagnosis, the renderers, the CLI) takes its states and its error classification from here, so
that they agree. It imports nothing from the package.

Usage::

    classify_error("RuntimeError", "... Timed out waiting 3000ms for recv operation to complete")
    # RankStatus.TIMEOUT
    short_error("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                "Connection closed by peer")
    # 'RuntimeError: [pair.cc:553] Connection closed by peer'
"""

from __future__ import annotations

import enum
import re

__all__ = ["RankStatus", "Outcome", "classify_error", "short_error", "error_text"]


class RankStatus(str, enum.Enum):
    """How one rank's run ended."""

    OK = "ok"
    #: the rank waited in a collective (or for the store) until the process-group timeout fired,
    #: or did not answer within the client-side deadline
    TIMEOUT = "timeout"
    #: a peer closed its connection (gloo: "Connection closed by peer"); the rank itself was fine
    PEER_CLOSED = "peer_closed"
    #: the rank's own code raised
    ERROR = "error"
    #: the rank's process died (signal, abort) or its engine had to be killed
    CRASHED = "crashed"


class Outcome(str, enum.Enum):
    """How a whole run ended, from its ranks' statuses (see :meth:`Outcome.from_statuses`)."""

    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"
    CRASHED = "crashed"

    @classmethod
    def from_statuses(cls, statuses: list[RankStatus]) -> Outcome:
        """``crashed`` if any rank died, else ``timeout`` if any timed out, else ``error`` if any
        rank failed in another way, else ``ok``."""
        if RankStatus.CRASHED in statuses:
            return cls.CRASHED
        if RankStatus.TIMEOUT in statuses:
            return cls.TIMEOUT
        if any(s is not RankStatus.OK for s in statuses):
            return cls.ERROR
        return cls.OK


_TIMEOUT_MARKERS = (
    "timed out",
    "timeout",
    "watchdog caught collective operation",
)
_PEER_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "application timeout caused pair closure",
    "broken pipe",
    "ncclremoteerror",
)


def classify_error(exc_type: str, message: str) -> RankStatus:
    """Map an exception raised on a rank to a :class:`RankStatus`.

    >>> classify_error("RuntimeError", "[../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete")
    <RankStatus.TIMEOUT: 'timeout'>
    >>> classify_error("RuntimeError", "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1234")
    <RankStatus.PEER_CLOSED: 'peer_closed'>
    >>> classify_error("ValueError", "corrupt sample 17")
    <RankStatus.ERROR: 'error'>
    """
    text = message.lower()
    # Peer closure is checked first: gloo's "Application timeout caused pair closure" names a
    # timeout, but it is the peer's timeout, not this rank's.
    if any(m in text for m in _PEER_MARKERS):
        return RankStatus.PEER_CLOSED
    if exc_type in {"DistBackendError", "RuntimeError", "DistStoreError", "TimeoutError", "DistError"} and any(
        m in text for m in _TIMEOUT_MARKERS
    ):
        return RankStatus.TIMEOUT
    return RankStatus.ERROR


def error_text(exc: BaseException) -> str:
    """The first meaningful line of an exception with its type (``ValueError: corrupt sample 17``),
    without gloo's C++ frame dump that follows it. Not shortened: see :func:`short_error`."""
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


# "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553]" -> "[pair.cc:553]"
_SOURCE_PATH = re.compile(r"\[(?:\.\./|/|[A-Za-z]:\\)[^\]\s]*[/\\]([^/\\\]\s]+:\d+)\]")
_DDP_CALLBACK = re.compile(r"Got the following error when running the callback: ")
_DOUBLE_TYPE = re.compile(r"^(\w+: )\1")


def short_error(text: str | None, limit: int = 300) -> str:
    """An error message made readable in one line of a table or a terminal: build paths in gloo's
    ``[/__w/.../pair.cc:553]`` shortened to ``[pair.cc:553]`` (file and line kept), DDP's callback
    wrapper and a repeated exception type dropped, only the first line, cut at a word boundary to at
    most ``limit`` characters (``…`` marks the cut).

    >>> short_error("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer")
    'RuntimeError: [pair.cc:553] Connection closed by peer'
    >>> short_error("ValueError: the quick brown fox jumps over the lazy dog", limit=30)
    'ValueError: the quick brown…'
    """
    if not text:
        return ""
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = _DOUBLE_TYPE.sub(r"\1", _DDP_CALLBACK.sub("", _SOURCE_PATH.sub(r"[\1]", text)))
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"
