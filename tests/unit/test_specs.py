"""core.specs: the one lenient status reader every controller uses, and what a spec error says."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sparkop.api.connect import SparkConnectStatus
from sparkop.api.models import DriverPhase, SparkApplicationSpec, SparkDriverStatus
from sparkop.api.scheduled import ScheduledSparkApplicationStatus
from sparkop.core.specs import lenient, unknown_fields


def test_a_field_the_schema_rejects_reads_as_absent_and_the_rest_is_kept() -> None:
    status = lenient(SparkDriverStatus, {"phase": "Exploded", "incarnation": 2, "webUIAddress": "x:4040"})
    assert status.phase is None and status.incarnation == 2 and status.webUIAddress == "x:4040"
    assert lenient(SparkDriverStatus, {"phase": "Running", "fromANewerVersion": 1}).phase is DriverPhase.RUNNING


@pytest.mark.parametrize("model", [SparkDriverStatus, ScheduledSparkApplicationStatus, SparkConnectStatus])
@pytest.mark.parametrize("data", [None, "a string", 7, [], {}])
def test_what_is_no_object_reads_as_an_empty_status(model: type, data: object) -> None:
    assert lenient(model, data) == model()


def test_unknown_fields_are_named_only_when_they_are_all_that_is_wrong() -> None:
    with pytest.raises(ValidationError) as only_unknown:
        SparkApplicationSpec.model_validate({"type": "Scala", "mode": "cluster", "image": "i", "sparkVersion": "3.5.7",
                                             "mainApplicationFile": "local:///a.jar", "futureField": 1})  # fmt: skip
    assert unknown_fields(only_unknown.value, "spec") == ("spec.futureField",)
    with pytest.raises(ValidationError) as also_wrong:
        SparkApplicationSpec.model_validate({"type": "Nope", "futureField": 1})
    assert unknown_fields(also_wrong.value, "spec") == ()
