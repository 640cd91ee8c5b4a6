"""Detector rules, one per module. Each rule documents what it catches and why it is safe."""
