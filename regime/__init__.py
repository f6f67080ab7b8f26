"""vigil.regime"""
