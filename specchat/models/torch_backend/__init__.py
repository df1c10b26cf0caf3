"""The torch backend: transformers weights behind the engine's model protocol (the lean
CPU forward, the static cache on CUDA, transformers' own), shipped drafts and the
transformers baselines. Never imports the llama.cpp backend.
"""
