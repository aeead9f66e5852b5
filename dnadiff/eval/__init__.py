"""dnadiff.eval"""
