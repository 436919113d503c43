"""The committed gRPC stubs match their .proto files, and the wire names are the kubelet's."""

from __future__ import annotations

from gemini.k8s.api import deviceplugin_pb2, generate, podresources_pb2


def test_committed_stubs_are_up_to_date():
    assert generate.main(["--check"]) == 0


def test_services_and_fields_as_the_kubelet_names_them():
    dp = deviceplugin_pb2.DESCRIPTOR
    assert dp.package == "v1beta1"  # gRPC paths /v1beta1.Registration/Register, ...
    assert [m.name for m in dp.services_by_name["DevicePlugin"].methods] == [
        "GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate",
        "PreStartContainer"]
    fields = {f.name: f.number for f in dp.message_types_by_name[
        "ContainerAllocateResponse"].fields}
    assert fields == {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4, "cdi_devices": 5}
    pr = podresources_pb2.DESCRIPTOR
    assert pr.package == "v1" and "PodResourcesLister" in pr.services_by_name
