"""The worker's renamed setting: SLUICE_LEASE_RENEWALS_PER_LEASE, and SLUICE_HEARTBEAT_DIVISOR, its
deprecated old name, still read (docs/configuration.md, worker; "heartbeat" now names only
WatchCollection's keep-alive, docs/contributing.md#code)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sluice_worker.settings import WorkerSettings

NEW, OLD = "SLUICE_LEASE_RENEWALS_PER_LEASE", "SLUICE_HEARTBEAT_DIVISOR"


@pytest.fixture(autouse=True)
def neither_name_set(monkeypatch):
    monkeypatch.delenv(NEW, raising=False)
    monkeypatch.delenv(OLD, raising=False)


def test_the_default_renews_three_times_a_lease():
    assert WorkerSettings().lease_renewals_per_lease == 3.0


def test_the_new_variable_is_read(monkeypatch):
    monkeypatch.setenv(NEW, "4")
    assert WorkerSettings().lease_renewals_per_lease == 4.0


def test_the_old_variable_is_still_read(monkeypatch):
    monkeypatch.setenv(OLD, "5")
    assert WorkerSettings().lease_renewals_per_lease == 5.0


def test_the_new_variable_wins_over_the_old(monkeypatch):
    monkeypatch.setenv(OLD, "5")
    monkeypatch.setenv(NEW, "4")
    assert WorkerSettings().lease_renewals_per_lease == 4.0


def test_the_unprefixed_name_is_not_read(monkeypatch):
    monkeypatch.setenv("LEASE_RENEWALS_PER_LEASE", "7")
    assert WorkerSettings().lease_renewals_per_lease == 3.0


def test_code_sets_it_by_its_field_name(monkeypatch):
    monkeypatch.setenv(OLD, "5")
    assert WorkerSettings(lease_renewals_per_lease=2.0).lease_renewals_per_lease == 2.0


@pytest.mark.parametrize("name", [NEW, OLD])
def test_zero_renewals_is_refused(monkeypatch, name):
    monkeypatch.setenv(name, "0")
    with pytest.raises(ValidationError, match="greater than 0"):
        WorkerSettings()
