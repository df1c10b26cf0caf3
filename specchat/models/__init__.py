"""Turning models.toml into loaded models: the only package that imports
transformers, bitsandbytes and gguf. It adapts Hugging Face models to the
engine's small `CausalModel` protocol and knows nothing about chat or UI.
"""
