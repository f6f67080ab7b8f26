"""vigil.learner"""
