"""dnadiff.samplers"""
