"""The MemoryStore contract against a real Neo4j server: set NEO4J_URI (+ NEO4J_USER,
NEO4J_PASSWORD) to run it, e.g. against ``docker compose up neo4j``. Each test runs in a fresh
database state: every node is deleted before and after (use a throwaway server)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from contract.memory_contract import MemoryStoreContract
from memory.neo4j_store import Neo4jMemoryStore

URI = os.environ.get("NEO4J_URI")

needs_server = pytest.mark.skipif(
    URI is None, reason="NEO4J_URI is not set: no Neo4j server to run the MemoryStore contract on"
)


@needs_server
class TestNeo4jMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[Neo4jMemoryStore]:
        assert URI is not None
        store = Neo4jMemoryStore(
            URI, os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD")
        )
        await store._run("MATCH (n) DETACH DELETE n")
        yield store
        await store._run("MATCH (n) DETACH DELETE n")
        await store.close()


async def test_unreachable_server_is_unavailable() -> None:
    from memory.port import StoreUnavailableError

    store = Neo4jMemoryStore("bolt://127.0.0.1:9", "neo4j", "x")
    with pytest.raises(StoreUnavailableError):
        await store.counts()
    await store.close()
