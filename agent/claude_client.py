"""One model call with our own bounded retries, over ``anthropic.AsyncAnthropic``.

The SDK's retries are off (``max_retries=0``): it would wait out any ``retry-after``, even 90 s,
inside a decision. Here a call makes at most ``max_attempts`` tries; a ``retry-after`` up to
``retry_after_cap_secs`` is honoured, a longer one fails now (the fallback decides, the breaker
counts it). Waits run on the injected clock. Each try is recorded as an ``Attempt`` for the journal,
with its usage whenever the API billed tokens (an answer that fails validation still costs money).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from agent.budget import TOKEN_FIELDS, PriceSource, usage_problems
from agent.claude_schema import AnswerInvalid
from agent.claude_wire import (
    MODEL_NOT_FOUND,
    answer_text,
    retry_after,
    status_detail,
    status_kind_of,
    usable_key,
    whole_call_secs,
)
from agent.config import AgentConfig
from agent.decision import Usage
from core.backoff import Backoff, retrying
from core.clock import Clock

if TYPE_CHECKING:  # the SDK is imported when a client is built or called, not with this module
    import anthropic
    from anthropic.types import Message

log = logging.getLogger(__name__)

T = TypeVar("T")


#: a decision's default: one retry after at most 8 s (a decision is worth less the later it comes)
DEFAULT_BACKOFF = Backoff(base_secs=1.0, cap_secs=8.0, jitter_fraction=0.5, max_attempts=2)


class RetryPolicy(BaseModel):
    """The one retry policy (``core.backoff.Backoff``) plus how long a server's retry-after may be."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backoff: Backoff = DEFAULT_BACKOFF
    retry_after_cap_secs: float = 10.0

    @property
    def max_attempts(self) -> int:
        return self.backoff.max_attempts


@dataclass(frozen=True)
class Credentials:
    """Where the key comes from (``read_key``: env or secret file, read again on each call) and
    how to build an SDK client on a key (``build``)."""

    read_key: Callable[[], str | None]
    build: Callable[[str], anthropic.AsyncAnthropic]


class Attempt(BaseModel):
    """One try, as the journal shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempt: int
    outcome: Literal["ok", "failed", "not_sent"]  # not_sent: see ``ModelGone``
    kind: str = ""  # failure kind, e.g. "overloaded", "timeout", "invalid_json"
    detail: str = ""
    stop_reason: str | None = None
    usage: Usage | None = None
    model: str = ""  # the model this try asked (the failover chain may change it)


#: the 1-hour part of the cache writes, billed at its own price (``AgentPricing.cost_usd``)
_ONE_HOUR = "cache_creation.ephemeral_1h_input_tokens"

#: failures that fail over to the next model of the chain: the model is overloaded, gone
#: (retired: a 404 naming it) or the service is failing, not the request
FAILOVER_KINDS = frozenset({"overloaded", "rate_limited", "server_error", MODEL_NOT_FOUND})


#: why the day's budget allows no further try, given what this call's tries have cost so far
#: (USD); None when it allows one
SpendCheck = Callable[[float], str | None]


#: a try that never went out (``ModelGone``): no call for the ledger, no verdict for the breaker
NOT_SENT: Literal["not_sent"] = "not_sent"


def nothing_sent(attempts: Sequence[Attempt]) -> bool:
    """No try of these went out: every one a retired model's ``not_sent`` (none at all is not
    this: a call refused before it was tried is its caller's to count)."""
    return bool(attempts) and all(a.outcome == NOT_SENT for a in attempts)


def call_outcome(attempts: Sequence[Attempt], *, ok: bool) -> str:
    """A call's outcome as a journal line says it: ok, failed, or not_sent."""
    return "ok" if ok else NOT_SENT if nothing_sent(attempts) else "failed"


def billed_usd(attempts: Sequence[Attempt]) -> float:
    """What the tries cost (a failed one is billed too when the API counted tokens)."""
    return sum(a.usage.cost_usd for a in attempts if a.usage is not None)


def fails_over(kind: str) -> bool:
    return kind in FAILOVER_KINDS or kind.startswith("http_5")


class CallFailed(Exception):
    """Every try failed (or one failed in a way not worth retrying); ``attempts`` says how.
    ``budget_spent``: the day's budget refused the retry the failure was worth (its reason), so
    a caller says the spent budget as it says it when it asks nothing (once a day), not as a
    failure of the model's at each call."""

    def __init__(self, attempts: list[Attempt], budget_spent: str | None = None) -> None:
        last = attempts[-1]
        super().__init__(f"{last.kind}: {last.detail}")
        self.attempts = attempts
        self.kind = last.kind
        self.detail = last.detail
        self.budget_spent = budget_spent


