"""The admission webhook: the patch (applied and checked), refusals, and AdmissionReview round
trips over real HTTPS with a certificate of our own CA."""

from __future__ import annotations

import base64
import copy
import http.client
import json
import ssl
import threading
from typing import Any

import pytest

from gemini.k8s.podspec import CONTAINERS_ANNOTATION, HOOK_IN_CONTAINER
from gemini.k8s.webhook import (
    Malformed,
    Rejected,
    WebhookSettings,
    make_certificates,
    make_server,
    patch_pod,
    review,
)

SETTINGS = WebhookSettings(gpu_memory_mib=81920)
SHARE, MEMORY, LIMIT = "gemini.io/gpu-share", "gemini.io/gpu-memory", "gemini.io/gpu-limit"


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/replace, enough to check the webhook's patches (it emits only these)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        *parents, last = [t.replace("~1", "/").replace("~0", "~")
                          for t in op["path"].split("/")[1:]]
        target = doc
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if isinstance(target, list):
            if last == "-":
                target.append(op["value"])
            elif op["op"] == "add":
                target.insert(int(last), op["value"])
            else:
                target[int(last)] = op["value"]
        else:
            assert op["op"] == "add" or last in target, op
            target[last] = op["value"]
    return doc


def pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": list(containers), **spec}}


def gpu(name: str = "main", share: Any = "30", memory: Any = "4096", **extra: Any
        ) -> dict[str, Any]:
    limits = {"cpu": "1", SHARE: share}
    if memory is not None:
        limits[MEMORY] = memory
    return {"name": name, "image": "x", "resources": {"limits": limits}, **extra}


def record(patched: dict[str, Any]) -> dict[str, Any]:
    return json.loads(patched["metadata"]["annotations"][CONTAINERS_ANNOTATION])


def test_a_pod_without_gpu_share_is_left_alone():
    assert patch_pod(pod({"name": "c", "image": "x"}), SETTINGS) == []


def test_the_issue_pod_gets_its_record_and_the_hook_first_in_its_own_ld_preload():
    p = pod(gpu(env=[{"name": "A", "value": "1"}, {"name": "LD_PRELOAD", "value": "/my.so"}]),
            {"name": "sidecar", "image": "y"}, annotations={LIMIT: "0.6", "team": "x"})
    ops = patch_pod(p, SETTINGS)
    patched = apply(p, ops)
    assert record(patched) == {"main": {"share": 30, "limit": 0.6, "memory_mib": 4096}}
    assert patched["metadata"]["annotations"]["team"] == "x"
    env = patched["spec"]["containers"][0]["env"]
    assert env[1] == {"name": "LD_PRELOAD", "value": f"{HOOK_IN_CONTAINER}:/my.so"}
    assert patched["spec"]["containers"][1] == p["spec"]["containers"][1]
    # reinvoked on its own result: nothing more to do
    assert patch_pod(patched, SETTINGS) == []


def test_every_ld_preload_of_a_container_gets_the_hook_first():
    """(A name listed twice: the last one is the program's, and it kept no hook.)"""
    p = pod(gpu(env=[{"name": "LD_PRELOAD", "value": "/a.so"},
                     {"name": "LD_PRELOAD", "value": "/b.so"}]))
    patched = apply(p, patch_pod(p, SETTINGS))
    values = [v["value"] for v in patched["spec"]["containers"][0]["env"]]
    assert values == [f"{HOOK_IN_CONTAINER}:/a.so", f"{HOOK_IN_CONTAINER}:/b.so"]
    assert patch_pod(patched, SETTINGS) == []


def test_quantities_the_api_server_writes_in_canonical_form_are_read():
    """It hands the webhook each quantity re-encoded: 16000 as "16k", 30 as "30", 4096 Ki as
    "4Ki"; every multiple of 1000 was refused as not a whole number."""
    for memory, mib in (("16k", 16000), ("4Ki", 4096), ("1e3", 1000), ("1.5k", 1500),
                        ("1E3", 1000)):
        patched = apply(p := pod(gpu(share="3e1", memory=memory)), patch_pod(p, SETTINGS))
        assert record(patched) == {"main": {"share": 30, "limit": 0.3, "memory_mib": mib}}
    for share in ("100m", "0.5", "-1"):
        with pytest.raises(Rejected, match="must be a whole number greater than 0"):
            patch_pod(pod(gpu(share=share)), SETTINGS)
    with pytest.raises(Rejected, match="is above 100"):  # ("E": exa; it took an exponent)
        patch_pod(pod(gpu(share="1E")), SETTINGS)


