"""Reusable fake protocol peers for tests (import as ``fakes.<module>``)."""
