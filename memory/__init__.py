"""vigil.memory"""
