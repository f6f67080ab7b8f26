"""vigil.gate"""
