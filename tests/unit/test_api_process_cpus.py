"""``[api] process_cpus``: the API process pins itself, and a CPU the host lacks is logged, not
fatal (the API still starts, on any CPU)."""

from __future__ import annotations

import logging
import os

import pytest
from pydantic import ValidationError

from api.config import ApiConfig
from runner.api_process import pin_to_cpus


def test_no_cpus_leaves_the_process_anywhere() -> None:
    before = os.sched_getaffinity(0)
    assert pin_to_cpus(()) == "any"
    assert os.sched_getaffinity(0) == before


def test_pins_to_the_cpus_given() -> None:
    before = os.sched_getaffinity(0)
    one = min(before)
    try:
        assert pin_to_cpus((one,)) == str(one)
        assert os.sched_getaffinity(0) == {one}
    finally:
        os.sched_setaffinity(0, before)


def test_a_cpu_the_host_lacks_is_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    before = os.sched_getaffinity(0)
    with caplog.at_level(logging.ERROR, logger="runner.api_process"):
        assert pin_to_cpus((4095,)) == "any"
    assert os.sched_getaffinity(0) == before
    assert "process_cpus (4095,) cannot be used here" in caplog.text


def test_config_takes_a_list_of_cpus_and_refuses_negative_ones() -> None:
    assert ApiConfig.model_validate({"process_cpus": [1, 0]}).process_cpus == (1, 0)
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        ApiConfig.model_validate({"process_cpus": [-1]})
