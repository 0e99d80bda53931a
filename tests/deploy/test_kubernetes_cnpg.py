"""deploy/kubernetes/overlays/cloudnative-pg, checked without a cluster, as the other overlays are
(tests/deploy/test_kubernetes.py): rendered with `kubectl kustomize`, the core objects validated
strictly against each supported Kubernetes version's schemas, and the CloudNativePG `Cluster`,
for which no schema ships, against the fields CloudNativePG documents (cloudnative-pg.io,
API reference of postgresql.cnpg.io/v1, 1.27). Then what would break it: a writer that does not
reach the primary, search that does not read the replicas, a password in a URL, a variable no
settings class reads (docs/scaling.md#kubernetes-cloudnativepg)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from .test_compose import settings_fields
from .test_kubernetes import (
    KEDA_KINDS,
    KUBERNETES_VERSIONS,
    containers,
    environment,
    objects,
    one,
    pod_spec,
    render,
    sluice_containers,
)

OVERLAY = "cloudnative-pg"
CLUSTER = "sluice-pg"

# postgresql.cnpg.io/v1 as documented (ClusterSpec, BootstrapInitDB, ManagedConfiguration,
# RoleConfiguration, PostgresConfiguration, AffinityConfiguration, StorageConfiguration).
CNPG_CLUSTER_SPEC = {
    "description",
    "inheritedMetadata",
    "imageName",
    "imageCatalogRef",
    "imagePullPolicy",
    "schedulerName",
    "postgresUID",
    "postgresGID",
    "instances",
    "minSyncReplicas",
    "maxSyncReplicas",
    "postgresql",
    "replicationSlots",
    "bootstrap",
    "replica",
    "superuserSecret",
    "enableSuperuserAccess",
    "certificates",
    "imagePullSecrets",
    "storage",
    "serviceAccountTemplate",
    "walStorage",
    "ephemeralVolumeSource",
    "startDelay",
    "stopDelay",
    "smartShutdownTimeout",
    "switchoverDelay",
    "failoverDelay",
    "livenessProbeTimeout",
    "affinity",
    "topologySpreadConstraints",
    "resources",
    "ephemeralVolumesSizeLimit",
    "priorityClassName",
    "primaryUpdateStrategy",
    "primaryUpdateMethod",
    "backup",
    "nodeMaintenanceWindow",
    "monitoring",
    "externalClusters",
    "logLevel",
    "projectedVolumeTemplate",
    "env",
    "envFrom",
    "managed",
    "seccompProfile",
    "tablespaces",
    "enablePDB",
    "plugins",
    "probes",
}
CNPG_INITDB = {
    "database",
    "owner",
    "secret",
    "options",
    "dataChecksums",
    "encoding",
    "localeCollate",
    "localeCType",
    "locale",
    "localeProvider",
    "icuLocale",
    "icuRules",
    "builtinLocale",
    "walSegmentSize",
    "postInitSQL",
    "postInitApplicationSQL",
    "postInitTemplateSQL",
    "import",
    "postInitApplicationSQLRefs",
    "postInitTemplateSQLRefs",
    "postInitSQLRefs",
}
CNPG_ROLE = {
    "name",
    "comment",
    "ensure",
    "passwordSecret",
    "connectionLimit",
    "validUntil",
    "inRoles",
    "inherit",
    "disablePassword",
    "superuser",
    "createdb",
    "createrole",
    "login",
    "replication",
    "bypassrls",
}
CNPG_AFFINITY = {
    "enablePodAntiAffinity",
    "topologyKey",
    "nodeSelector",
    "nodeAffinity",
    "tolerations",
    "podAntiAffinityType",
    "additionalPodAntiAffinity",
    "additionalPodAffinity",
}
# Secrets this overlay reads: made by CloudNativePG (`<cluster>-app`) or by the operator
# (`sluice-pg-search`, `sluice-pg-keda`: type kubernetes.io/basic-auth, username and password).
SECRET_KEYS = {
    "sluice-pg-app": {"password"},
    "sluice-pg-search": {"password"},
    "sluice-embedder-credentials": {"openai-api-key"},
    "sluice-keys": {"credentials", "admin_key", "client_key", "worker_key"},
}


def cluster() -> dict:
    return one(OVERLAY, "Cluster", CLUSTER)


def env_of(name: str, kind: str = "Deployment", *, init: bool = False) -> list[dict]:
    """The env lists of the named workload's containers (or init containers)."""
    spec = pod_spec(one(OVERLAY, kind, name))
    return [c.get("env", []) for c in (spec.get("initContainers", []) if init else spec["containers"])]