class ModelGone(CallFailed):
    """Every model of the chain answered 404 ``model_not_found`` earlier: none was asked again
    (until a restart, or a config naming another model). No call went out: nothing to bill, and
    nothing for the breaker to count: its one try is ``not_sent`` (``nothing_sent``), which the
    ledger and the breaker's guard leave out."""


@dataclass(frozen=True)
class CallResult(Generic[T]):
    value: T
    attempts: list[Attempt]


class _TryFailed(Exception):
    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        retryable: bool,
        wait_secs: float | None = None,
        usage: Usage | None = None,
        stop_reason: str | None = None,
    ) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.retryable = retryable
        self.wait_secs = wait_secs  # server-requested wait (retry-after), if any
        self.usage = usage
        self.stop_reason = stop_reason


def build_anthropic_client(config: AgentConfig, api_key: str) -> anthropic.AsyncAnthropic:
    """The real SDK client: our retries only, the configured timeout, optional base_url."""
    import anthropic  # ~1-5 s of imports, paid only by a daemon that has a key

    from agent.claude_http import ACCEPTED_ENCODINGS, BoundedAnswers

    return anthropic.AsyncAnthropic(
        api_key=api_key,
        base_url=config.base_url,
        timeout=config.timeout_secs,
        max_retries=0,
        # each answer read within a bound, a gzip one too (agent/claude_http.py)
        http_client=anthropic.DefaultAsyncHttpxClient(transport=BoundedAnswers()),
        default_headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


class ClaudeClient:
    def __init__(
        self,
        sdk: anthropic.AsyncAnthropic,
        clock: Clock,
        pricing: PriceSource,
        policy: RetryPolicy | None = None,
        rng: random.Random | None = None,
        *,
        credentials: Credentials | None = None,
    ) -> None:
        self._sdk = sdk
        self._credentials = credentials
        self._clock = clock
        self._pricing = pricing
        self.policy = policy or RetryPolicy()
        self._rng = rng or random.Random()
        self._gone: set[str] = set()  # models the API said it does not serve (logged once)

    async def aclose(self) -> None:
        await self._sdk.close()

    async def refresh_credentials(self) -> bool:
        """Read the key again (a rotated key takes effect without a restart); when it changed,
        rebuild the SDK client on it. True when rebuilt. Called before a breaker's trial call."""
        if self._credentials is None:
            return False
        try:
            key = self._credentials.read_key()
        except (OSError, UnicodeDecodeError) as exc:  # a secret file mid-rotation: keep the old
            log.warning("could not re-read the Anthropic API key: %s", exc)
            return False
        if not key or key == self._sdk.api_key:
            return False
        if not usable_key(key):  # a header value only, or every call after this one fails
            log.warning(
                "the Anthropic API key file holds no usable key (%d characters with a space, a "
                "line break or a non-ASCII character): the current key is kept",
                len(key),
            )
            return False
        old, self._sdk = self._sdk, self._credentials.build(key)
        await old.close()
        log.info("Anthropic API key changed: the client was rebuilt on the new key")
        return True

    async def call_chain(
        self,
        request: dict[str, Any],
        parse: Callable[[str], T],
        failover: Sequence[str] = (),
        *,
        spend: SpendCheck | None = None,
    ) -> CallResult[T]:
        """``call`` on the request's model, then on each model of ``failover`` in turn while the
        failure is an overload, a server error or a model the API no longer serves (``fails_over``):
        primary -> secondary before anyone falls back to rules. One chain is one call for the breaker and the ledger; every
        try of every model is in the attempts, with its model. ``spend``: see ``call``, counting
        every model's tries."""
        primary = str(request.get("model", ""))
        # a model the API said it does not serve is not asked again: it would 404 every time
        chain = [m for m in dict.fromkeys([primary, *failover]) if m not in self._gone]
        if not chain:
            detail = f"not asked: {primary} answered 404 model_not_found earlier"
            gone = Attempt(attempt=1, outcome=NOT_SENT, kind=MODEL_NOT_FOUND, detail=detail)
            raise ModelGone([gone.model_copy(update={"model": primary})])
        attempts: list[Attempt] = []

        def spent(cost: float) -> str | None:
            return None if spend is None else spend(cost + billed_usd(attempts))

        for index, model in enumerate(chain):
            try:
                result = await self.call({**request, "model": model}, parse, spend=spent)
            except CallFailed as failure:
                attempts.extend(_with_model(failure.attempts, model))
                following = chain[index + 1] if index + 1 < len(chain) else None
                if following is None or not fails_over(failure.kind):
                    if failure.kind == MODEL_NOT_FOUND:
                        self._say_gone(model, None)
                    raise CallFailed(attempts, failure.budget_spent) from None
                if failure.kind == MODEL_NOT_FOUND:
                    self._say_gone(model, following)
                else:
                    log.warning(
                        "model %s failed (%s): failing over to %s", model, failure.kind, following
                    )
                continue
            attempts.extend(_with_model(result.attempts, model))
            return CallResult(value=result.value, attempts=attempts)
        raise CallFailed(attempts)  # pragma: no cover - the loop returns or raises

    def _say_gone(self, model: str, instead: str | None) -> None:
        """A retired model is said once, with what is used instead; it is not asked again."""
        if model in self._gone:
            return
        self._gone.add(model)
        then = (
            f"asking {instead} (agent.failover_models) instead"
            if instead is not None
            else "no failover model is left to ask"
        )
        log.warning(
            "model %s is not served by the Messages API (404 not_found_error: retired, or not a "
            "model id): %s; name a current model in agent.model",
            model,
            then,
        )

    async def call(
        self,
        request: dict[str, Any],
        parse: Callable[[str], T],
        *,
        spend: SpendCheck | None = None,
    ) -> CallResult[T]:
        """Send ``request`` (``messages.create`` kwargs); ``parse`` turns the text into ``T`` or
        raises ``AnswerInvalid``. Raises ``CallFailed`` when no try produced a usable answer.
        ``spend``: asked before each retry with what the tries so far cost; a reason ends the
        call (an invalid answer is billed, and one may cost past the budget on its own).

        The tries run under ``core.backoff.retrying`` (tenacity sleeping on the injected clock):
        a retryable failure waits the backoff, or the server's retry-after when it is longer and
        within the cap; a longer retry-after or a failure not worth retrying ends the call now.
        """
        attempts: list[Attempt] = []
        refused: list[str] = []  # the budget's reason, when it refused a retry

        def worth_retrying(exc: BaseException) -> bool:
            if not isinstance(exc, _TryFailed) or not self._worth_retrying(exc, len(attempts)):
                return False
            why = None if spend is None else spend(billed_usd(attempts))
            if why is not None:
                last = attempts[-1]
                attempts[-1] = last.model_copy(
                    update={"detail": f"{last.detail} (not retried: {why})"}
                )
                refused.append(why)
            return why is None

        try:
            async for trying in retrying(
                self.policy.backoff,
                self._clock,
                retry_on=worth_retrying,
                rng=self._rng,
                wait_hint=_wait_hint,
            ):
                with trying:
                    number = trying.retry_state.attempt_number
                    try:
                        value, usage, stop = await self._try_once(request, parse)
                    except _TryFailed as failure:
                        self._note_long_retry_after(failure)
                        attempts.append(_failed_attempt(number, failure))
                        # a retired model is said once, by the chain, not at every decision
                        quiet = failure.kind == MODEL_NOT_FOUND
                        log.log(
                            logging.DEBUG if quiet else logging.WARNING,
                            "claude call try %d failed: %s",
                            number,
                            failure,
                        )
                        raise
                    attempts.append(
                        Attempt(attempt=number, outcome="ok", stop_reason=stop, usage=usage)
                    )
                    return CallResult(value=value, attempts=attempts)
        except _TryFailed:
            raise CallFailed(attempts, refused[-1] if refused else None) from None
        raise CallFailed(attempts)  # pragma: no cover - tenacity returns or re-raises

    def _worth_retrying(self, failure: _TryFailed, tries: int) -> bool:
        """Another try after ``failure`` (try number ``tries``)?"""
        if not failure.retryable or tries >= self.policy.max_attempts:
            return False
        return not self._retry_after_too_long(failure)

    def _retry_after_too_long(self, failure: _TryFailed) -> bool:
        return (
            failure.wait_secs is not None and failure.wait_secs > self.policy.retry_after_cap_secs
        )

    def _note_long_retry_after(self, failure: _TryFailed) -> None:
        """Say in the journaled detail why a server's retry-after is not waited out."""
        if failure.retryable and self._retry_after_too_long(failure):
            failure.detail += (
                f" (retry-after {failure.wait_secs:g} s > cap "
                f"{self.policy.retry_after_cap_secs:g} s: not waiting)"
            )

    async def _try_once(
        self, request: dict[str, Any], parse: Callable[[str], T]
    ) -> tuple[T, Usage, str | None]:
        message = await self._send(request)
        usage = self._usage(message, request)
        stop = message.stop_reason
        if stop is not None and not isinstance(stop, str):
            raise _TryFailed(
                "bad_response", f"stop_reason {stop!r:.40} is not text", retryable=True, usage=usage
            )
        if stop == "refusal":
            raise _TryFailed(
                "refusal", "the model refused", retryable=False, usage=usage, stop_reason=stop
            )
        if stop == "max_tokens":
            raise _TryFailed(
                "max_tokens",
                f"answer cut at max_tokens ({message.usage.output_tokens} output tokens)",
                retryable=False,
                usage=usage,
                stop_reason=stop,
            )
        text = answer_text(message.content)
        if text is None:
            raise _TryFailed(
                "bad_response",
                "content is not a list of blocks whose text blocks hold text",
                retryable=True,
                usage=usage,
                stop_reason=stop,
            )
        try:
            return parse(text), usage, stop
        except AnswerInvalid as exc:
            raise _TryFailed(
                exc.kind, exc.detail, retryable=True, usage=usage, stop_reason=stop
            ) from None

    async def _send(self, request: dict[str, Any]) -> Message:
        import anthropic  # loaded by now (the client was built from it): a dict lookup
        from anthropic.types import Message

        deadline = whole_call_secs(self._sdk)
        try:
            # the SDK's timeout bounds each socket read: a body trickled a byte at a time within
            # it would hold the decision for as long as the peer likes
            async with asyncio.timeout(deadline):
                message: Message = await self._sdk.messages.create(**request)
        except TimeoutError:
            raise _TryFailed(
                "timeout", f"no whole answer within {deadline} s", retryable=True
            ) from None
        except anthropic.APITimeoutError as exc:
            raise _TryFailed("timeout", str(exc), retryable=True) from None
        except anthropic.APIConnectionError as exc:
            raise _TryFailed("connection_error", str(exc), retryable=True) from None
        except anthropic.RateLimitError as exc:
            raise _TryFailed(
                "rate_limited", status_detail(exc), retryable=True, wait_secs=retry_after(exc)
            ) from None
        except anthropic.APIStatusError as exc:
            kind = status_kind_of(exc)
            retryable = exc.status_code >= 500 or exc.status_code == 408
            raise _TryFailed(
                kind, status_detail(exc), retryable=retryable, wait_secs=retry_after(exc)
            ) from None
        except (anthropic.APIResponseValidationError, ValueError, RecursionError) as exc:
            # ValueError: the SDK hands a 200 whose body is not JSON (a proxy page) to json.loads;
            # RecursionError: one nested deeper than the parser's recursion limit
            raise _TryFailed("bad_response", repr(exc)[:300], retryable=True) from None
        if not isinstance(message, Message) or message.usage is None or message.content is None:
            raise _TryFailed(
                "bad_response", "a 200 answer that is not a Messages API message", retryable=True
            )
        return message

    def _usage(self, message: Message, request: dict[str, Any]) -> Usage:
        """The billed usage, or a non-retryable ``usage_anomaly`` when the counts make no sense
        (negative, not integers, past any real call, or more output than the request's
        ``max_tokens`` let the model write): never a cost computed from nonsense."""
        model = str(request.get("model", ""))
        counts = {name: getattr(message.usage, name, None) for name in TOKEN_FIELDS}
        creation = getattr(message.usage, "cache_creation", None)
        one_hour = getattr(creation, "ephemeral_1h_input_tokens", None)
        problems = usage_problems({**counts, _ONE_HOUR: one_hour})
        output, limit = counts["output_tokens"], request.get("max_tokens")
        if not problems and type(output) is int and type(limit) is int and output > limit:
            problems.append(f"output_tokens={output} > the request's max_tokens {limit}")
        if problems:
            raise _TryFailed(
                "usage_anomaly",
                f"implausible usage block, not billed: {', '.join(problems)}",
                retryable=False,
                stop_reason=message.stop_reason if isinstance(message.stop_reason, str) else None,
            )
        return self._pricing.for_model(model).usage(
            **{name: int(counts[name] or 0) for name in TOKEN_FIELDS},
            cache_creation_1h_input_tokens=int(one_hour or 0),
            model=model or None,
        )


def _with_model(attempts: Sequence[Attempt], model: str) -> list[Attempt]:
    return [a.model_copy(update={"model": model}) for a in attempts]


def _failed_attempt(number: int, failure: _TryFailed) -> Attempt:
    return Attempt(
        attempt=number,
        outcome="failed",
        kind=failure.kind,
        detail=failure.detail[:500],
        stop_reason=failure.stop_reason,
        usage=failure.usage,
    )


def _wait_hint(exc: BaseException) -> float | None:
    """The server's own wait (retry-after), which the backoff never undercuts."""
    return exc.wait_secs if isinstance(exc, _TryFailed) else None
