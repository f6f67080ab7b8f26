"""The kernel: clock, event bus, events, typed errors, retry policy, failpoints.

It imports nothing of vigil; every other package may import it. Importing it builds nothing.
"""
