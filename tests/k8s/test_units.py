"""Unit IDs and the choice of units (pure), with property tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.k8s.units import Gpu, Kind, UnitError, one_gpu, parse_unit, preferred, unit_id, units


def test_ids_name_their_gpu_kind_and_number():
    assert unit_id("3", Kind.MEMORY, 4095) == "g3-m4095"
    assert parse_unit("g3-m4095") == ("3", Kind.MEMORY, 4095)
    assert parse_unit("g10-s0") == ("10", Kind.SHARE, 0)
    for bad in ("g3-x1", "3-s1", "g-s1", "g1-s", "g1-s1 ", "GPU-abc"):
        with pytest.raises(UnitError, match="not a gemini unit ID"):
            parse_unit(bad)


def test_a_gpu_has_100_share_units_and_one_memory_unit_per_unit_mib():
    gpu = Gpu("1", "GPU-x", 1000)
    assert len(units(gpu, Kind.SHARE)) == 100
    assert units(gpu, Kind.MEMORY, 256) == ["g1-m0", "g1-m1", "g1-m2"]  # 1000 // 256
    assert gpu.device_minor == 1 and Gpu("1", "GPU-x", 1, minor=5).device_minor == 5


def test_one_gpu_names_the_split():
    assert one_gpu(["g2-s1", "g2-s7"], Kind.SHARE) == "2"
    with pytest.raises(UnitError, match=r"3 units span several GPUs \(GPU 0: 2, GPU 1: 1\)"):
        one_gpu(["g0-s1", "g1-s1", "g0-s2"], Kind.SHARE)
    with pytest.raises(UnitError, match=r"no gemini\.io/gpu-share units"):
        one_gpu([], Kind.SHARE)


@st.composite
def requests(draw):
    """Free units on up to 4 GPUs, a size, units that must be in, a hint."""
    gpus = draw(st.integers(1, 4))
    free = {g: sorted(draw(st.sets(st.integers(0, 99), max_size=30))) for g in range(gpus)}
    available = [f"g{g}-s{k}" for g, ks in free.items() for k in ks]
    draw(st.randoms()).shuffle(available)
    size = draw(st.integers(1, max(1, len(available))))
    must = draw(st.lists(st.sampled_from(available), max_size=3, unique=True)) if available \
        else []
    must = must[:size]
    hint = draw(st.none() | st.sampled_from([str(g) for g in range(gpus)]))
    return available, must, size, hint


def gpu(unit: str) -> str:
    return unit.split("-")[0]


@given(requests())
def test_preferred_picks_from_one_gpu_whenever_one_can_hold_them(req):
    available, must, size, hint = req
    got = preferred(available, must, size, hint)
    assert len(got) == len(set(got)) == min(size, len(available))
    assert set(got) <= set(available) and set(must) <= set(got)
    must_gpus = {gpu(u) for u in must}
    holders = [g for g in {gpu(u) for u in available}
               if must_gpus <= {g} and sum(gpu(u) == g for u in available) >= size]
    if holders:
        assert len({gpu(u) for u in got}) == 1
        if hint is not None and f"g{hint}" in holders:
            assert {gpu(u) for u in got} == {f"g{hint}"}
    assert preferred(available, must, size, hint) == got  # deterministic


def test_preferred_best_fit_and_lowest_units():
    available = ["g0-s5", "g0-s3", "g0-s9", "g1-s1", "g1-s2"]
    assert preferred(available, [], 2) == ["g1-s1", "g1-s2"]  # GPU 1: fewer free, still fits
    assert preferred(available, [], 3) == ["g0-s3", "g0-s5", "g0-s9"]
    assert preferred(available, [], 2, hint="0") == ["g0-s3", "g0-s5"]
    assert preferred(available, [], 4) == ["g0-s3", "g0-s5", "g0-s9", "g1-s1"]  # no GPU holds 4
