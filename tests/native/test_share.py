"""The launch allowance the token gate's hot path shares among launching threads
(csrc/common/share.c): threads that launch together go no further together than one thread
alone would, and no thread writes a shared count per launch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gemini.native import _common

ffi, lib = _common.ffi, _common.lib


def new_share():
    return ffi.new("struct gem_share *")


def new_uses(n: int) -> list:
    return [ffi.new("struct gem_share_use *") for _ in range(n)]


def take_all(share, use) -> int:
    """The launches `use`'s thread goes before it must look again."""
    n = 0
    while lib.gem_share_take(share, use):
        n += 1
    return n


def test_nothing_goes_before_the_first_look():
    share, (use,) = new_share(), new_uses(1)
    assert lib.gem_share_take(share, use) == 0


def test_a_thread_alone_goes_the_whole_allowance_at_every_look():
    share, (use,) = new_share(), new_uses(1)
    for allowance in (8, 1, 0, 300):
        lib.gem_share_set(share, use, allowance)
        assert take_all(share, use) == allowance


def test_threads_that_launched_together_share_the_next_allowance():
    share, uses = new_share(), new_uses(4)
    lib.gem_share_set(share, uses[0], 64)
    for u in uses:  # each takes a part of the first share: four threads launch
        lib.gem_share_take(share, u)
    lib.gem_share_set(share, uses[0], 64)
    assert [take_all(share, u) for u in uses] == [16, 16, 16, 16]


def test_a_share_is_new_to_every_thread_once_set():
    share, uses = new_share(), new_uses(2)
    lib.gem_share_set(share, uses[0], 10)
    assert take_all(share, uses[1]) == 10  # (one thread counted before: the part is whole)
    lib.gem_share_set(share, uses[1], 10)
    assert take_all(share, uses[0]) == 5
    assert take_all(share, uses[1]) == 5


def test_a_thread_that_looks_without_having_launched_on_the_share_is_counted_too():
    share, uses = new_share(), new_uses(3)
    lib.gem_share_set(share, uses[0], 30)
    lib.gem_share_take(share, uses[1])
    lib.gem_share_set(share, uses[2], 30)  # (its launch went slow without a take: a graph's)
    assert [take_all(share, u) for u in uses] == [10, 10, 10]


def test_threads_the_host_stopped_for_a_few_looks_still_have_their_part_counted():
    """Three threads launch; two are stopped while the third looks twice on its own.  Counted
    by the previous share alone, its parts grew to the whole allowance, and the two came back
    to a whole allowance each (fake GPU: three threads of tiny graphs ran 6.5-19 ms past a
    50 ms token, a run in five on a loaded machine).  Lately counted, they share one."""
    share, uses = new_share(), new_uses(3)
    lib.gem_share_set(share, uses[0], 30)
    for u in uses:
        lib.gem_share_take(share, u)
    for _ in range(2):  # thread 0 alone, its part used up each time
        lib.gem_share_set(share, uses[0], 30)
        take_all(share, uses[0])
    lib.gem_share_set(share, uses[0], 30)
    assert [take_all(share, u) for u in uses] == [10, 10, 10]
    # Once a thread is alone for long enough, its part is the whole allowance again.
    for _ in range(3 * lib.GEM_SHARE_FORGET_LOOKS):
        lib.gem_share_set(share, uses[0], 30)
        take_all(share, uses[0])
    lib.gem_share_set(share, uses[0], 30)
    assert take_all(share, uses[0]) == 30


def test_the_part_is_bounded_by_what_the_word_holds():
    share, (use,) = new_share(), new_uses(1)
    lib.gem_share_set(share, use, 10 * lib.GEM_SHARE_PART_MAX)
    assert share.word & lib.GEM_SHARE_PART_MAX == lib.GEM_SHARE_PART_MAX


# A run: each step is a launch by thread i, or a look by thread i (allowance a).
steps = st.lists(
    st.tuples(st.sampled_from(["take"] * 6 + ["set"]), st.integers(0, 3), st.integers(0, 12)),
    max_size=300,
)


@given(steps)
def test_a_share_goes_at_most_its_allowance_plus_a_part_per_thread_new_to_it(run):
    """Between two looks the threads go at most the allowance, plus a part for each thread
    that had not launched on the share before (the setter counts as launched)."""
    share, uses = new_share(), new_uses(6)
    launched_before: set[int] = set()  # threads that launched on the previous share
    allowance = part = 0
    went: dict[int, int] = {}
    set_yet = False

    def check() -> None:
        newcomers = len(set(went) - launched_before)
        assert sum(went.values()) <= allowance + newcomers * part

    for kind, i, a in run:
        if kind == "set":
            check()
            launched_before = set(went) | {i}
            lib.gem_share_set(share, uses[i], a)
            allowance, part = a, share.word & lib.GEM_SHARE_PART_MAX
            went = {i: 0}
            set_yet = True
        elif lib.gem_share_take(share, uses[i]):
            assert set_yet
            went[i] = went.get(i, 0) + 1
        elif set_yet:  # (before the first look there is no share to launch on)
            went.setdefault(i, 0)
    check()
