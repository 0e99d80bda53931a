"""The Grafana dashboard and the Prometheus alert rules name only metrics (and labels) the
services export: a renamed metric would otherwise leave an empty panel or an alert that can
never fire, silently."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
DASHBOARD = json.loads((MONITORING / "sluice-dashboard.json").read_text())
RULES = yaml.safe_load((MONITORING / "sluice-alerts.yaml").read_text())
METRICS_MODULES = ["sluice_common.metrics", "sluice_ingest.metrics", "sluice_search.metrics", "sluice_worker.metrics"]
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
    "summary": ("", "_sum", "_count", "_created"),
}
# Labels Prometheus adds when it scrapes (Kubernetes service discovery), not the services.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "container"}
METRIC = re.compile(r"\b(sluice_[a-z0-9_]+)\b(\{[^}]*\})?")
LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*\"([^\"]*)\"")


def exported() -> dict[str, set[str]]:
    """Every sample name the services' metrics modules export, with its label names."""
    samples: dict[str, set[str]] = {}
    for module in METRICS_MODULES:
        for metric in vars(importlib.import_module(module)).values():
            if not isinstance(metric, MetricWrapperBase):
                continue
            labels = set(metric._labelnames)  # prometheus_client keeps them here
            for family in metric.describe():
                for suffix in SUFFIXES[family.type]:
                    samples[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return samples


def dashboard_expressions() -> list[str]:
    expressions = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if (key in ("expr", "definition") and isinstance(value, str)) or (
                    key == "query" and isinstance(value, str) and value != "prometheus"
                ):
                    expressions.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(DASHBOARD)
    return expressions


def rule_expressions() -> list[str]:
    return [rule["expr"] for group in RULES["groups"] for rule in group["rules"]]


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_metric_named_is_exported_with_those_labels(source):
    expressions = dashboard_expressions() if source == "dashboard" else rule_expressions()
    assert expressions
    samples = exported()
    named = set()
    for expression in expressions:
        for match in METRIC.finditer(expression):
            name, selector = match.group(1), match.group(2) or ""
            named.add(name)
            assert name in samples, f"{source}: {name} is exported by no service ({expression})"
            for label, _, _ in LABEL.findall(selector):
                assert label in samples[name] | TARGET_LABELS, f"{source}: {name} has no label {label}"
        for grouping in re.findall(r"\bby \(([^)]*)\)", expression):
            labels = {label.strip() for label in grouping.split(",")}
            inner = {m.group(1) for m in METRIC.finditer(expression)}
            assert any(labels <= samples[name] | TARGET_LABELS for name in inner), f"{source}: by ({grouping}) in {expression}"
    assert named


def test_dashboard_covers_what_operators_need():
    text = json.dumps(DASHBOARD)
    for metric in [
        "sluice_jobs{",  # queue depth by status
        "sluice_worker_stage_duration_seconds_bucket",  # stage durations
        "sluice_job_completions_total",  # throughput
        "sluice_worker_jobs_failed_total",  # failures by reason
        "sluice_job_lease_expiries_total",  # lease expiries
        "sluice_search_latency_seconds_bucket",  # search latency by mode
    ]:
        assert metric in text, metric
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    assert DASHBOARD["uid"] and DASHBOARD["templating"]["list"][0]["type"] == "datasource"


def test_alerts_cover_the_failure_modes_and_are_well_formed():
    rules = {rule["alert"]: rule for group in RULES["groups"] for rule in group["rules"]}
    assert {
        "SluiceNoWorkerClaiming",
        "SluiceJobsStuckRunning",
        "SluiceLeasesExpiring",
        "SluiceFailureRateHigh",
        "SluiceEmbedderErrors",
    } <= set(rules)
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"], name
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        expression = rule["expr"]
        assert expression.count("(") == expression.count(")") and expression.count("{") == expression.count("}"), name


def test_embedder_alert_matches_the_registered_embedder_error_codes():
    from sluice_common.worker_errors import REGISTERED

    rule = next(r for g in RULES["groups"] for r in g["rules"] if r["alert"] == "SluiceEmbedderErrors")
    pattern = re.search(r'error_code=~"([^"]+)"', rule["expr"]).group(1)
    matched = {code for code in REGISTERED if re.fullmatch(pattern, code)}
    assert {"EMBEDDING_RATE_LIMITED", "EMBEDDING_UNAVAILABLE", "EMBEDDING_PROVIDER_ERROR", "EMBEDDER_MODEL_NOT_FOUND"} <= matched
    assert all(code.startswith("EMBEDD") for code in matched)
