"""vigil.market"""
