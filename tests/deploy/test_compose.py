"""docker-compose.yml and docker/*.Dockerfile, checked statically (no Docker engine here).

What is checked is what would break a deployment: services and their order, images built
from files that exist, health checks, ports that match what the service binds, and every
SLUICE_* variable being one the service's settings class actually reads (a typo would be
ignored silently by pydantic-settings).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = ["migrate", "ingest-api", "search", "worker", "gateway"]
ONE_SHOT = ["bootstrap"]
# Long-running services that run another service's image with their own console script.
SAME_IMAGE = {"webhooks": "ingest-api"}
PYPROJECT = {
    "migrate": ROOT / "services/ingest-api/pyproject.toml",
    "ingest-api": ROOT / "services/ingest-api/pyproject.toml",
    "search": ROOT / "services/search/pyproject.toml",
    "worker": ROOT / "services/worker/pyproject.toml",
    "gateway": ROOT / "services/gateway/pyproject.toml",
}
INTERPOLATION = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}")


def interpolate(value) -> str:
    """Compose's ${VAR:-default} with an empty environment: the defaults."""
    return INTERPOLATION.sub(lambda m: m.group(2) or "", str(value))


def settings_fields(service: str) -> set[str]:
    """The SLUICE_* variables the service's settings classes read."""
    from sluice_common.embedders import EmbedderSettings
    from sluice_ingest.settings import IngestSettings

    def names(*classes) -> set[str]:
        fields = set()
        for cls in classes:
            prefix = cls.model_config.get("env_prefix", "")
            fields |= {(prefix + name).upper() for name in cls.model_fields}
        return fields

    if service in ("migrate", "webhooks"):
        return names(IngestSettings)
    if service == "ingest-api":
        # CreateCollection/ReindexCollection check local models (sluice_common.embedders).
        return names(IngestSettings, EmbedderSettings)
    if service == "search":
        from sluice_search.settings import SearchSettings

        # Query embedding reads the embedder settings (sluice_common.embedders).
        return names(SearchSettings, EmbedderSettings)
    if service == "gateway":
        from sluice_gateway.settings import GatewaySettings

        return names(GatewaySettings)
    if service == "worker":
        worker_settings = pytest.importorskip("sluice_worker.settings")
        return names(worker_settings.WorkerSettings)
    raise AssertionError(service)


def environment(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(v) for k, v in env.items()}


