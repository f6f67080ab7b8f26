"""Composition root: CryptoRunner, event bus, clocks, supervisor, config, CLI.

Importing this package builds nothing; `runner.app` wires the daemon when asked.
"""
