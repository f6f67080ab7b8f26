"""The operator's surface: HTTP API (FastAPI), Prometheus metrics, dashboard, notifications.

An adapter: it reads the domain packages through small ports (``api.ports``) and the state dir's
files (``api.files``); ``runner`` builds it and runs its server as one more supervised loop.
"""
