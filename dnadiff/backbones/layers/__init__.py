"""dnadiff.backbones.layers"""
