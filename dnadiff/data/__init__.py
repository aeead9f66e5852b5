"""dnadiff.data"""
