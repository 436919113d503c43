"""gem-k8s-webhook: the mutating admission webhook for pods that ask for a GPU share.

For a pod whose containers ask for `gemini.io/gpu-share`, it

* **rejects** what cannot be served, with a message `kubectl` shows (share above 100 or not a
  whole number, `gemini.io/gpu-limit` below a container's share or above 1, memory above the
  GPU's, memory without a share, a share on an init container);
* **adds** a `gemini.io/gpu-memory` limit where a container has none (its share of the GPU's
  memory, with --gpu-memory-mib);
* **preloads the hook**: the agent's Allocate already sets LD_PRELOAD and mounts the hook, but a
  container's own LD_PRELOAD (its spec's env wins over the device plugin's) is rewritten to put
  the hook first; with --preload file the hook volume, the agent's `ld.so.preload`, is also
  mounted over /etc/ld.so.preload, so that processes started with a clean environment are
  hooked too;
* **records** what it admitted in the annotation `gemini.io/containers` (per container: share,
  cap, memory), which the agent reads.

`patch_pod` and `review` are pure (a pod in, a JSON patch or a refusal out); the HTTPS server
only carries AdmissionReview v1 bodies to them, and answers a malformed one with HTTP 400.
`gem-k8s-webhook certs` makes a CA and a serving certificate for the Service (cryptography).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import ipaddress
import json
import logging
import os
import ssl
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gemini.cli._args import add_verbosity, expand_verbosity
from gemini.daemon.logsetup import setup_logging
from gemini.k8s.podspec import (
    CONTAINERS_ANNOTATION,
    HOOK_IN_CONTAINER,
    LIMIT_ANNOTATION,
    ContainerAsk,
    PodError,
    asks,
    parse_limit,
)
from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE, SHARES_PER_GPU

log = logging.getLogger("gemini.k8s.webhook")
PRELOAD_VOLUME = "gemini-preload"
PRELOAD_PATH = "/etc/ld.so.preload"
MAX_BODY = 16 << 20
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


@dataclass(frozen=True)
class WebhookSettings:
    gpu_memory_mib: int | None = None  # the GPUs' memory: more is refused, none asked gets a part
    memory_unit_mib: int = 1  # as the agent's --memory-unit-mib
    preload: str = "env"  # "env" or "file" (also mount ld.so.preload)
    lib_dir: str = "/var/lib/gemini/lib"  # the agent's --state-dir/lib on the host


class Rejected(ValueError):
    """The pod is refused; the message is for its owner."""


class Malformed(ValueError):
    """Not an AdmissionReview we can answer."""


def _key(name: str) -> str:
    """A JSON-pointer token (RFC 6901)."""
    return name.replace("~", "~0").replace("/", "~1")


def _memory_ops(container: Mapping[str, Any], index: int, units: int) -> list[dict[str, Any]]:
    base = f"/spec/containers/{index}/resources"
    res = container.get("resources") or {}
    ops: list[dict[str, Any]] = []
    if not container.get("resources"):
        return [{"op": "add", "path": base, "value": {"limits": {MEMORY_RESOURCE: str(units)}}}]
    for part in ("limits", "requests"):
        have = res.get(part)
        if part == "requests" and (not have or SHARE_RESOURCE not in have):
            continue  # requests default to limits
        if have is None:
            ops.append({"op": "add", "path": f"{base}/{part}",
                        "value": {MEMORY_RESOURCE: str(units)}})
        else:
            ops.append({"op": "add", "path": f"{base}/{part}/{_key(MEMORY_RESOURCE)}",
                        "value": str(units)})
    return ops


# What the agent's Allocate sets for the hook: a container's own value would win over it, and
# its hook would look for another pod manager, client or GPU.  (POD_NAME may be the pod's own:
# the hook reads GEMINI_CLIENT first.)
AGENT_ENV = ("GEMINI_CLIENT", "POD_MANAGER_PORT", "POD_MANAGER_IP", "GEMINI_SECRET_FILE",
             "NVIDIA_VISIBLE_DEVICES")


def _check_own_env(container: Mapping[str, Any], ask: ContainerAsk) -> None:
    for var in container.get("env") or []:
        if var.get("name") in AGENT_ENV:
            raise Rejected(f'container "{ask.name}" sets {var["name"]}: gemini\'s agent sets it '
                           "(the container's own would win, and its hook would miss its pod "
                           "manager or GPU)")


def _preload_env_ops(container: Mapping[str, Any], index: int, ask: ContainerAsk
                     ) -> list[dict[str, Any]]:
    """The hook first in each of the container's own LD_PRELOADs: every one, since where a name
    is listed twice the last one is what the program gets.  None: the agent's Allocate sets it."""
    ops = []
    for j, var in enumerate(container.get("env") or []):
        if var.get("name") != "LD_PRELOAD":
            continue
        if "value" not in var and var.get("valueFrom") is not None:
            raise Rejected(f'container "{ask.name}" takes LD_PRELOAD from valueFrom: give it a '
                           "plain value, so that gemini's hook can be put first")
        value = str(var.get("value") or "")
        first = value.replace(" ", ":").split(":")[0]
        if first == HOOK_IN_CONTAINER:
            continue
        merged = f"{HOOK_IN_CONTAINER}:{value}" if value else HOOK_IN_CONTAINER
        ops.append({"op": "add", "path": f"/spec/containers/{index}/env/{j}/value",
                    "value": merged})
    return ops


