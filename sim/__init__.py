"""vigil.sim"""
