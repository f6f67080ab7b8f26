"""Replay: the daemon itself over recorded history on the VirtualClock (build, driver, command)."""
