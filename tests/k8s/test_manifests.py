"""deploy/kubernetes: every object valid against the Kubernetes schemas (kubernetes-validate,
strict, offline), and consistent with the code (the example pod passes the webhook configured as
the manifest configures it; the agent's state directory has the same path inside and out; RBAC
grants `get pods` and nothing more)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gemini.k8s import webhook
from gemini.k8s.agent import build_parser as agent_parser
from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
FILES = sorted(DEPLOY.glob("*.yaml"))
# The oldest version with everything used (matchConditions: GA in 1.30), and the newest known.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def objects() -> list[dict[str, Any]]:
    out = []
    for path in FILES:
        out += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def find(kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_manifests_are_all_there():
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects()}
    assert kinds == {
        ("Namespace", "gemini-system"), ("ServiceAccount", "gemini-agent"),
        ("ClusterRole", "gemini-agent"), ("ClusterRoleBinding", "gemini-agent"),
        ("ServiceAccount", "gemini-webhook"), ("DaemonSet", "gemini-agent"),
        ("Deployment", "gemini-webhook"), ("Service", "gemini-webhook"),
        ("MutatingWebhookConfiguration", "gemini-webhook"), ("Pod", "gemini-example"),
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("obj", objects(), ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_valid_against_the_kubernetes_schema(obj, version):
    kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_catches_mistakes():
    ds = copy.deepcopy(find("DaemonSet", "gemini-agent"))
    ds["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[-1], strict=True)
    hook = copy.deepcopy(find("MutatingWebhookConfiguration", "gemini-webhook"))
    hook["webhooks"][0]["sideEffects"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hook, VERSIONS[-1], strict=True)


def test_rbac_is_get_pods_and_nothing_more():
    role = find("ClusterRole", "gemini-agent")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    binding = find("ClusterRoleBinding", "gemini-agent")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gemini-agent",
                                    "namespace": "gemini-system"}]
    assert find("ServiceAccount", "gemini-webhook")["automountServiceAccountToken"] is False
    pod = find("Deployment", "gemini-webhook")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False


def test_the_agent_sees_its_state_and_the_kubelets_sockets_where_the_host_has_them():
    spec = find("DaemonSet", "gemini-agent")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    ns = agent_parser().parse_args(container["args"])
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["mountPath"]: volumes.get(m["name"]) for m in container["volumeMounts"]}
    assert mounts[str(ns.state_dir)] == str(ns.state_dir)  # the kubelet mounts from it
    assert mounts[str(ns.plugin_dir)] == str(ns.plugin_dir)
    assert mounts[str(ns.pod_resources.parent)] == str(ns.pod_resources.parent)
    assert mounts[str(ns.dev_dir)] == "/dev"
    assert spec["serviceAccountName"] == "gemini-agent"


def test_the_example_pod_passes_the_webhook_as_deployed():
    args = find("Deployment", "gemini-webhook")["spec"]["template"]["spec"]["containers"][0]
    ns = webhook.build_parser().parse_args([*args["command"][1:], *args["args"]])
    settings = webhook.WebhookSettings(ns.gpu_memory_mib, ns.memory_unit_mib, ns.preload,
                                       ns.lib_dir)
    pod = find("Pod", "gemini-example")
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert (limits[SHARE_RESOURCE], limits[MEMORY_RESOURCE]) == (30, 4096)
    ops = webhook.patch_pod(pod, settings)
    (record,) = [op for op in ops if "annotations" in op["path"]]
    assert record["value"] == '{"main":{"limit":0.6,"memory_mib":4096,"share":30}}'
    service = find("Service", "gemini-webhook")
    client = find("MutatingWebhookConfiguration", "gemini-webhook")["webhooks"][0]
    assert client["clientConfig"]["service"]["name"] == service["metadata"]["name"]
    assert service["spec"]["ports"][0]["targetPort"] == "https"
    assert f"--port={args['ports'][0]['containerPort']}" in args["args"]
