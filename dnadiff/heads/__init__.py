"""dnadiff.heads"""
