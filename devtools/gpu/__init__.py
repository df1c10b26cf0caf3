"""The GPU measurement: `scale` (random weights at real Llama scale), `campaign` (the
whole measurement as ordered steps within a time budget) and `publish` (raw
results into docs/gpu/ and the tables into docs/benchmarks.md). Every part has a CPU
dry run with tiny models that the test suite runs, so none of it can rot between GPUs.
"""
