"""Every size specchat prints reads in a unit that shows it (specchat/sizes.py): a 29 MB
draft head's weights or a short answer's KV cache never read 0.0 GiB."""

from __future__ import annotations

from specchat.models.device.memory import MemoryReport
from specchat.sizes import size_text


def test_a_size_is_shown_in_the_largest_unit_under_it():
    assert size_text(0) == "0 B" and size_text(1023) == "1023 B"
    assert size_text(1024) == "1.0 KiB" and size_text(1536) == "1.5 KiB"
    assert size_text(29_100_000) == "27.8 MiB"
    assert size_text((1 << 30) - 1) == "1024.0 MiB"  # rounding, still MiB below a GiB
    assert size_text(1 << 30) == "1.00 GiB" and size_text(int(1.25 * (1 << 30))) == "1.25 GiB"


def test_runs_memory_rows_show_a_small_draft_and_cache_in_mib_not_as_zero():
    rows = dict(MemoryReport(target_weights=int(1.2 * (1 << 30)), draft_weights=29_100_000,
                             kv_cache=1_400_000, peak=None).rows())
    assert rows == {"memory: target weights": "1.20 GiB", "memory: draft weights": "27.8 MiB",
                    "memory: KV cache": "1.3 MiB"}
