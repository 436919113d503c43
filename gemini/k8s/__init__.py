"""Kubernetes integration: a node agent that is the kubelet's device plugin for GPU shares and
runs gemini's daemons for the pods that get them (agent.py), and a mutating admission webhook
(webhook.py).  Needs the `k8s` extra (grpcio, protobuf, cryptography)."""
