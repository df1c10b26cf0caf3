"""specchat's developer tools: measurement machinery that is no part of the product.

The GPU campaign (gpu/: `scale`, `campaign`, `publish`, sized to a lent GPU's device time
and writing the repository's docs), the UI benchmark's driver (ui_bench.py,
ui_bench_child.py: `bench-ui`) and the build of llama.cpp's own programs for `specchat
bench` (llama_build.py: `build-llama`). Run from a clone: `python -m devtools COMMAND`
(cli.py). The wheel does not ship this folder (pyproject.toml packages only specchat).

May import specchat; specchat never imports devtools (tests/test_layering.py).
"""
