"""swzc.core.workers: items spread over this process and worker processes, the results in the items' order."""

import math

import pytest

from swzc.core import workers


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_in_the_items_order_whichever_runs_first(jobs):
    items = [4.0, 1.0, 9.0, 16.0, 0.0, 25.0, 2.25]
    got = list(workers.in_order(math.sqrt, items, jobs, cost=lambda x: x))  # the largest handed out first
    assert got == [math.sqrt(x) for x in items]


def test_a_failure_is_raised_at_its_turn_after_the_results_before_it():
    items = [1.0, 4.0, -1.0, 9.0, 16.0]
    got = []
    with pytest.raises(ValueError, match="math domain error"):
        for value in workers.in_order(math.sqrt, items, 2, cost=abs):
            got.append(value)
    assert got == [1.0, 2.0]


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_item_is_told_done_once_before_its_result_is_given(jobs):
    items = [float(x) for x in range(12)]
    told: list[int] = []
    for index, value in enumerate(workers.in_order(math.sqrt, items, jobs, cost=lambda x: x, done=told.append)):
        assert index in told and value == math.sqrt(items[index])
    assert sorted(told) == list(range(len(items)))
