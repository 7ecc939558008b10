"""deploy/kubernetes: the manifests hold together (3 replicas, probes, a Service that selects the pods, Redis), and
the gateway settings and definitions in their ConfigMaps load and validate as a replica would read them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from support import REPO

from gateway.catalog.build import build_catalog
from gateway.cli.main import _parser
from gateway.definitions.load import load_definitions
from gateway.settings import hash_key, load_settings

KUBERNETES = REPO / "deploy" / "kubernetes"


def manifests() -> list[dict[str, Any]]:
    return [doc for path in sorted(KUBERNETES.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def find(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"one {kind} named {name!r} in deploy/kubernetes, found {len(found)}"
    return found[0]


def gateway_container() -> dict[str, Any]:
    [container] = find("Deployment", "tool-gateway")["spec"]["template"]["spec"]["containers"]
    return container


def mount_path(container: dict[str, Any], volume: str) -> str:
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume]
    return mount["mountPath"]


def configmap_mount(root: Path, files: dict[str, str]) -> Path:
    """``files`` laid out as Kubernetes mounts a ConfigMap: in a hidden ``..<timestamp>`` directory, reached
    through ``..data``, each name a link into it (the layout a reload sees when the ConfigMap changes)."""
    stamped = root / "..2026_11_30_12_00_00.000000001"
    stamped.mkdir(parents=True)
    os.symlink(stamped.name, root / "..data")
    for name, text in files.items():
        (stamped / name).write_text(text, encoding="utf-8")
        os.symlink(f"..data/{name}", root / name)
    return root


def test_the_deployment_runs_three_replicas_probed_on_healthz():
    """Three replicas of the gateway; readiness and liveness both GET /healthz on the container's http port."""
    deployment = find("Deployment", "tool-gateway")
    container = gateway_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    assert deployment["spec"]["replicas"] == 3
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
        assert container[probe]["httpGet"]["port"] in ports


def test_the_service_selects_the_gateway_pods():
    """The Service's selector matches the pod template's labels and its targetPort names a container port."""
    deployment = find("Deployment", "tool-gateway")
    service = find("Service", "tool-gateway")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for p in gateway_container()["ports"]}

    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports


def test_redis_is_deployed_where_the_settings_say():
    """A Redis Deployment and Service exist, and cluster.redis_url names that Service and its port."""
    redis = find("Deployment", "tool-gateway-redis")
    service = find("Service", "tool-gateway-redis")
    settings = yaml.safe_load(find("ConfigMap", "tool-gateway-settings")["data"]["settings.yaml"])
    url = urlsplit(settings["cluster"]["redis_url"])

    assert redis["spec"]["template"]["spec"]["containers"][0]["image"].startswith("redis:")
    assert service["spec"]["selector"].items() <= redis["spec"]["template"]["metadata"]["labels"].items()
    assert url.hostname == "tool-gateway-redis"
    assert url.port in {p["port"] for p in service["spec"]["ports"]}


def test_the_container_command_is_one_the_cli_takes():
    """The container's args parse as `tool-gateway serve --settings <the mounted settings file>`."""
    container = gateway_container()
    program, *argv = container["args"]
    args = _parser().parse_args(argv)

    assert program == "tool-gateway" and args.command == "serve"
    assert args.settings == mount_path(container, "settings")


def test_the_settings_and_definitions_in_the_configmaps_load(tmp_path):
    """The settings ConfigMap loads (cluster mode, the Secret's keys from the environment), and the definitions
    ConfigMap, mounted as Kubernetes mounts it, validates and builds (its tool's rate_limit included)."""
    container = gateway_container()
    settings_text = find("ConfigMap", "tool-gateway-settings")["data"]["settings.yaml"]
    definitions = find("ConfigMap", "tool-gateway-definitions")["data"]
    (tmp_path / "settings.yaml").write_text(settings_text, encoding="utf-8")
    mounted = configmap_mount(tmp_path / "definitions", definitions)
    secret = find("Secret", "tool-gateway-keys")["stringData"]
    environ = {env["name"]: secret[env["valueFrom"]["secretKeyRef"]["key"]] for env in container["env"]}

    as_written = load_settings(tmp_path / "settings.yaml", environ=environ)
    settings = load_settings(tmp_path / "settings.yaml", environ=environ, definitions=mounted)
    catalog = build_catalog(load_definitions(mounted), settings)

    assert str(as_written.definitions) == mount_path(container, "definitions")
    assert settings.cluster["redis_url"].startswith("redis://")
    assert {k.sha256 for k in settings.api_keys} == {hash_key(v) for v in environ.values()}
    assert any(k.admin for k in settings.api_keys)
    assert set(catalog.tools) == {"search_stations"}
    assert catalog.tools["search_stations"].definition.rate_limit == {"calls": 100, "per_s": 1}


@pytest.mark.parametrize("path", sorted(KUBERNETES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_manifest_names_its_kind_and_api_version(path):
    """Each document of each manifest file has apiVersion, kind and metadata.name (what kubectl apply needs)."""
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if doc:
            assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name")
