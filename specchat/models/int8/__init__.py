"""The int8 backend: a GGUF model on the CPU through fbgemm's int8 matrix kernels, with a
verify whose cost stays nearly flat as it grows, and exact by construction."""
