"""Webhook notifications: fills, exits, trading halted/resumed, breaker opened/closed, health
failures and a daily summary, sent off the decision path (a bounded queue and a supervised loop),
rate-limited and retried with ``core.backoff``."""
