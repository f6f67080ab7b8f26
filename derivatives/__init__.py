"""vigil.derivatives"""
