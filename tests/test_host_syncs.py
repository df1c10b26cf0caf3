"""The host-sync counter's one judgement that runs without a GPU: which of the sync debug
mode's warnings are syncs (engine/host_syncs.py). Its notice that the mode is a prototype
is none: counted, it made the first GPU run report 1.12 syncs a round (9 over 8)."""

from specchat.engine.host_syncs import by_place, is_host_sync


def test_the_debug_mode_s_own_notice_is_not_a_host_sync():
    notice = ("Synchronization debug mode is a prototype feature and does not yet detect all "
              "synchronizing operations")
    sync = "called a synchronizing CUDA operation"
    assert is_host_sync(sync) and not is_host_sync(notice)


def test_syncs_are_reported_by_place_the_most_first():
    assert list(by_place(["a.py:1", "b.py:2", "b.py:2"]).items()) == [("b.py:2", 2), ("a.py:1", 1)]