def test_missing_memory_is_the_share_of_the_gpu_and_annotations_are_created():
    p = pod(gpu(share=25, memory=None), gpu("two", share=50, memory=None))
    p["spec"]["containers"][1]["resources"]["requests"] = {SHARE: "50"}
    patched = apply(p, patch_pod(p, SETTINGS))
    one, two = patched["spec"]["containers"]
    assert one["resources"]["limits"][MEMORY] == "20480"
    assert two["resources"]["limits"][MEMORY] == two["resources"]["requests"][MEMORY] == "40960"
    assert record(patched) == {"main": {"share": 25, "limit": 0.25, "memory_mib": 20480},
                               "two": {"share": 50, "limit": 0.5, "memory_mib": 40960}}
    coarse = WebhookSettings(gpu_memory_mib=81920, memory_unit_mib=256)
    patched = apply(p, patch_pod(p, coarse))
    assert patched["spec"]["containers"][0]["resources"]["limits"][MEMORY] == "80"  # × 256 MiB


def test_file_preload_mounts_the_agents_ld_so_preload():
    settings = WebhookSettings(gpu_memory_mib=81920, preload="file", lib_dir="/var/lib/gemini/lib")
    p = pod(gpu(volumeMounts=[{"name": "data", "mountPath": "/data"}]),
            volumes=[{"name": "data", "emptyDir": {}}])
    patched = apply(p, patch_pod(p, settings))
    assert patched["spec"]["volumes"][1] == {
        "name": "gemini-preload",
        "hostPath": {"path": "/var/lib/gemini/lib/ld.so.preload", "type": "File"}}
    assert patched["spec"]["containers"][0]["volumeMounts"][1] == {
        "name": "gemini-preload", "mountPath": "/etc/ld.so.preload", "readOnly": True}
    assert patch_pod(patched, settings) == []
    bare = pod(gpu())
    patched = apply(bare, patch_pod(bare, settings))
    assert [v["name"] for v in patched["spec"]["volumes"]] == ["gemini-preload"]