def _preload_file_ops(pod: Mapping[str, Any], found: Sequence[tuple[int, ContainerAsk]],
                      settings: WebhookSettings) -> list[dict[str, Any]]:
    spec = pod.get("spec") or {}
    ops: list[dict[str, Any]] = []
    volumes = spec.get("volumes")
    volume = {"name": PRELOAD_VOLUME, "hostPath": {"path": f"{settings.lib_dir}/ld.so.preload",
                                                   "type": "File"}}
    if volumes is None:
        ops.append({"op": "add", "path": "/spec/volumes", "value": [volume]})
    elif not any(v.get("name") == PRELOAD_VOLUME for v in volumes):
        ops.append({"op": "add", "path": "/spec/volumes/-", "value": volume})
    mount = {"name": PRELOAD_VOLUME, "mountPath": PRELOAD_PATH, "readOnly": True}
    for index, ask in found:
        mounts = spec["containers"][index].get("volumeMounts")
        if mounts is None:
            ops.append({"op": "add", "path": f"/spec/containers/{index}/volumeMounts",
                        "value": [mount]})
            continue
        at_path = [m for m in mounts if m.get("mountPath") == PRELOAD_PATH]
        if any(m.get("name") != PRELOAD_VOLUME for m in at_path):
            raise Rejected(f'container "{ask.name}" mounts its own {PRELOAD_PATH}: gemini '
                           "preloads its hook there")
        if not at_path:
            ops.append({"op": "add", "path": f"/spec/containers/{index}/volumeMounts/-",
                        "value": mount})
    return ops


