"""docker-compose.yml, checked without Docker: services, images, ports, environment, volumes, order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from chamvi._dev import search_attribute_specs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def image(service: dict[str, Any]) -> str:
    """The image name with any ``${VAR:-default}`` tag resolved to its default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", service["image"])


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: str(value) for key, value in env.items()}


def default_of(value: str) -> str:
    match = re.fullmatch(r"\$\{[A-Z_]+:-([^}]*)\}", value)
    return match.group(1) if match else value


def depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: spec["condition"] for name, spec in service.get("depends_on", {}).items()}


def test_the_stack_has_every_service(services: dict[str, Any]) -> None:
    assert set(services) == {
        "postgres",
        "temporal",
        "temporal-init",
        "temporal-ui",
        "qdrant",
        "jaeger",
        "otel-collector",
        "minio",
        "minio-init",
        "worker",
        "api",
    }


def test_the_api_serves_3000_with_tokens_and_the_shared_qdrant(services: dict[str, Any]) -> None:
    api = services["api"]
    assert api["command"][:2] == ["chamvi", "api"] and "0.0.0.0" in api["command"]
    assert api["image"] == services["worker"]["image"]
    assert any(str(p).endswith(":3000") for p in api["ports"])
    env = environment(api)
    assert env["QDRANT_URL"] == environment(services["worker"])["QDRANT_URL"]
    assert (
        "CHAMVI_TOKENS" in env
        and env["TEMPORAL_ADDRESS"] == environment(services["worker"])["TEMPORAL_ADDRESS"]
    )
    assert depends(api)["qdrant"] == "service_healthy" and depends(api)["temporal"] == "service_healthy"


