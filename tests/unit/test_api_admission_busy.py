"""Admission while a decision is in flight: one request at a time, the full limit back after."""

from __future__ import annotations

import asyncio

from api.admission import Admission


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_decision_in_flight_leaves_one_slot_and_its_end_gives_the_rest_back() -> None:
    deciding = True
    admission = Admission(4, wait_secs=60.0, trading_busy=lambda: deciding)
    assert admission.limit == 1
    assert await admission.admit()  # the one request allowed beside the decision
    waiting = [asyncio.create_task(admission.admit()) for _ in range(3)]
    await _settle()
    assert admission.in_flight == 1 and admission.waiting == 3

    admission.release()  # still deciding: the slot goes to one waiter, no more
    await _settle()
    assert admission.in_flight == 1 and admission.waiting == 2
    assert sum(t.done() for t in waiting) == 1

    deciding = False  # the decision is done: the next release fills up to the full limit
    admission.release()
    await _settle()
    assert admission.limit == 4
    assert all(t.done() and t.result() for t in waiting)
    assert admission.in_flight == 2 and admission.waiting == 0


async def test_a_new_request_after_the_decision_finds_the_waiters_served_first() -> None:
    deciding = True
    admission = Admission(3, wait_secs=60.0, trading_busy=lambda: deciding)
    assert await admission.admit()
    late = asyncio.create_task(admission.admit())
    await _settle()
    assert not late.done()
    deciding = False
    # no release happened: the new request hands the freed slots out, the waiter first
    assert await asyncio.wait_for(admission.admit(), 1.0)
    await _settle()
    assert late.done() and late.result()
    assert admission.in_flight == 3 and admission.waiting == 0
