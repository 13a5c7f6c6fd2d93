"""Shared by the deploy tests (tests/python/test_deploy_*.py): where deploy/ is, the manifests as
`kubectl kustomize` renders each overlay, and the schema check of one Kubernetes object: built-in
kinds against the Kubernetes OpenAPI schemas of the pinned kubernetes-validate package (strict:
an unknown field fails), custom resources against the schema their CRD declares
(third_party/crd-schemas, made strict the same way: the API server drops unknown fields)."""
import functools
import glob
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
KUBE = os.path.join(DEPLOY, "kubernetes")
OVERLAYS = ["gpu", "mig", "cpu"]
K8S_VERSION = "1.30"  # the oldest Kubernetes the manifests target

yaml = pytest.importorskip("yaml")


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def kubectl():
    k = shutil.which("kubectl")
    if not k:
        pytest.skip("kubectl not installed (Debian package kubernetes-client; scripts/deps.sh installs it)")
    return k


@functools.lru_cache(maxsize=None)
def _kustomize(path):
    r = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kubectl kustomize {path} failed:\n{r.stderr}"
    return r.stdout


def render(overlay):
    """The objects `kubectl kustomize deploy/kubernetes/overlays/<overlay>` renders."""
    return [d for d in yaml.safe_load_all(_kustomize(os.path.join(KUBE, "overlays", overlay))) if d]


def kserve_objects():
    out = []
    for p in sorted(glob.glob(os.path.join(DEPLOY, "kserve", "*.yaml"))):
        out += [(os.path.relpath(p, ROOT), d) for d in load_yaml_docs(p)]
    return out


def _strict(node):
    """additionalProperties: false on every object schema with properties and no escape hatch."""
    if isinstance(node, dict):
        node = {k: _strict(v) for k, v in node.items()}
        if (node.get("type") == "object" and "properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@functools.lru_cache(maxsize=None)
def _crd_schema(kind, group, version):
    p = os.path.join(ROOT, "third_party", "crd-schemas", f"{kind.lower()}-{group}-{version}.json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        schema = _strict(json.load(f))
    # metadata is the API server's ObjectMeta, not described by the CRD: checked loosely here.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return schema


def validate_object(obj):
    """Raises AssertionError naming the object and the failing field."""
    import jsonschema
    import kubernetes_validate

    api = obj.get("apiVersion", "")
    kind = obj.get("kind", "")
    name = f"{kind}/{obj.get('metadata', {}).get('name')}"
    assert api and kind, f"object without apiVersion/kind: {obj}"
    group, _, version = api.rpartition("/")
    schema = _crd_schema(kind, group, version) if group and "." in group and not group.endswith(".k8s.io") else None
    if schema is not None:
        try:
            jsonschema.Draft7Validator(schema).validate(obj)
        except jsonschema.ValidationError as e:
            raise AssertionError(f"{name}: {'.'.join(str(p) for p in e.absolute_path)}: {e.message}") from None
        return "crd"
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.utils.SchemaNotFoundError as e:
        raise AssertionError(f"{name}: no schema for {api} {kind} (neither Kubernetes {K8S_VERSION} nor a vendored CRD)") from e
    except kubernetes_validate.ValidationError as e:
        raise AssertionError(f"{name}: {'.'.join(str(p) for p in e.absolute_path)}: {e.message}") from None
    return "kubernetes"


def gpuopt_help(*sub):
    from gpuopt_cli import gpuopt_bin
    r = subprocess.run([gpuopt_bin(), *sub, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def flags_in_help(text):
    import re
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", text))
