"""Run reports: figures from a run folder's journals, the HTML page, and two runs compared.

A tool over files the daemon wrote; the daemon itself never imports it.
"""
