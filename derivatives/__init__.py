"""vigil.derivatives: derivatives and outside-context sources, the adaptive monitor and its signal.

- ``signal``: ``derivatives_signal`` (the seed's weighted tanh of funding, taker ratio, long/short z).
- ``cache``: ``CachedSource`` (timeout, TTL on the Clock, capped jittered backoff, stale rule).
- ``binance``: premiumIndex funding/mark, open interest (24 h change), taker ratio + CVD, top-trader
  long/short z-score, quarterly basis; over ccxt's binanceusdm (``market.ccxt_client``).
- ``web_sources``: alternative.me Fear & Greed, DeFiLlama USDT+USDC supply, CoinGecko trending
  (sanitised names), BTC ETF flow (optional provider). ``liquidations``: forceOrder parser + window.
- ``monitor``: ``DerivativesMonitor`` (5 min / 1 min cadence, ``derivatives.update``, MetricBoard) and
  ``DerivativesContext`` (the snapshot builder's ``ContextSource``). ``sources``: the factory.
- ``config``: ``DerivativesConfig`` (base URLs of the real public hosts, TTLs, cadence thresholds).
"""
