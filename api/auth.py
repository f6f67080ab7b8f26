"""Bearer-token auth: every data endpoint needs ``Authorization: Bearer <token>``.

The token comes from ``VIGIL_API_TOKEN`` (environment or the secret file ``vigil_api_token``);
without one, on loopback only, a random token is made and kept in ``<state dir>/api_token``
(mode 0600) for the operator's tools to read. A non-loopback address without a configured token
refuses to start: a trading daemon's controls are not left open on a network.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
from pathlib import Path
from typing import Annotated

from fastapi import HTTPException, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import Scope

from api.asgi import first_header
from api.config import is_loopback, token_problem
from core.errors import RefuseToStartError
from core.regular_file import FileTooLargeError, SymlinkRefusedError, read_regular_text

TOKEN_FILE_NAME = "api_token"
#: a token is 43 characters: read whole, a file of a gigabyte (a crash's zeros) took it all
_TOKEN_FILE_MAX_BYTES = 4096
_SCHEME = HTTPBearer(
    auto_error=False, description="the API token (VIGIL_API_TOKEN or <state dir>/api_token)"
)


def resolve_token(configured: str | None, host: str, state_dir: Path) -> str:
    if configured:
        return configured
    if not is_loopback(host):
        raise RefuseToStartError(
            f"the API would listen on {host} without a token: set VIGIL_API_TOKEN (or the secret "
            "file vigil_api_token), or keep VIGIL_API__HOST on 127.0.0.1"
        )
    path = state_dir / TOKEN_FILE_NAME
    try:  # a regular file only: a FIFO there waited for a writer, and the start hung
        existing = _read_token(path)
    except FileNotFoundError:
        existing = ""
    except (OSError, UnicodeDecodeError) as exc:  # were tracebacks; someone's file: kept
        # the only OSErrors without a strerror are read_regular_file's own refusals
        if isinstance(exc, FileTooLargeError):
            why = f"over {_TOKEN_FILE_MAX_BYTES:,} bytes"
        elif isinstance(exc, SymlinkRefusedError):
            why = "a symlink: the token is kept only in the state dir"
        elif isinstance(exc, OSError):
            why = exc.strerror or "not a regular file"
        else:
            why = "not UTF-8"
        raise RefuseToStartError(
            f"{path} cannot be read as the API token ({why}): remove it (a new token is made) "
            "or set VIGIL_API_TOKEN"
        ) from None
    problem = token_problem(existing) if existing else None
    if problem is not None:  # someone's file: kept
        raise RefuseToStartError(
            f"{path} cannot be the API token ({problem}): remove it (a new token is made) or "
            "set VIGIL_API_TOKEN"
        )
    if existing:
        return existing
    token = secrets.token_urlsafe(32)
    # never through a symlink (one to no file read as no token): the secret was written wherever
    # it pointed; nor blocking on a FIFO put there since the read
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        cause = "a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise RefuseToStartError(
            f"{path} cannot be written with a new API token ({cause}): remove it (a new token is "
            "made) or set VIGIL_API_TOKEN"
        ) from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def read_token_file(state_dir: Path) -> str | None:
    try:
        return _read_token(state_dir / TOKEN_FILE_NAME) or None
    except (OSError, UnicodeDecodeError):
        return None


def _read_token(path: Path) -> str:
    """The token in ``path``, never through a symlink there: one to someone's file was read as
    the token (its first line sent as a bearer token, the API guarded by it), where making one
    refuses the link."""
    return read_regular_text(path, max_bytes=_TOKEN_FILE_MAX_BYTES, follow_links=False).strip()


class BearerAuth:
    """A FastAPI dependency comparing the bearer token in constant time."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def __call__(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_SCHEME)]
    ) -> None:
        refusal = self.refusal(credentials.credentials if credentials is not None else None)
        if refusal is not None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED, refusal, headers={"WWW-Authenticate": "Bearer"}
            )

    def scope_refusal(self, scope: Scope) -> str | None:
        """``refusal`` of a raw ASGI request's first ``Authorization`` header, read as FastAPI's
        ``HTTPBearer`` reads it (the scheme in any case)."""
        header = (first_header(scope, b"authorization") or b"").decode("latin-1")
        scheme, _, credentials = header.partition(" ")
        return self.refusal(credentials if scheme.lower() == "bearer" else None)

    def refusal(self, credentials: str | None) -> str | None:
        """Why ``credentials`` (the token after ``Bearer``; None: no bearer header) are refused,
        or None when they are the token."""
        if not credentials or not credentials.strip():
            return "a bearer token is required (Authorization: Bearer <token>)"
        if not hmac.compare_digest(credentials.strip().encode(), self._expected):
            return "wrong token"
        return None


__all__ = ["TOKEN_FILE_NAME", "BearerAuth", "read_token_file", "resolve_token"]
