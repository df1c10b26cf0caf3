"""The llama.cpp backend: GGUF files decoded by llama-cpp-python behind the engine's
model protocol, and llama.cpp's own decoding for `bench`. Never imports the torch backend.
"""
