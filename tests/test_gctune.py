"""Every long-running service tunes Python's collector once started (sluice_common.gctune)."""

from __future__ import annotations

import gc
import inspect

import pytest
from sluice_common import gctune


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_tune_freezes_what_exists_and_collects_the_young_less_often(restored_gc):
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    gctune.tune()
    assert gc.get_freeze_count() > 0  # start-up objects: out of the collector's walks
    assert gc.get_threshold()[0] == gctune.YOUNG_THRESHOLD


def test_every_service_tunes_once_started():
    from sluice_ingest import main as ingest
    from sluice_ingest.webhooks import main as webhooks
    from sluice_search import main as search
    from sluice_worker import main as worker

    for module in (ingest, webhooks, search, worker):
        source = inspect.getsource(module.serve)
        assert "gctune.tune()" in source, f"{module.__name__}.serve does not tune the collector"