def dockerfile(service: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of the service's Dockerfile, continuation lines joined."""
    path = ROOT / SERVICES[service]["build"]["dockerfile"]
    text = re.sub(r"\\\n", " ", path.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def final_stage(instructions):
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


def test_services_and_start_order():
    assert set(SERVICES) == {"postgres", *APP_SERVICES, *ONE_SHOT, *SAME_IMAGE}
    assert SERVICES["bootstrap"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert SERVICES["worker"]["depends_on"]["bootstrap"]["condition"] == "service_completed_successfully"
    depends = {name: SERVICES[name].get("depends_on", {}) for name in SERVICES}
    assert depends["migrate"] == {"postgres": {"condition": "service_healthy"}}
    assert depends["ingest-api"]["migrate"]["condition"] == "service_completed_successfully"
    assert depends["search"]["migrate"]["condition"] == "service_completed_successfully"
    assert depends["worker"]["ingest-api"]["condition"] == "service_healthy"
    assert depends["webhooks"]["migrate"]["condition"] == "service_completed_successfully"
    # The gateway forwards to both services; it needs no database.
    assert depends["gateway"] == {"ingest-api": {"condition": "service_healthy"}, "search": {"condition": "service_healthy"}}
    assert SERVICES["migrate"]["restart"] == "no"


def test_postgres_is_a_pgvector_image_with_a_volume_and_health_check():
    pg = SERVICES["postgres"]
    assert "pgvector/pgvector:pg" in interpolate(pg["image"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in pg["volumes"])
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert "pgdata" in COMPOSE["volumes"]
    init = next(v for v in pg["volumes"] if "docker-entrypoint-initdb.d" in v)
    assert (ROOT / init.split(":")[0]).is_dir()


@pytest.mark.parametrize("service", APP_SERVICES)
def test_each_service_is_built_from_its_own_dockerfile(service):
    build = SERVICES[service]["build"]
    assert build["context"] == "."
    assert build["dockerfile"] == f"docker/{service}.Dockerfile"
    assert (ROOT / build["dockerfile"]).is_file()


@pytest.mark.parametrize("service", APP_SERVICES)
def test_dockerfile_copies_existing_paths_and_runs_the_services_console_script(service):
    instructions = dockerfile(service)
    assert instructions[0][0] in ("ARG", "FROM")
    for keyword, rest in instructions:
        if keyword == "COPY" and "--from=" not in rest:
            *sources, _target = shlex.split(rest)
            for source in sources:
                assert (ROOT / source).exists(), f"{service}: COPY {source} does not exist"
    final = final_stage(instructions)
    entrypoint = [yaml.safe_load(rest) for k, rest in final if k == "ENTRYPOINT"]
    assert entrypoint, f"{service}: no ENTRYPOINT"
    script = entrypoint[-1][0]
    scripts = tomllib.loads(PYPROJECT[service].read_text())["project"].get("scripts", {})
    assert script in scripts, f"{service}: ENTRYPOINT {script} is not a console script of {PYPROJECT[service]}"
    users = [rest for k, rest in final if k == "USER"]
    assert users and users[-1] not in ("root", "0"), f"{service}: runs as root"


def test_dockerignore_keeps_local_state_out_of_the_build_context():
    ignored = {
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", ".sluice", "**/node_modules"} <= ignored
    # Everything the Dockerfiles copy must stay in the context.
    for service in APP_SERVICES:
        for keyword, rest in dockerfile(service):
            if keyword == "COPY" and "--from=" not in rest:
                for source in shlex.split(rest)[:-1]:
                    assert source.split("/")[0] not in ignored, f"{source} is excluded by .dockerignore"


@pytest.mark.parametrize("service", [*APP_SERVICES, *SAME_IMAGE])
def test_environment_variables_are_ones_the_settings_read(service):
    env = environment(service)
    known = settings_fields(service)
    unknown = sorted(k for k in env if k.startswith("SLUICE_") and k not in known)
    assert not unknown, f"{service}: variables no settings class reads: {unknown}"
    for keyword, rest in final_stage(dockerfile(SAME_IMAGE.get(service, service))):
        if keyword == "ENV":
            for name in re.findall(r"(SLUICE_[A-Z0-9_]+)=", rest):
                assert name in known, f"{service} Dockerfile ENV {name} is read by no settings class"


def test_required_configuration_is_present():
    assert environment("migrate")["SLUICE_DATABASE_URL"].startswith("postgresql://")
    assert environment("ingest-api")["SLUICE_DATABASE_URL"].startswith("postgresql://")
    # search reads through its own read-only role.
    assert environment("search")["SLUICE_SEARCH_DATABASE_URL"].startswith("postgresql://sluice_search:")
    # Workers hold no database credentials (docs/architecture.md#services); they only know ingest-api.
    worker = environment("worker")
    assert not any("DATABASE_URL" in k for k in worker)
    assert worker["SLUICE_INGEST_ADDRESS"] == "ingest-api:50051"
    for service in ("search", "worker"):
        assert "SLUICE_OPENAI_BASE_URL" in environment(service) and "SLUICE_OPENAI_API_KEY" in environment(service)


@pytest.mark.parametrize(
    ("service", "bind_var", "port"), [("ingest-api", "SLUICE_BIND", 50051), ("search", "SLUICE_SEARCH_BIND", 50052)]
)
def test_grpc_ports_match_what_the_service_binds_and_the_health_check_asks(service, bind_var, port):
    env = environment(service)
    assert env[bind_var] == f"0.0.0.0:{port}"
    published = [interpolate(p) for p in SERVICES[service]["ports"]]
    assert f"{port}:{port}" in published
    test = SERVICES[service]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"] and test[-2:] == ["grpc", f"localhost:{port}"]
    assert ("EXPOSE", f"{port} 9464") in final_stage(dockerfile(service))


def test_every_long_running_service_has_a_health_check_using_the_shipped_script():
    for service in ("ingest-api", "search", "worker"):
        health = SERVICES[service]["healthcheck"]
        assert "/usr/local/bin/sluice-healthcheck" in health["test"]
        assert ("COPY", "docker/healthcheck.py /usr/local/bin/sluice-healthcheck") in final_stage(dockerfile(service))
        assert any(k == "HEALTHCHECK" for k, _ in final_stage(dockerfile(service)))
    gateway = SERVICES["gateway"]["healthcheck"]["test"]
    bind = environment("gateway")["SLUICE_GATEWAY_BIND"]
    assert gateway[-2:] == ["http", f"http://localhost:{bind.rsplit(':', 1)[1]}/healthz"], gateway
    assert ("EXPOSE", bind.rsplit(":", 1)[1]) in final_stage(dockerfile("gateway"))
    worker_probe = SERVICES["worker"]["healthcheck"]["test"]
    assert worker_probe[-1] == f"http://localhost:{environment('worker')['SLUICE_METRICS_PORT']}/metrics"


def test_workers_scale_with_replicas_and_outlast_their_own_grace():
    worker = SERVICES["worker"]
    assert int(interpolate(worker["deploy"]["replicas"])) >= 1
    grace = float(environment("worker")["SLUICE_SHUTDOWN_GRACE_SECONDS"])
    assert float(worker["stop_grace_period"].rstrip("s")) > grace
    assert "container_name" not in worker  # a fixed name would forbid replicas


def test_metrics_port_is_set_for_every_long_running_service():
    for service in ("ingest-api", "search", "worker", "webhooks"):
        assert environment(service)["SLUICE_METRICS_PORT"] == "9464"


def test_search_login_joins_the_read_only_role_the_migrations_grant():
    script = (ROOT / "docker/postgres-init/10-search-role.sh").read_text()
    assert "IN ROLE sluice_search_reader" in script
    migrations = "".join(p.read_text() for p in (ROOT / "services/ingest-api/src/sluice_ingest/migrations/versions").glob("*.py"))
    assert "TO sluice_search_reader" in migrations, "no migration grants the read-only role any more"
    user = environment("search")["SLUICE_SEARCH_DATABASE_URL"].split("//", 1)[1].split(":", 1)[0]
    assert f"CREATE ROLE {user} LOGIN" in script


def test_packages_the_dockerfiles_name_are_pinned_by_the_lock():
    """`pip install -c requirements.lock …`: a package missing from the lock would float."""
    pinned = {
        re.split(r"[=<>~!]", line, maxsplit=1)[0].strip().lower().replace("_", "-")
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for service in APP_SERVICES:
        for keyword, rest in dockerfile(service):
            if keyword != "RUN" or "pip install" not in rest:
                continue
            assert "-c requirements.lock" in rest or "--index-url" in rest, f"{service}: unpinned pip install: {rest}"
            words = shlex.split(rest.split("pip install", 1)[1].split("&&")[0])
            for previous, word in zip(["", *words], words):
                if word.startswith(("-", "./", "$")) or previous in ("-c", "--index-url") or word == "requirements.lock":
                    continue
                assert word.lower().replace("_", "-") in pinned, f"{service}: {word} is not in requirements.lock"


def test_bootstrap_makes_the_keys_the_workers_read():
    """Auth is on in compose: the one-shot bootstrap runs a console script the migrate image
    installs, writes the worker key where the workers read it, and the env it sets is real."""
    bootstrap = SERVICES["bootstrap"]
    assert bootstrap["image"] == SERVICES["migrate"]["image"]
    scripts = tomllib.loads((ROOT / "services/ingest-api/pyproject.toml").read_text())["project"]["scripts"]
    assert bootstrap["entrypoint"][0] in scripts
    key_dir = bootstrap["command"][bootstrap["command"].index("--key-dir") + 1]
    worker = SERVICES["worker"]
    assert worker["environment"]["SLUICE_API_KEY_FILE"] == f"{key_dir}/worker_key"
    assert any(v.startswith("keys:") for v in worker["volumes"]) and any(v.startswith("keys:") for v in bootstrap["volumes"])
    assert set(bootstrap["environment"]) - {"<<"} <= settings_fields("ingest-api")


def test_webhooks_run_sluice_webhooks_from_ingest_apis_image_apart_from_ingest_api():
    """Delivery is its own service (docs/webhooks.md): ingest-api's image with the `sluice-webhooks`
    console script, health-checked on the port it binds, the SSRF guard on by default, and
    ingest-api itself left without a dispatcher (SLUICE_WEBHOOKS_ENABLED defaults to false)."""
    from sluice_ingest.settings import IngestSettings

    webhooks = SERVICES["webhooks"]
    assert webhooks["image"] == SERVICES["ingest-api"]["image"] and "build" not in webhooks
    scripts = tomllib.loads(PYPROJECT["ingest-api"].read_text())["project"]["scripts"]
    assert webhooks["entrypoint"] == ["sluice-webhooks"] and scripts["sluice-webhooks"] == "sluice_ingest.webhooks.main:main"
    env = environment("webhooks")
    assert env["SLUICE_DATABASE_URL"].startswith("postgresql://")
    port = env["SLUICE_WEBHOOKS_BIND"].rsplit(":", 1)[1]
    assert env["SLUICE_WEBHOOKS_BIND"] == f"0.0.0.0:{port}"
    test = webhooks["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "/usr/local/bin/sluice-healthcheck"] and test[-2:] == ["grpc", f"localhost:{port}"]
    assert env["SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS"] == "false"
    assert environment("ingest-api")["SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS"] == "false"
    assert "SLUICE_WEBHOOKS_ENABLED" not in environment("ingest-api")
    assert IngestSettings.model_fields["webhooks_enabled"].default is False
    assert float(webhooks["stop_grace_period"].rstrip("s")) > float(env["SLUICE_SHUTDOWN_GRACE_SECONDS"])
    published = [interpolate(p) for p in webhooks["ports"]]
    assert published == ["9466:9464"] and all(not p.endswith(f":{port}") for p in published)