def test_temporal_runs_on_postgres_after_it_is_healthy(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    assert image(temporal).startswith("temporalio/auto-setup:")
    env = environment(temporal)
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgres"
    assert env["POSTGRES_USER"] == environment(services["postgres"])["POSTGRES_USER"]
    assert env["POSTGRES_PWD"] == environment(services["postgres"])["POSTGRES_PASSWORD"]
    assert "7233:7233" in temporal["ports"]
    assert depends(temporal) == {"postgres": "service_healthy"}
    assert image(services["postgres"]).startswith("postgres:")


def test_the_ui_is_on_8233_and_qdrant_on_6333(services: dict[str, Any]) -> None:
    ui = services["temporal-ui"]
    assert image(ui).startswith("temporalio/ui:")
    assert "8233:8080" in ui["ports"]
    assert environment(ui)["TEMPORAL_ADDRESS"] == "temporal:7233"
    qdrant = services["qdrant"]
    assert image(qdrant).startswith("qdrant/qdrant:")
    assert "6333:6333" in qdrant["ports"]


def test_the_init_service_registers_every_search_attribute(services: dict[str, Any]) -> None:
    init = services["temporal-init"]
    assert image(init).startswith("temporalio/admin-tools:")
    env = environment(init)
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert env["CHAMVI_SEARCH_ATTRIBUTES"].split() == search_attribute_specs()
    assert depends(init) == {"temporal": "service_healthy"}
    mounted = {v.split(":")[1]: v.split(":")[0] for v in init["volumes"]}
    script = init["entrypoint"][-1]
    assert ROOT / mounted[script] == ROOT / "deploy" / "register-search-attributes.sh"
    text = (ROOT / "deploy" / "register-search-attributes.sh").read_text()
    assert "temporal operator search-attribute create" in text
    assert "CHAMVI_SEARCH_ATTRIBUTES" in text


def test_the_worker_is_built_here_and_starts_after_the_search_attributes(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert worker["build"]["context"] == "."
    dockerfile = ROOT / worker["build"]["dockerfile"]
    assert dockerfile == ROOT / "deploy" / "Dockerfile" and dockerfile.is_file()
    assert worker["command"] == ["chamvi", "worker"]
    assert depends(worker) == {
        "temporal": "service_healthy",
        "temporal-init": "service_completed_successfully",
        "qdrant": "service_healthy",
        "otel-collector": "service_started",
        "minio-init": "service_completed_successfully",
    }


def test_the_worker_and_the_api_share_the_s3_artifact_store_whose_bucket_is_made_first(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    worker, api = environment(services["worker"]), environment(services["api"])
    keys = ("CHAMVI_ARTIFACTS_URL", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    assert {k: worker[k] for k in keys} == {k: api[k] for k in keys}
    bucket = default_of(worker["CHAMVI_ARTIFACTS_URL"]).removeprefix("s3://")
    assert (
        default_of(worker["AWS_ENDPOINT_URL"]) == "http://minio:9000" and worker["AWS_ALLOW_HTTP"] == "true"
    )
    minio, init = services["minio"], services["minio-init"]
    assert image(minio).startswith("minio/minio:") and "9000:9000" in minio["ports"]
    assert default_of(environment(minio)["MINIO_ROOT_USER"]) == default_of(worker["AWS_ACCESS_KEY_ID"])
    assert default_of(environment(minio)["MINIO_ROOT_PASSWORD"]) == default_of(
        worker["AWS_SECRET_ACCESS_KEY"]
    )
    assert init["entrypoint"][-1] == f"store/{bucket}" and depends(init) == {"minio": "service_healthy"}
    assert depends(services["api"])["minio-init"] == "service_completed_successfully"
    assert "minio-data" in compose["volumes"]


def test_the_worker_and_the_api_share_the_approval_secret_and_the_workers_link_to_the_api(
    services: dict[str, Any],
) -> None:
    worker, api = environment(services["worker"]), environment(services["api"])
    keys = ("CHAMVI_APPROVAL_SECRET", "CHAMVI_DATA")
    assert {k: worker[k] for k in keys} == {k: api[k] for k in keys}
    assert worker["CHAMVI_APPROVAL_SECRET"] == "${CHAMVI_APPROVAL_SECRET:-}"  # from the host, if set
    # else the secret one of them generates in the data folder, on the volume both mount
    assert (
        services["api"]["volumes"] == services["worker"]["volumes"] == [f"worker-data:{api['CHAMVI_DATA']}"]
    )
    port = services["api"]["ports"][0].rsplit(":", 1)[1]
    assert default_of(worker["CHAMVI_PUBLIC_URL"]) == f"http://localhost:{port}"


def test_the_worker_environment(services: dict[str, Any]) -> None:
    env = environment(services["worker"])
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert env["QDRANT_URL"] == "http://qdrant:6333"
    assert env["OPENAI_API_KEY"].startswith("${OPENAI_API_KEY")  # passed through from the host
    assert default_of(env["CHAMVI_APP"]) == "examples.support.app:app"
    # an empty model ref is an invalid agent definition, so the example's variable needs a real default
    assert default_of(env["CHAMVI_SUPPORT_MODEL"]) == "local/demo"
    assert env["CHAMVI_DATA"] in {v.split(":")[1] for v in services["worker"]["volumes"]}


def test_state_lives_on_named_volumes(compose: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    for name in ("postgres", "qdrant", "worker", "minio"):
        sources = [v.split(":")[0] for v in services[name]["volumes"]]
        assert sources and all(source in declared for source in sources), name
    assert "/qdrant/storage" in services["qdrant"]["volumes"][0]
    assert "/var/lib/postgresql/data" in services["postgres"]["volumes"][0]


def test_every_awaited_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dependency, condition in depends(service).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}'s health"
    for name in ("postgres", "temporal", "qdrant", "temporal-ui"):
        assert services[name]["healthcheck"]["test"], name


def test_the_image_holds_what_the_package_needs() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for path in ("pyproject.toml", "README.md", "worker.py", "chamvi", "workflows", "activities", "examples"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", dockerfile, re.MULTILINE), path
    assert 'CMD ["chamvi", "worker"]' in dockerfile


def test_the_image_installs_the_dependencies_before_it_copies_the_code() -> None:
    lines = (ROOT / "deploy" / "Dockerfile").read_text().splitlines()
    dependencies = next(i for i, line in enumerate(lines) if "pip install -r" in line)
    code = next(i for i, line in enumerate(lines) if re.match(r"COPY .*\bchamvi\b", line))
    assert dependencies < code
    # only pyproject.toml is there when they install: a code change keeps their layer
    assert [line for line in lines[:dependencies] if line.startswith("COPY")] == ["COPY pyproject.toml ./"]
    assert any(line.strip() == "RUN pip install --no-deps ." for line in lines[code:])


def collector_config(services: dict[str, Any]) -> dict[str, Any]:
    mounted = {v.split(":")[1]: v.split(":")[0] for v in services["otel-collector"]["volumes"]}
    command = services["otel-collector"]["command"]
    path = next(arg.removeprefix("--config=") for arg in command if arg.startswith("--config="))
    config: dict[str, Any] = yaml.safe_load((ROOT / mounted[path]).read_text())
    return config


def test_the_worker_and_the_api_send_their_spans_to_the_collector_which_sends_them_to_jaeger(
    services: dict[str, Any],
) -> None:
    config = collector_config(services)
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    for name in ("worker", "api"):
        endpoint = default_of(environment(services[name])["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert endpoint == f"http://otel-collector:{http.rsplit(':', 1)[1]}", name
        assert depends(services[name])["otel-collector"] == "service_started", name
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    (exporter,) = traces["exporters"]
    assert config["exporters"][exporter]["endpoint"] == "jaeger:4317"
    assert "16686:16686" in services["jaeger"]["ports"]
    assert image(services["jaeger"]).startswith("jaegertracing/")


def test_the_collector_scrapes_every_workers_prometheus_endpoint_and_serves_the_metrics(
    services: dict[str, Any],
) -> None:
    config = collector_config(services)
    worker = environment(services["worker"])
    port = int(worker["CHAMVI_METRICS_ADDRESS"].rsplit(":", 1)[1])
    assert worker["CHAMVI_METRICS_ADDRESS"].startswith("0.0.0.0:")  # reachable from the collector
    (scrape,) = config["receivers"]["prometheus"]["config"]["scrape_configs"]
    (replicas,) = scrape["dns_sd_configs"]
    assert (replicas["names"], replicas["port"]) == (["worker"], port)
    metrics = config["service"]["pipelines"]["metrics"]
    assert "prometheus" in metrics["receivers"] and metrics["exporters"] == ["prometheus"]
    served = config["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    assert f"{served}:{served}" in services["otel-collector"]["ports"]
    # message content stays out of the spans unless the operator turns it on
    assert default_of(worker["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"]) == "false"
