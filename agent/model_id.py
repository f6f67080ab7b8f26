"""A Claude model's id as a setting names it: one word of visible characters. An empty id, or one
with a space copied in (``"claude-sonnet-4-6 "``), was taken: every call then failed as a model
the API does not serve, and the rules decided all day. No stricter pattern: a proxy behind
``base_url`` may serve ids of its own shape (Bedrock's ``anthropic.claude-...:0``, Vertex's
``...@20250929``)."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator

MODEL_ID_MAX_CHARS: Final = 200


def _one_visible_word(value: str) -> str:
    if (
        not value
        or len(value) > MODEL_ID_MAX_CHARS
        or not all(c.isprintable() and not c.isspace() for c in value)
    ):
        raise ValueError(
            f"a model id is one word of visible characters (at most {MODEL_ID_MAX_CHARS}), "
            "e.g. claude-sonnet-4-6"
        )
    return value


ModelId = Annotated[str, AfterValidator(_one_visible_word)]

__all__ = ["MODEL_ID_MAX_CHARS", "ModelId"]