def patch_pod(pod: Mapping[str, Any], settings: WebhookSettings) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) for a pod; [] when it asks for no GPU share; Rejected when it
    cannot be served.  Applying it twice is harmless (reinvocation)."""
    try:
        found = asks(pod)
        if not found:
            return []
        metadata = pod.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        spec = pod["spec"]
        unit = settings.memory_unit_mib
        record: dict[str, dict[str, Any]] = {}
        ops: list[dict[str, Any]] = []
        for index, ask in found:
            container = spec["containers"][index]
            memory = ask.memory
            if memory is None:
                if settings.gpu_memory_mib is None:
                    raise Rejected(f'container "{ask.name}" asks for {SHARE_RESOURCE} without '
                                   f"{MEMORY_RESOURCE}: give its memory limit (units of {unit} "
                                   "MiB)")
                memory = max(1, ask.share * settings.gpu_memory_mib // SHARES_PER_GPU // unit)
                ops += _memory_ops(container, index, memory)
            mib = memory * unit
            if settings.gpu_memory_mib is not None and mib > settings.gpu_memory_mib:
                raise Rejected(f'container "{ask.name}": {MEMORY_RESOURCE} {memory} ({mib} MiB) '
                               f"is above the GPU's {settings.gpu_memory_mib} MiB")
            limit = (parse_limit(annotations[LIMIT_ANNOTATION], ask)
                     if LIMIT_ANNOTATION in annotations else ask.request)
            record[ask.name] = {"share": ask.share, "limit": limit, "memory_mib": mib}
            _check_own_env(container, ask)
            ops += _preload_env_ops(container, index, ask)
        if settings.preload == "file":
            ops += _preload_file_ops(pod, found, settings)
    except PodError as exc:
        raise Rejected(str(exc)) from None
    value = json.dumps(record, sort_keys=True, separators=(",", ":"))
    if not metadata:
        ops.append({"op": "add", "path": "/metadata",
                    "value": {"annotations": {CONTAINERS_ANNOTATION: value}}})
    elif "annotations" not in metadata or metadata["annotations"] is None:
        ops.append({"op": "add", "path": "/metadata/annotations",
                    "value": {CONTAINERS_ANNOTATION: value}})
    elif annotations.get(CONTAINERS_ANNOTATION) != value:
        ops.append({"op": "add", "path": f"/metadata/annotations/{_key(CONTAINERS_ANNOTATION)}",
                    "value": value})
    return ops


def review(body: bytes, settings: WebhookSettings) -> dict[str, Any]:
    """The AdmissionReview answering `body`; Malformed when it is none."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Malformed(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "AdmissionReview":
        raise Malformed("the body is not an AdmissionReview")
    version = data.get("apiVersion")
    if version not in REVIEW_VERSIONS:
        raise Malformed(f"AdmissionReview apiVersion {version!r} is not one of "
                        f"{', '.join(REVIEW_VERSIONS)}")
    request = data.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request[
            "uid"]:
        raise Malformed("the AdmissionReview has no request with a uid")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    kind = request.get("kind") or {}
    if isinstance(kind, dict) and kind.get("kind") == "Pod" and request.get("operation") in (
            None, "CREATE"):
        pod = request.get("object")
        try:
            if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
                raise Rejected("the review carries no pod")
            ops = patch_pod(pod, settings)
        except Rejected as exc:
            where = _pod_name(pod, request)
            log.info("refused pod %s: %s", where, exc)
            response.update(allowed=False, status={"code": 400, "reason": "BadRequest",
                                                   "message": f"gemini: {exc}"})
        else:
            if ops:
                log.info("admitted pod %s: %d patch operations", _pod_name(pod, request),
                         len(ops))
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    return {"apiVersion": version, "kind": "AdmissionReview", "response": response}


