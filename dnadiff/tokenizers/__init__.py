"""dnadiff.tokenizers"""
