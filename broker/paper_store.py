"""The paper broker's state file: one JSON document, schema-versioned, replaced atomically.

A file that is missing means a fresh account. A file that is there but unreadable, torn, invalid,
inconsistent or from a newer vigil is never guessed at and never overwritten: reading it raises
``InvalidPaperStateError`` and the broker refuses to start, naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from broker.ledger import Ledger
from broker.orders import Mark, PaperOrder
from core.jsonread import UnreadableJsonError, loads_json
from core.regular_file import read_bytes_or_none
from state.atomic import atomic_write_bytes
from state.json_checks import lone_surrogate

#: the version this code writes and reads; any other version is refused
SCHEMA_VERSION: Final = 1
DOCUMENT_KIND: Final = "vigil.paper_broker"
#: the most of the file that is read: an account with its recent orders is kilobytes
PAPER_STATE_MAX_BYTES: Final = 16 << 20


class InvalidPaperStateError(ValueError):
    """The state file exists but cannot be trusted; the message says why."""


class PaperBookDocument(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    kind: Literal["vigil.paper_broker"] = DOCUMENT_KIND
    saved_at_ms: int = Field(ge=0)
    ledger: Ledger
    orders: tuple[PaperOrder, ...] = ()  # placement order: open ones and recent finished ones
    marks: dict[str, Mark] = Field(default_factory=dict)


def render_document(document: PaperBookDocument) -> bytes:
    return document.model_dump_json().encode("utf-8") + b"\n"


def parse_document(data: bytes) -> PaperBookDocument:
    """Check and parse the file's bytes; raises ``InvalidPaperStateError`` saying what is wrong."""
    try:
        raw = loads_json(data)
    except UnreadableJsonError as exc:
        raise InvalidPaperStateError(
            f"not JSON this vigil can read (torn or hand-damaged?): {exc}"
        ) from None
    if not isinstance(raw, dict):
        raise InvalidPaperStateError(f"expected a JSON object, found {type(raw).__name__}")
    half = lone_surrogate(data, raw)
    if half is not None:  # loaded, it failed every later save of the account
        raise InvalidPaperStateError(f"a \\u escape gives {half}, half of a surrogate pair")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise InvalidPaperStateError(
            f"schema_version {version!r} "
            + (
                "is from a newer vigil"
                if newer
                else f"is not one this vigil reads ({SCHEMA_VERSION})"
            )
        )
    try:
        return PaperBookDocument.model_validate(raw)
    except ValidationError as exc:
        raise InvalidPaperStateError(f"invalid content: {exc}") from None


def read_document(path: Path) -> PaperBookDocument | None:
    """The document at ``path``; None when there is no file. ``OSError`` for unreadable files:
    anything but a regular file (a FIFO hung the start, ``vigil status`` and the API's event
    loop), or one over ``PAPER_STATE_MAX_BYTES`` (a sparse file of gigabytes was read whole)."""
    data = read_bytes_or_none(path, max_bytes=PAPER_STATE_MAX_BYTES)
    return None if data is None else parse_document(data)


def write_document(path: Path, document: PaperBookDocument, *, durable: bool = True) -> None:
    """Replace ``path`` atomically (a crash leaves the old or the new file, never a mix);
    ``durable=False`` skips the fsyncs (``state.atomic``)."""
    atomic_write_bytes(path, render_document(document), durable=durable)
