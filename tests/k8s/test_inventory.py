"""Finding the node's GPUs: nvidia-smi's CSV (with the driver's /proc minor numbers) and the JSON
file the tests and the fake GPU use."""

from __future__ import annotations

import pytest

from gemini.k8s.inventory import InventoryError, parse_file, parse_nvidia_smi, scan_file
from gemini.k8s.units import Gpu

SMI = """0, GPU-8c2a1b3d-aaaa, 81559, 00000000:3B:00.0
1, GPU-9d3b2c4e-bbbb, 81559, 00000000:86:00.0
garbage line
"""


def test_nvidia_smi_csv_with_minor_numbers_from_proc(tmp_path):
    info = tmp_path / "0000:86:00.0"
    info.mkdir()
    (info / "information").write_text("Model: H100\nIRQ: 1\nDevice Minor: 5\nBus Type: PCIe\n")
    assert parse_nvidia_smi(SMI, tmp_path) == [
        Gpu("0", "GPU-8c2a1b3d-aaaa", 81559, None), Gpu("1", "GPU-9d3b2c4e-bbbb", 81559, 5)]
    assert [g.device_minor for g in parse_nvidia_smi(SMI, tmp_path)] == [0, 5]


def test_gpu_file(tmp_path):
    assert parse_file('[{"index": 1, "uuid": "GPU-x", "memory_mib": 1024, "minor": 3}]') == [
        Gpu("1", "GPU-x", 1024, 3)]
    with pytest.raises(InventoryError, match="expected a JSON list of GPUs"):
        parse_file('[{"index": 1}]')
    # unreadable: no GPU (all unhealthy), and a line saying why
    assert scan_file(tmp_path / "missing.json") == []
