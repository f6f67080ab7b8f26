"""Text embeddings behind one port: a local deterministic default and an OpenAI-compatible client.

``HashedNgramEmbedder`` needs no model download: hashed character 3-5-grams (word-bounded; the
counts of scikit-learn's HashingVectorizer, computed by ``memory.char_hash`` without importing
scikit-learn), sublinear term frequency, L2-normalised, 256 dimensions. It is stateless,
so the same text gives the same vector in every process and every year (an IDF weighting would need
a fitted corpus and would drift as the memory grows, so there is none). It catches near-duplicates
and shared vocabulary ("stop loss", "RSI 71"), not meaning; for meaning, point
``VIGIL_MEMORY__EMBEDDINGS=openai`` at an OpenAI-compatible ``/v1/embeddings`` server (Ollama's
nomic-embed-text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import aiohttp
import numpy as np
import orjson

from memory.char_hash import HashedCharNgrams
from memory.port import StoreUnavailableError
from state.line_text import as_one_line

LOCAL_DIM = 256
#: one text's vector is tens of kB (3,072 floats as JSON); a larger answer is no embeddings, and
#: it was read into memory whole
EMBEDDINGS_MAX_BYTES = 4 << 20
ERROR_TEXT_BYTES = 200  # of an error answer, quoted in the reason


class TextEmbedder(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]: ...


class HashedNgramEmbedder:
    name = "local-hashed-char-ngrams-256"

    def __init__(self, dim: int = LOCAL_DIM) -> None:
        self._ngrams = HashedCharNgrams(dim)

    def embed_now(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        counts = self._ngrams.counts(list(texts))
        weighted = np.log1p(counts)  # sublinear tf: a repeated n-gram does not dominate
        norms = np.linalg.norm(weighted, axis=1, keepdims=True)
        unit = weighted / np.where(norms > 0, norms, 1.0)
        return [tuple(float(round(v, 6)) for v in row) for row in unit]

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        return self.embed_now(texts)


class OpenAIEmbedder:
    """POST ``{base_url}/v1/embeddings`` with ``{"model", "input": [...]}`` (OpenAI, Ollama, vLLM).
    A failure raises ``StoreUnavailableError``: the caller writes the insight without an
    embedding rather than inventing one."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout_secs: float = 10.0
    ) -> None:
        self.name = f"openai:{model}"
        self._url = base_url.rstrip("/") + "/v1/embeddings"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs)

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        payload: dict[str, Any] = {"model": self._model, "input": list(texts)}
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout) as session,
                session.post(self._url, json=payload, headers=self._headers) as response,
            ):
                if response.status != 200:
                    # the head says why; text() read the page whole and raised
                    # UnicodeDecodeError past every caller on one that was not UTF-8
                    head = await response.content.read(ERROR_TEXT_BYTES)
                    raise StoreUnavailableError(
                        f"embeddings server answered {response.status}: "
                        f"{as_one_line(head.decode('utf-8', 'replace'))}"
                    )
                raw = await _read_bounded(response)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise StoreUnavailableError(f"embeddings server unreachable: {exc!r}") from exc
        try:
            return _vectors(orjson.loads(raw), len(texts))
        except ValueError as exc:
            raise StoreUnavailableError(f"embeddings server answered 200 with {exc}") from exc


async def _read_bounded(response: aiohttp.ClientResponse) -> bytes:
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > EMBEDDINGS_MAX_BYTES:
            raise StoreUnavailableError(
                f"embeddings server answered 200 with over {EMBEDDINGS_MAX_BYTES >> 20} MiB, "
                "not read"
            )
        chunks.append(chunk)
    return b"".join(chunks)


#: the largest magnitude a float32 blob holds: past it a value is stored as infinity
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _vectors(body: object, count: int) -> list[tuple[float, ...]]:
    """The answer's vectors in input order. Anything else (another API's JSON, a value that is
    text, NaN or past float32) is a ValueError naming it: taken as vectors, a NaN made every
    text recall's scores NaN; read as they came, a missing key or a value of text was a
    KeyError or ValueError past every caller's StoreUnavailableError catch."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError(f"no data list: {str(body)[:80]!r}")
    if len(data) != count:
        raise ValueError(f"{len(data)} embeddings for {count} texts")
    items: list[tuple[int, tuple[float, ...]]] = []
    for item in data:
        index = item.get("index", 0) if isinstance(item, dict) else None
        values = item.get("embedding") if isinstance(item, dict) else None
        if type(index) is not int or not isinstance(values, list) or not values:
            raise ValueError(f"an item that is no embedding: {str(item)[:80]!r}")
        for v in values:
            if type(v) not in (int, float) or not abs(v) <= _FLOAT32_MAX:
                raise ValueError(f"a value {str(v)[:40]!r} that is no float32")
        items.append((index, tuple(float(v) for v in values)))
    items.sort(key=lambda pair: pair[0])
    return [vector for _index, vector in items]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if va.shape != vb.shape:
        return 0.0
    norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb / norm) if norm > 0 else 0.0
