"""vigil.tracker"""
