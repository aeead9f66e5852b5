"""dnadiff.backbones"""
