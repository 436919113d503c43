"""Reading one pod from the Kubernetes API server: all the agent asks of it (RBAC: get pods).

In a pod, the address, token and CA come from the service account (`in_cluster`); elsewhere give
a URL (tests use a plain-HTTP stand-in).  Blocking: the agent calls it from a worker thread.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_S = 10.0


class ApiError(ValueError):
    """The pod could not be read; the message says why."""


@dataclass(frozen=True)
class ApiServer:
    url: str
    token_file: Path | None = None
    ca_file: Path | None = None

    @classmethod
    def in_cluster(cls) -> ApiServer:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ApiError("not in a pod (KUBERNETES_SERVICE_HOST unset): give --api-server")
        if ":" in host:
            host = f"[{host}]"
        return cls(f"https://{host}:{port}", SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt")

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        path = (f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/pods/"
                f"{urllib.parse.quote(name, safe='')}")
        request = urllib.request.Request(self.url.rstrip("/") + path,
                                         headers={"Accept": "application/json"})
        if self.token_file is not None:
            # Read each time: the kubelet rotates projected tokens.
            request.add_header("Authorization", f"Bearer {self.token_file.read_text().strip()}")
        context = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(
                cafile=str(self.ca_file) if self.ca_file else None)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as reply:
                pod = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise ApiError(f"the API server answered {exc.code} for pod {namespace}/{name}"
                           ) from None
        except (OSError, ValueError) as exc:
            raise ApiError(f"cannot read pod {namespace}/{name} from {self.url}: {exc}") from None
        if not isinstance(pod, dict):
            raise ApiError(f"pod {namespace}/{name}: the API server sent no object")
        return pod
