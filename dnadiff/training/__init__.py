"""dnadiff.training"""
