"""Composition root: builds the daemon from Settings, supervises its loops, and the CLI.

Importing this package builds nothing; `runner.app` wires the daemon when asked.
"""
