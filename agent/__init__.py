"""vigil.agent"""
