"""The kubelet's gRPC APIs that gemini speaks: device plugin v1beta1 (Registration, DevicePlugin)
and PodResources v1 (List).  The .proto files are ours, written from the published field names and
numbers; the *_pb2 modules are generated from them (`python -m gemini.k8s.api.generate`)."""
