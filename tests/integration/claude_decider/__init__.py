"""The ClaudeDecider tests and their shared fixtures (conftest)."""
