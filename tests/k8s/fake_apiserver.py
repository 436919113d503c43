"""An API server for tests: GET /api/v1/namespaces/NS/pods/NAME from a dict, over plain HTTP."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_POD = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/?]+)")


class FakeApiServer:
    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append(self.path)
                m = _POD.fullmatch(self.path)
                pod = api.pods.get((m.group(1), m.group(2))) if m else None
                body = json.dumps(pod if pod is not None else {"kind": "Status", "code": 404})
                self.send_response(200 if pod is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_pod(self, namespace: str, name: str, containers: dict[str, dict[str, int]],
                annotations: dict[str, str] | None = None, uid: str = "") -> dict[str, Any]:
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                         "annotations": annotations or {}},
            "spec": {"containers": [
                {"name": c, "image": "x", "resources": {"limits": {k: str(v)
                                                                  for k, v in asks.items()}}}
                for c, asks in containers.items()
            ]},
        }
        self.pods[(namespace, name)] = pod
        return pod

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
