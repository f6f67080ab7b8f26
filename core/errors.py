"""Errors typed by what the caller should do about them."""

from __future__ import annotations

#: process exit code when the daemon refuses to start (sysexits EX_CONFIG)
EXIT_REFUSE_TO_START = 78
#: `vigil health` / `vigil status` found the daemon unhealthy
EXIT_UNHEALTHY = 1
#: a command line or input the command cannot take
EXIT_USAGE = 2
#: the reader of a command's output went away (``| head``): 128 + SIGPIPE, as a shell reports a
#: command that signal ended (Python ignores it, so the write raises instead)
EXIT_CLOSED_PIPE = 141


class VigilError(Exception):
    """Base of vigil's own errors."""


class RetryableError(VigilError):
    """Transient: back off and try again (network blip, 429, 5xx, stale connection)."""


class HaltTradingError(VigilError):
    """Stop opening positions until a person looks (state inconsistency, broker disagreement)."""


class RefuseToStartError(VigilError):
    """The daemon must not start: bad config, unusable state dir, state from a newer schema."""
