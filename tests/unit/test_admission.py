from slotline.config.file import Admission
from slotline.node.admission import Guard, Sample


def guard(samples: list[Sample], **thresholds: object) -> Guard:
    readings = iter(samples)
    return Guard(Admission.model_validate(thresholds), sampler=lambda: next(readings))


CALM = Sample(cpu_percent=10, available_mb=8000)
HOT = Sample(cpu_percent=97, available_mb=8000)
LOW_MEMORY = Sample(cpu_percent=10, available_mb=300)


def test_without_thresholds_nothing_is_held() -> None:
    assert Guard(Admission()).check(3, 3, now=0).hold is False


def test_past_a_threshold_new_starts_are_held_with_the_reason() -> None:
    g = guard([HOT, LOW_MEMORY, CALM], max_cpu_percent=90, min_available_mb=1024)
    hot = g.check(3, 1, now=0)
    assert hot.hold
    assert hot.reason == "CPU at 97% (limit 90%)"
    low = g.check(3, 1, now=1)
    assert low.hold
    assert low.reason == "300 MB of memory available (minimum 1024 MB)"
    calm = g.check(3, 1, now=2)
    assert (calm.hold, calm.reason) == (False, None)


def test_adaptive_mode_shrinks_the_limit_then_recovers_step_by_step() -> None:
    g = guard([HOT, HOT, CALM, CALM, CALM, CALM, CALM], max_cpu_percent=90, adaptive=True)
    assert g.check(4, 4, now=0).limit == 3
    assert g.check(4, 3, now=1).limit == 2
    assert g.check(4, 2, now=2).limit == 2  # calm starts counting
    assert g.check(4, 2, now=40).limit == 3  # one step per 30 s of calm
    assert g.check(4, 2, now=50).limit == 3
    assert g.check(4, 2, now=75).limit is None  # back to the configured limit
    assert g.check(4, 2, now=80).hold is False
