"""Benchmarks: plain scripts that print figures. They never pass or fail on time."""
