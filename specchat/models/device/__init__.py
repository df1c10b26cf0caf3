"""Devices and memory: dtype and device choice, where weights go, sizes before loading
and what a loaded pair holds. Knows nothing about decoding or text.
"""