@pytest.mark.parametrize(("p", "message"), [
    (pod(gpu(share="150")), 'container "main": gemini.io/gpu-share 150 is above 100'),
    (pod(gpu(share="0")), "gemini.io/gpu-share '0' must be a whole number greater than 0"),
    (pod(gpu(share="0.5")), "must be a whole number"),
    (pod(gpu(), annotations={LIMIT: "0.2"}),
     'gemini.io/gpu-limit 0.2 is below the guaranteed share 0.30 of container "main"'),
    (pod(gpu(), annotations={LIMIT: "1.5"}), "must be above 0 and at most 1"),
    (pod(gpu(memory="100000")), "gemini.io/gpu-memory 100000 (100000 MiB) is above the GPU's "
                                "81920 MiB"),
    (pod({"name": "c", "image": "x", "resources": {"limits": {MEMORY: "1"}}}),
     "gemini.io/gpu-memory without gemini.io/gpu-share"),
    (pod(gpu(), initContainers=[gpu("init")]), 'init container "init" asks for'),
    (pod(gpu(env=[{"name": "LD_PRELOAD", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}])),
     "takes LD_PRELOAD from valueFrom"),
    (pod(gpu(env=[{"name": "POD_MANAGER_PORT", "value": "50052"}])),
     'container "main" sets POD_MANAGER_PORT: gemini\'s agent sets it'),
    (pod(gpu(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
     "sets NVIDIA_VISIBLE_DEVICES"),
])
def test_impossible_requests_are_refused_with_a_message(p, message):
    with pytest.raises(Rejected) as err:
        patch_pod(p, SETTINGS)
    assert message in str(err.value)


def test_a_pods_own_pod_name_is_let_through():
    """(The hook reads the agent's GEMINI_CLIENT first.)"""
    own = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert record(apply(pod(gpu(env=[own])), patch_pod(pod(gpu(env=[own])), SETTINGS)))


def test_no_memory_and_no_gpu_size_is_refused():
    with pytest.raises(Rejected, match=r"without gemini\.io/gpu-memory"):
        patch_pod(pod(gpu(memory=None)), WebhookSettings())


def admission_review(obj: Any, uid: str = "u-1", version: str = "admission.k8s.io/v1",
                     operation: str = "CREATE") -> bytes:
    return json.dumps({"apiVersion": version, "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ns", "operation": operation, "object": obj}}).encode()


def test_review_answers_with_the_patch_or_the_refusal():
    p = pod(gpu())
    answer = review(admission_review(p), SETTINGS)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert (response["uid"], response["allowed"], response["patchType"]) == (
        "u-1", True, "JSONPatch")
    ops = json.loads(base64.b64decode(response["patch"]))
    assert ops == patch_pod(p, SETTINGS)
    refused = review(admission_review(pod(gpu(share="101"))), SETTINGS)["response"]
    assert refused["allowed"] is False and refused["status"]["code"] == 400
    assert "gemini: container \"main\": gemini.io/gpu-share 101 is above 100" in \
        refused["status"]["message"]
    plain = review(admission_review(pod({"name": "c"}), operation="UPDATE"), SETTINGS)
    assert plain["response"] == {"uid": "u-1", "allowed": True}
    old = review(admission_review(p, version="admission.k8s.io/v1beta1"), SETTINGS)
    assert old["apiVersion"] == "admission.k8s.io/v1beta1"


@pytest.mark.parametrize(("body", "message"), [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not an AdmissionReview"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "v2"}).encode(), "apiVersion 'v2'"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}).encode(),
     "no request with a uid"),
    (b"\xff\xfe", "not JSON"),
])
def test_malformed_reviews_are_errors(body, message):
    with pytest.raises(Malformed, match=message):
        review(body, SETTINGS)


def test_a_review_without_a_pod_is_refused_not_crashed():
    answer = review(admission_review("not a pod"), SETTINGS)["response"]
    assert answer["allowed"] is False and "carries no pod" in answer["status"]["message"]


# ---- over HTTPS --------------------------------------------------------------------------------


@pytest.fixture
def https(tmp_path):
    make_certificates(tmp_path, ["localhost", "127.0.0.1"])
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    server = make_server("127.0.0.1", 0, tmp_path / "tls.crt", tmp_path / "tls.key", SETTINGS)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))

    def post(body: bytes, path: str = "/mutate") -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("localhost", server.server_address[1],
                                           context=context, timeout=10)
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    yield post, server.server_address[1], context
    server.shutdown()
    server.server_close()


def test_https_round_trips(https):
    post, _, _ = https
    p = pod(gpu(), annotations={LIMIT: "0.6"})
    status, body = post(admission_review(p, uid="abc"))
    assert status == 200
    response = json.loads(body)["response"]
    assert response["uid"] == "abc" and response["allowed"]
    patched = apply(p, json.loads(base64.b64decode(response["patch"])))
    assert record(patched)["main"]["limit"] == 0.6
    status, body = post(admission_review(pod(gpu(memory="90000"))))
    assert status == 200 and not json.loads(body)["response"]["allowed"]


def test_https_malformed_garbage_and_plain_http_keep_it_serving(https):
    post, port, context = https
    status, body = post(b"{garbage")
    assert status == 400 and b"malformed AdmissionReview: the body is not JSON" in body
    assert post(b"{}", path="/other")[0] == 404
    # plain HTTP on the TLS port: that connection fails, the server does not
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("POST", "/mutate", b"{}")
        conn.getresponse().read()
    conn.close()
    # a client that does not trust our CA is refused by its own TLS check
    with pytest.raises(ssl.SSLError):
        bad = http.client.HTTPSConnection("localhost", port, timeout=10,
                                          context=ssl.create_default_context())
        bad.request("GET", "/healthz")
    status, _ = post(admission_review(pod(gpu())))
    assert status == 200
    health = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    health.request("GET", "/healthz")
    assert health.getresponse().status == 200