def test_the_overlay_renders_the_cluster_beside_the_production_objects():
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render(OVERLAY)}
    for expected in [
        ("Cluster", CLUSTER),
        ("ObjectStore", "sluice-pg-backups"),
        ("ScheduledBackup", "sluice-pg-nightly"),
        ("Deployment", "ingest-api"),
        ("Deployment", "search"),
        ("Deployment", "worker"),
        ("Job", "sluice-migrate"),
        ("Job", "sluice-bootstrap"),
        ("ScaledObject", "worker"),
        ("NetworkPolicy", "sluice-grpc"),
        ("Namespace", "sluice"),
    ]:
        assert expected in kinds, f"{expected} missing"
    assert {o["metadata"].get("namespace") for o in render(OVERLAY) if o["kind"] != "Namespace"} == {"sluice"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_objects_are_valid_for_each_supported_kubernetes_version(version):
    import kubernetes_validate

    for obj in render(OVERLAY):
        if obj["kind"] in KEDA_KINDS or obj["kind"] in {"Cluster", "ScheduledBackup", "ObjectStore"}:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {error.message} at {list(error.path)}")


def test_the_cluster_uses_only_documented_fields_and_has_a_primary_and_two_replicas():
    found = cluster()
    assert found["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = found["spec"]
    assert set(spec) <= CNPG_CLUSTER_SPEC, set(spec) - CNPG_CLUSTER_SPEC
    assert spec["instances"] == 3  # one primary, two streaming replicas behind sluice-pg-ro
    assert set(spec["bootstrap"]) == {"initdb"} and set(spec["bootstrap"]["initdb"]) <= CNPG_INITDB
    assert set(spec["affinity"]) <= CNPG_AFFINITY and spec["affinity"]["enablePodAntiAffinity"] is True
    for role in spec["managed"]["roles"]:
        assert set(role) <= CNPG_ROLE, set(role) - CNPG_ROLE
    assert set(spec["storage"]) <= {"storageClass", "size", "resizeInUseVolumes", "pvcTemplate"}


def test_the_cluster_has_pgvector_the_group_roles_and_the_logins_the_services_use():
    spec = cluster()["spec"]
    # The "standard" CloudNativePG images ship pgvector; PostgreSQL 18 as the embedded one.
    image = spec["imageName"]
    assert image.startswith("ghcr.io/cloudnative-pg/postgresql:18") and "-standard-" in image
    initdb = spec["bootstrap"]["initdb"]
    assert (initdb["database"], initdb["owner"]) == ("sluice", "sluice")
    assert "CREATE EXTENSION IF NOT EXISTS vector" in initdb["postInitApplicationSQL"]
    for group in ("sluice_search_reader", "sluice_queue_reader"):
        assert f"CREATE ROLE {group} NOLOGIN" in initdb["postInitApplicationSQL"]
    roles = {role["name"]: role for role in spec["managed"]["roles"]}
    assert roles["sluice_search"]["inRoles"] == ["sluice_search_reader"] and roles["sluice_search"]["login"] is True
    assert roles["sluice_search"]["passwordSecret"]["name"] == "sluice-pg-search"
    assert roles["sluice_keda"]["inRoles"] == ["sluice_queue_reader"]
    assert not any(role.get("superuser") or role.get("bypassrls") for role in roles.values())
    # Searches on a replica are not cancelled by the primary's vacuum (recovery conflicts).
    assert spec["postgresql"]["parameters"]["hot_standby_feedback"] == "on"


def test_wal_is_archived_and_a_base_backup_is_taken_every_night_to_object_storage():
    """Point-in-time recovery in production: the Cluster archives its WAL through the Barman Cloud
    plugin to the ObjectStore, and a ScheduledBackup (CloudNativePG's six-field cron) takes base
    backups there, from a standby; credentials come from a Secret, never from the manifest."""
    plugins = {p["name"]: p for p in cluster()["spec"]["plugins"]}
    barman = plugins["barman-cloud.cloudnative-pg.io"]
    assert barman["isWALArchiver"] is True and set(barman) <= {"name", "enabled", "isWALArchiver", "parameters"}
    store = one(OVERLAY, "ObjectStore", barman["parameters"]["barmanObjectName"])
    assert store["apiVersion"] == "barmancloud.cnpg.io/v1" and set(store["spec"]) <= {
        "configuration",
        "retentionPolicy",
        "instanceSidecarConfiguration",
    }
    configuration = store["spec"]["configuration"]
    assert configuration["destinationPath"].startswith("s3://")
    for credential in configuration["s3Credentials"].values():
        assert set(credential) == {"name", "key"}, "a credential is a Secret reference"
    assert store["spec"]["retentionPolicy"].endswith("d")
    scheduled = one(OVERLAY, "ScheduledBackup", "sluice-pg-nightly")
    spec = scheduled["spec"]
    assert scheduled["apiVersion"] == "postgresql.cnpg.io/v1" and spec["cluster"]["name"] == CLUSTER
    assert len(spec["schedule"].split()) == 6, "CloudNativePG's schedule has a seconds field first"
    assert spec["method"] == "plugin" and spec["pluginConfiguration"]["name"] == "barman-cloud.cloudnative-pg.io"
    assert set(spec) <= {
        "schedule",
        "suspend",
        "immediate",
        "cluster",
        "backupOwnerReference",
        "target",
        "method",
        "pluginConfiguration",
        "online",
        "onlineConfiguration",
    }


def url_host(value) -> str:
    assert isinstance(value, str), f"a URL is a literal here, not {value}"
    parts = urlsplit(value)
    assert parts.password is None, "no password in a committed URL"
    assert parts.port == 5432 and parts.path == "/sluice" and "sslmode=require" in parts.query
    return parts.hostname


def test_writers_reach_the_primary_and_search_reads_the_replicas():
    writers = [
        *env_of("ingest-api"),
        *env_of("ingest-api", init=True),
        *env_of("webhooks"),
        *env_of("webhooks", init=True),
        *env_of("sluice-migrate", "Job"),
        *env_of("sluice-bootstrap", "Job", init=True),
    ]
    assert len(writers) == 6
    for env in writers:
        variables = {item["name"]: item for item in env}
        assert url_host(variables["SLUICE_DATABASE_URL"].get("value")) == "sluice-pg-rw"
        assert urlsplit(variables["SLUICE_DATABASE_URL"]["value"]).username == "sluice"
        assert "valueFrom" not in variables["SLUICE_DATABASE_URL"]
        assert variables["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": f"{CLUSTER}-app", "key": "password"}
    (search,) = env_of("search")
    variables = {item["name"]: item for item in search}
    assert url_host(variables["SLUICE_SEARCH_DATABASE_URL"].get("value")) == "sluice-pg-ro"
    assert "valueFrom" not in variables["SLUICE_SEARCH_DATABASE_URL"]
    # The reindex quality gate writes verdicts: the primary, as the same read-only login.
    assert url_host(variables["SLUICE_SEARCH_EVAL_GATE_DATABASE_URL"]["value"]) == "sluice-pg-rw"
    for name in ("SLUICE_SEARCH_DATABASE_URL", "SLUICE_SEARCH_EVAL_GATE_DATABASE_URL"):
        assert urlsplit(variables[name]["value"]).username == "sluice_search"
    assert variables["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "sluice-pg-search", "key": "password"}
    assert "SLUICE_DATABASE_URL" not in environment(OVERLAY, pod_spec(one(OVERLAY, "Deployment", "search"))["containers"][0])
    # Workers still hold no database credentials.
    worker = environment(OVERLAY, pod_spec(one(OVERLAY, "Deployment", "worker"))["containers"][0])
    assert not any("DATABASE" in name or name == "PGPASSWORD" for name in worker)


def test_services_the_urls_name_are_the_ones_cloudnativepg_makes_for_the_cluster():
    # CloudNativePG names its Services <cluster>-rw, -ro and -r; the URLs above are in the
    # cluster's namespace, which the overlay sets for everything.
    hosts = set()
    for workload in [*objects(OVERLAY, "Deployment").values(), *objects(OVERLAY, "Job").values()]:
        for container in containers(workload):
            for item in container.get("env", []):
                if item["name"].endswith("DATABASE_URL") and "value" in item:
                    hosts.add(url_host(item["value"]))
    assert hosts == {f"{CLUSTER}-rw", f"{CLUSTER}-ro"}
    assert cluster()["metadata"]["namespace"] == "sluice"


def test_sluice_variables_are_ones_the_settings_read_and_secrets_are_the_documented_ones():
    for workload, container, service in sluice_containers(OVERLAY):
        known = settings_fields(service)
        unknown = sorted(k for k in environment(OVERLAY, container) if k.startswith("SLUICE_") and k not in known)
        assert not unknown, f"{workload['metadata']['name']}/{container['name']}: no settings class reads {unknown}"
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref["name"] != "sluice-database":
                assert ref["key"] in SECRET_KEYS.get(ref["name"], ()), f"{container['name']}: {ref}"
    assert not objects(OVERLAY, "Secret"), "secrets are made by CloudNativePG or the operator, never committed"
