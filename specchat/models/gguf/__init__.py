"""GGUF files: converting one to a transformers folder once, writing a distilled draft as
GGUF, and which GGUF file a reference names. Loads no model for decoding.
"""
