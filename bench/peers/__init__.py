"""Peer backtesters for ``bench/bench_peers.py``; each script runs in the peer venv (Python 3.12)."""
