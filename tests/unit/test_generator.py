"""The generator without a broker: reproducible, hot pages over the threshold, every invalid shape."""

import itertools
import json
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from shared.errors import LakehouseError
from lakehouse.services.generator import ClickGenerator, TrafficSpec

START = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)


def spec(**changes) -> TrafficSpec:
    base = dict(rate=2000, threshold=500, window=timedelta(seconds=5),
                late_by=(timedelta(seconds=15), timedelta(seconds=60)), pages=100, seed=11, start_time=START)
    return TrafficSpec(**(base | changes))


def take(generator: ClickGenerator, count: int) -> list:
    return list(itertools.islice(generator.records(), count))


def test_same_seed_same_records_and_another_seed_differs():
    first = take(ClickGenerator(spec(duplicate_fraction=0.1, malformed_fraction=0.1, late_fraction=0.1)), 3000)
    again = take(ClickGenerator(spec(duplicate_fraction=0.1, malformed_fraction=0.1, late_fraction=0.1)), 3000)
    other = take(ClickGenerator(spec(duplicate_fraction=0.1, malformed_fraction=0.1, late_fraction=0.1, seed=12)), 3000)

    assert first == again
    assert first != other


def test_hot_pages_exceed_the_threshold_in_every_full_window_and_others_do_not():
    records = take(ClickGenerator(spec(hot_pages=2, late_fraction=0.05, malformed_fraction=0.05)), 2000 * 20)
    per_window = Counter()
    for _, value, kind in records:
        if kind in ("click", "hot"):
            event = json.loads(value)
            moment = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
            per_window[(event["pageId"], int(moment.timestamp()) // 5)] += 1

    hot = {key: n for key, n in per_window.items() if key[0].startswith("/promo/")}
    assert {page for page, _ in hot} == {"/promo/flash-sale-1", "/promo/flash-sale-2"}
    assert len(hot) == 2 * 4  # 20 s of event time: 4 full windows per hot page
    assert min(hot.values()) > 500
    assert max(n for key, n in per_window.items() if key not in hot) <= 500


def crossing_phases_s(records: list, threshold: int, rate: float) -> dict[str, set[float]]:
    """Per hot page: when (seconds into a 5 s period of sending, at `rate`) its windows' (threshold+1)-th click was
    sent, past the first period (a staggered page's first window is partial)."""
    counts, phases = Counter(), {}
    for index, (_, value, kind) in enumerate(records):
        if kind == "hot":
            event = json.loads(value)
            window = int(datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp()) // 5
            counts[(event["pageId"], window)] += 1
            if counts[(event["pageId"], window)] == threshold + 1 and index / rate >= 5:
                phases.setdefault(event["pageId"], set()).add(round((index / rate) % 5, 1))
    return phases


def test_staggered_hot_pages_cross_the_threshold_at_instants_spread_over_the_window():
    together = crossing_phases_s(take(ClickGenerator(spec(hot_pages=4)), 2000 * 30), 500, 2000)
    staggered = crossing_phases_s(take(ClickGenerator(spec(hot_pages=4, hot_stagger=True)), 2000 * 30), 500, 2000)

    # every page crosses at one moment of the period, window after window
    assert all(len(phases) == 1 for phases in (*together.values(), *staggered.values()))
    assert len({phase for phases in together.values() for phase in phases}) == 1  # all four at once
    spread = sorted(phase for phases in staggered.values() for phase in phases)
    # four instants a quarter of the window apart (to the 0.1 s the phases are rounded to)
    assert [round((later - earlier) % 5, 1) in (1.2, 1.3) for earlier, later in zip(spread, spread[1:] + spread[:1])] \
        == [True] * 4, spread


def test_event_time_follows_the_nominal_rate_from_the_start():
    records = take(ClickGenerator(spec()), 4001)
    times = [json.loads(value)["eventTime"] for _, value, _ in records]

    assert times[0] == "2026-11-22T10:00:00.000Z"
    assert times[-1] == "2026-11-22T10:00:02.000Z"


def test_special_records_have_the_asked_shares_and_shapes():
    records = take(ClickGenerator(spec(late_fraction=0.1, duplicate_fraction=0.1, malformed_fraction=0.1)), 20_000)
    kinds = Counter(kind.split(":")[0] for _, _, kind in records)
    values = [value for _, value, _ in records]

    for kind in ("late", "duplicate", "malformed"):
        assert 1700 < kinds[kind] < 2300, kinds
    duplicates = [value for _, value, kind in records if kind == "duplicate"]
    assert all(values.count(value) >= 2 for value in duplicates[:50])
    reasons = {kind.split(":")[1] for _, _, kind in records if kind.startswith("malformed:")}
    assert reasons == {"not_json", "not_object", "missing_event_id", "empty_page_id", "page_id_too_long",
                       "bad_event_time", "not_utf8", "null_value", "wrong_type", "event_time_out_of_range"}


def test_late_events_are_late_by_the_asked_range():
    records = take(ClickGenerator(spec(late_fraction=0.2)), 5000)
    expected_ms = {index: START.timestamp() * 1000 + index * 1000 / 2000 for index in range(5000)}
    lateness = []
    for index, (_, value, kind) in enumerate(records):
        if kind == "late":
            moment = datetime.fromisoformat(json.loads(value)["eventTime"].replace("Z", "+00:00"))
            lateness.append(expected_ms[index] - moment.timestamp() * 1000)

    assert lateness and 15_000 <= min(lateness) and max(lateness) <= 60_000


def test_impossible_traffic_is_refused_with_the_rate_it_needs():
    with pytest.raises(LakehouseError, match="needs --rate"):
        ClickGenerator(spec(hot_pages=11))  # 11 x 1.5 x 501 / 5 s > 80% of 2000/s
    with pytest.raises(LakehouseError, match="add up to"):
        ClickGenerator(spec(late_fraction=0.3, malformed_fraction=0.3))


def test_the_hot_pages_a_rate_carries_are_the_most_that_generate_accepts():
    # one hot page takes 1.5 x 501 clicks per 5 s = 150.3/s, and hot pages at most 80% of 2000/s = 1600/s
    assert spec().hot_pages_carried == 10
    ClickGenerator(spec(hot_pages=10))
    assert spec(rate=150).hot_pages_carried == 0


def test_late_events_from_config_are_beyond_the_fast_watermark_and_within_golds():
    from shared.config_loading import load_config

    config = load_config(overrides=["hot_pages.watermark=5s", "hot_pages.window=5s", "analytical.watermark=10 minutes"])

    earliest, latest = TrafficSpec.for_config(config, rate=1000).late_by

    assert earliest == timedelta(seconds=15) and latest == timedelta(minutes=5)


def visits_of(records: list) -> dict[str, list[dict]]:
    """userId -> its clicks (the JSON documents) in the order sent."""
    by_user: dict[str, list[dict]] = {}
    for _, value, _ in records:
        body = json.loads(value)
        by_user.setdefault(body.get("userId"), []).append(body)
    return by_user


def test_a_page_view_keeps_the_serializers_shape_and_carries_no_event_type():
    [(_, value, kind)] = take(ClickGenerator(spec(hot_pages=0)), 1)

    assert kind == "click" and set(json.loads(value)) == {"eventId", "pageId", "eventTime", "userId"}


def test_visitors_click_a_think_time_apart_and_buy_only_after_carting():
    records = take(ClickGenerator(spec(hot_pages=0, think_time=timedelta(seconds=2), visit_clicks=4,
                                       cart_probability=0.2, purchase_probability=0.5)), 20_000)
    by_user = visits_of(records)
    kinds = Counter(body.get("eventType", "page_view") for clicks in by_user.values() for body in clicks)

    assert 1.5 < len(records) / len(by_user) < 6, "a few clicks per visitor, not one each, not all"
    assert kinds["add_to_cart"] > 2000 and kinds["purchase"] > 500
    for clicks in by_user.values():
        types = [body.get("eventType", "page_view") for body in clicks]
        assert "purchase" not in types or "add_to_cart" in types[:types.index("purchase")], types
        assert "purchase" not in types[:-1], "a purchase ends its visit"
    gaps = [(datetime.fromisoformat(b["eventTime"]) - datetime.fromisoformat(a["eventTime"])).total_seconds()
            for clicks in by_user.values() for a, b in zip(clicks, clicks[1:])]
    assert 1.5 < sum(gaps) / len(gaps) < 2.5, "think times of 2 s on average"


def test_visits_that_clicked_a_hot_page_buy_more_by_the_uplift():
    def conversion(uplift: float) -> tuple[float, float]:
        records = take(ClickGenerator(spec(rate=4000, hot_pages=1, think_time=timedelta(seconds=1), visit_clicks=6,
                                           cart_probability=0.3, purchase_probability=0.1, hot_uplift=uplift)), 40_000)
        bought = {True: [0, 0], False: [0, 0]}
        for clicks in visits_of(records).values():
            hot = any(body["pageId"].startswith("/promo/") for body in clicks)
            bought[hot][0] += 1
            bought[hot][1] += any(body.get("eventType") == "purchase" for body in clicks)
        return bought[True][1] / bought[True][0], bought[False][1] / bought[False][0]

    hot_plain, cold_plain = conversion(0.0)
    hot_raised, cold_raised = conversion(1.0)

    assert hot_raised > 1.3 * hot_plain and abs(cold_raised - cold_plain) < 0.02


def test_anonymous_clicks_carry_no_user_and_impossible_visits_are_refused():
    records = take(ClickGenerator(spec(hot_pages=0, anonymous_fraction=0.25)), 8000)

    assert 0.22 < len(visits_of(records)[None]) / len(records) < 0.28
    with pytest.raises(LakehouseError, match="--hot-uplift"):
        ClickGenerator(spec(purchase_probability=0.6, hot_uplift=1.0))
    with pytest.raises(LakehouseError, match="--cart-probability"):
        ClickGenerator(spec(cart_probability=1.5))
