"""core.times: the one timestamp format, read and written (RFC 3339 in UTC, whole seconds without
sub-second digits)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from sparkop.core.times import format_micro_time, format_time, parse_time

stamps = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))]),
)


@given(stamps)
def test_format_time_writes_utc_with_sub_second_digits_only_when_there_are_any(stamp: datetime) -> None:
    utc = stamp.astimezone(UTC)
    expected = utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ")
    assert format_time(stamp) == expected


@given(stamps)
def test_format_micro_time_always_writes_six_sub_second_digits(stamp: datetime) -> None:
    assert format_micro_time(stamp) == stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@given(stamps)
def test_a_written_stamp_reads_back_as_the_same_instant(stamp: datetime) -> None:
    assert parse_time(format_time(stamp)) == stamp
    assert parse_time(format_micro_time(stamp)) == stamp


def test_parse_time_reads_the_api_servers_forms_and_refuses_the_rest() -> None:
    assert parse_time("2026-12-05T07:00:01Z") == datetime(2026, 12, 5, 7, 0, 1, tzinfo=UTC)
    assert parse_time("2026-12-05T07:00:01.250000Z") == datetime(2026, 12, 5, 7, 0, 1, 250000, tzinfo=UTC)
    assert parse_time("2026-12-05T09:00:01+02:00") == datetime(2026, 12, 5, 7, 0, 1, tzinfo=UTC)
    assert parse_time("2026-12-05T07:00:01") == datetime(2026, 12, 5, 7, 0, 1, tzinfo=UTC)
    assert parse_time(datetime(2026, 12, 5, 7)) == datetime(2026, 12, 5, 7, tzinfo=UTC)
    for unreadable in ("", "yesterday", "2026-13-05T07:00:01Z", None, 17):
        assert parse_time(unreadable) is None
    assert format_time(None) is None
