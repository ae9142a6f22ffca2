"""The race watch (learning.grader.program_order.Watch) judged on accesses it is handed directly,
as the sanitizer hands them over in Triton's interpreter: which programs touched which
elements, in what order, and which atomic operations ordered them. No kernel runs, so every
case here is exact about the sequence it feeds."""

from types import SimpleNamespace

import numpy as np
import pytest

from learning.grader import program_order

ELEMENT, COUNTER = 1000, 2000  # addresses: a value programs share, a count they meet at


def _builder(program: int, programs: int):
    return SimpleNamespace(grid_dim=(programs, 1, 1), grid_idx=(program, 0, 0))


def _at(address: int):
    return SimpleNamespace(data=np.array([address])), SimpleNamespace(data=np.array([True]))


def _run(steps: list[tuple[int, str, int]], programs: int = 3) -> list[str]:
    """Feed ``steps`` (program, kind, address) to a fresh watch, first program to last, in
    one launch; the races it reports."""
    watch = program_order.Watch()
    watch.start(program_order.FIRST_LAST)
    watch.launch(None, (), ())
    for program, kind, address in steps:
        builder = _builder(program, programs)
        if kind == "atomic":
            watch.atomic(builder, *_at(address))
        else:
            watch.access(kind, builder, *_at(address))
    return watch.finish()


def test_a_store_must_come_after_every_reader_not_only_the_first():
    # program 0 reads, then counts in; program 1 reads and never counts in; program 2 counts in
    # (receiving program 0's read) and stores: program 1's read is ordered with nothing, and
    # on a GPU may see the store or not
    races = _run([(0, "load", ELEMENT), (0, "atomic", COUNTER),
                  (1, "load", ELEMENT),
                  (2, "atomic", COUNTER), (2, "store", ELEMENT)])
    assert len(races) == 1
    assert "program 2 stored into" in races[0] and "where program 1 of the same launch had read" \
        in races[0], races


def test_a_store_after_every_reader_counted_in_is_no_race():
    races = _run([(0, "load", ELEMENT), (0, "atomic", COUNTER),
                  (1, "load", ELEMENT), (1, "atomic", COUNTER),
                  (2, "atomic", COUNTER), (2, "store", ELEMENT)])
    assert races == []


def test_a_read_after_the_readers_own_count_is_not_covered_by_that_count():
    # program 0 counted in, then read again: what it published came before that read
    races = _run([(0, "load", ELEMENT), (0, "atomic", COUNTER), (0, "load", ELEMENT),
                  (1, "atomic", COUNTER), (1, "store", ELEMENT)], programs=2)
    assert len(races) == 1 and "where program 0 of the same launch had read" in races[0]


@pytest.mark.parametrize("reader", [0, 1])
def test_a_program_storing_where_only_it_read_is_no_race(reader):
    steps = [(reader, "load", ELEMENT), (reader, "store", ELEMENT)]
    assert _run(steps, programs=2) == []


def _block(addresses, active=None):
    data = np.array(addresses)
    mask = np.ones(data.shape, dtype=bool) if active is None else np.array(active)
    return SimpleNamespace(data=data), SimpleNamespace(data=mask)


def _one_program(steps) -> list[str]:
    """Feed ``steps`` (kind, addresses) of one program to a fresh watch; its races."""
    watch = program_order.Watch()
    watch.start(program_order.FIRST_LAST)
    watch.launch(None, (), ())
    builder = _builder(0, 1)
    for kind, addresses in steps:
        if kind == "barrier":
            watch.barrier(builder)
        else:
            watch.access(kind, builder, *_block(addresses))
    return watch.finish()


def test_a_lane_reading_what_another_lane_of_its_program_stored_is_a_race():
    # stored by lanes 0..3, read back reversed: lane 0 reads what lane 3 stored
    (race,) = _one_program([("store", [8, 12, 16, 20]), ("load", [20, 16, 12, 8])])
    assert race.startswith(program_order.LANE_RACE) and "lane 0 of 4" in race, race
    # one address read by the whole block (a scalar load after a block's store)
    assert _one_program([("store", [8, 12, 16, 20]), ("load", [8])])


def test_a_lane_reading_back_its_own_store_or_after_a_barrier_is_no_race():
    assert _one_program([("store", [8, 12, 16, 20]), ("load", [8, 12, 16, 20])]) == []
    assert _one_program([("store", [8, 12, 16, 20]), ("barrier", None),
                         ("load", [20, 16, 12, 8])]) == []


def test_a_program_races_only_with_its_own_lanes_not_an_earlier_programs():
    # program 1 reading what program 0 stored is the between-programs watch's to judge (a
    # race there too), not a lane race of program 1's
    watch = program_order.Watch()
    watch.start(program_order.FIRST_LAST)
    watch.launch(None, (), ())
    watch.access("store", _builder(0, 2), *_block([8, 12]))
    watch.access("load", _builder(1, 2), *_block([12, 8]))
    (race,) = watch.finish()
    assert not race.startswith(program_order.LANE_RACE), race
