"""Settings of the decision context (``[context]``, ``VIGIL_CONTEXT__FIELD``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.config_path import ConfigPath


class ContextConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True  # False: the prompt is the instructions and the snapshot, as before
    #: the organisation tier: a shared folder (policy.toml + *.md) or one file; None: no tier
    organisation_path: ConfigPath | None = None
    analysts: bool = True  # the four analysts' reports and day summaries (analysts.db)
    #: day summaries by Claude when a key is set (8 small calls per ticker and day, in the budget)
    model_summaries: bool = True
    session_ttl_secs: float = Field(86_400.0, gt=0)
    insights_per_ticker: int = Field(5, ge=0, le=50)
