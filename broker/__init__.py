"""vigil.broker"""