def _pod_name(pod: object, request: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or meta.get("generateName") or request.get("name") or "?"
    return f"{request.get('namespace') or meta.get('namespace') or '?'}/{name}"


# ---- HTTPS -----------------------------------------------------------------------------------


def make_server(host: str, port: int, cert: Path, key: Path, settings: WebhookSettings
                ) -> ThreadingHTTPServer:
    """An HTTPS server (not yet serving: call serve_forever); TLS is negotiated in each
    connection's own thread, so a slow or broken client holds up no other."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def _reply(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._reply(200, b"ok\n", "text/plain")
            else:
                self._reply(404, b"not found\n", "text/plain")

        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/mutate":
                self._reply(404, b"not found: POST AdmissionReviews to /mutate\n", "text/plain")
                return
            try:
                size = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._reply(411, b"Content-Length required\n", "text/plain")
                return
            if not 0 <= size <= MAX_BODY:
                self.close_connection = True
                self._reply(413, b"body too large\n", "text/plain")
                return
            body = self.rfile.read(size)
            try:
                answer = json.dumps(review(body, settings)).encode()
            except Malformed as exc:
                log.warning("malformed review from %s: %s", self.client_address[0], exc)
                self._reply(400, f"malformed AdmissionReview: {exc}\n".encode(), "text/plain")
                return
            self._reply(200, answer, "application/json")

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.client_address[0], format % args)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            exc = sys.exc_info()[1]
            log.warning("connection from %s failed: %s", client_address[0], exc)

    server = Server((host, port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    return server


# ---- certificates ----------------------------------------------------------------------------


def make_certificates(out: Path, names: Sequence[str], days: int = 3650) -> None:
    """ca.crt, tls.crt and tls.key in `out`: a CA of its own and a serving certificate for
    `names` (DNS names or IP addresses), signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gemini webhook CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    out.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    (out / "ca.crt").write_bytes(ca.public_bytes(pem))
    (out / "tls.crt").write_bytes(cert.public_bytes(pem))
    fd = os.open(out / "tls.key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def service_names(service: str, namespace: str) -> list[str]:
    return [f"{service}.{namespace}.svc", service, f"{service}.{namespace}",
            f"{service}.{namespace}.svc.cluster.local"]


# ---- command line ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    d = WebhookSettings()
    p = argparse.ArgumentParser(prog="gem-k8s-webhook",
                                description="gemini's mutating admission webhook for pods that "
                                "ask for gemini.io/gpu-share (see README: Kubernetes).")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve AdmissionReviews on HTTPS POST /mutate")
    serve.add_argument("--cert", type=Path, required=True, help="serving certificate (PEM)")
    serve.add_argument("--key", type=Path, required=True, help="its private key (PEM)")
    serve.add_argument("--ip", default="0.0.0.0", help="address (0.0.0.0)")
    serve.add_argument("--port", type=int, default=8443, help="port (8443)")
    serve.add_argument("--gpu-memory-mib", type=int, default=None,
                       help="the GPUs' memory: more is refused; a container without "
                       "gemini.io/gpu-memory gets its share of it (without: refused)")
    serve.add_argument("--memory-unit-mib", type=int, default=d.memory_unit_mib,
                       help="MiB per gemini.io/gpu-memory unit, as the agent's (1)")
    serve.add_argument("--preload", choices=("env", "file"), default=d.preload,
                       help="env: a container's own LD_PRELOAD gets the hook first; file: also "
                       "mount the agent's ld.so.preload over /etc/ld.so.preload (env)")
    serve.add_argument("--lib-dir", default=d.lib_dir,
                       help=f"the agent's --state-dir/lib on the nodes ({d.lib_dir})")
    add_verbosity(serve)
    certs = sub.add_parser("certs", help="make a CA and a serving certificate")
    certs.add_argument("--out", type=Path, required=True, help="directory for ca.crt, tls.*")
    certs.add_argument("--service", default="gemini-webhook", help="Service name")
    certs.add_argument("--namespace", default="gemini-system", help="its namespace")
    certs.add_argument("--name", action="append", default=[],
                       help="another DNS name or IP address (repeatable)")
    certs.add_argument("--days", type=int, default=3650, help="validity (3650)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(expand_verbosity(sys.argv[1:] if argv is None else argv))
    if args.command == "certs":
        make_certificates(args.out, [*service_names(args.service, args.namespace), *args.name],
                          args.days)
        ca = base64.b64encode((args.out / "ca.crt").read_bytes()).decode()
        print(f"wrote {args.out}/ca.crt, tls.crt, tls.key; caBundle: {ca}")
        return 0
    setup_logging("gem-k8s-webhook", args.verbose)
    if args.memory_unit_mib <= 0 or (args.gpu_memory_mib is not None and args.gpu_memory_mib <= 0):
        print("gem-k8s-webhook: --memory-unit-mib and --gpu-memory-mib must be positive",
              file=sys.stderr)
        return 2
    settings = WebhookSettings(args.gpu_memory_mib, args.memory_unit_mib, args.preload,
                               args.lib_dir)
    try:
        server = make_server(args.ip, args.port, args.cert, args.key, settings)
    except (OSError, ssl.SSLError) as exc:
        print(f"gem-k8s-webhook: cannot serve on {args.ip}:{args.port}: {exc}", file=sys.stderr)
        return 1
    log.info("serving AdmissionReviews on https://%s:%d/mutate", args.ip,
             server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
