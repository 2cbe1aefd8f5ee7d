"""Prices and costs in the learner's currency: the US-dollar examples convert only at a rate the
learner gives (with its source); prices given in the currency are used as they are."""
from __future__ import annotations

import pytest

from gpututor import catalog
from gpututor.plan.memory import transformer_for_params
from gpututor.plan.recommend import recommend


@pytest.fixture(autouse=True)
def restore(monkeypatch):
    monkeypatch.setattr(catalog, "GPUS", dict(catalog.GPUS))
    yield
    catalog.set_currency("USD")


def test_us_dollars_by_default():
    assert catalog.currency() == "USD" and catalog.money(1234.4) == "$1,234"
    assert catalog.price_of(catalog.get_gpu("A100-80GB"))[0] == catalog.EXAMPLE_PRICES["A100-80GB"]


def test_another_currency_needs_a_rate_or_its_own_prices():
    catalog.set_currency("CNY")
    price, why = catalog.price_of(catalog.get_gpu("A100-80GB"))
    assert price is None and "per_usd" in why and "CNY" in why
    catalog.set_price("A100-80GB", 9.5, "my provider's quote")
    assert catalog.price_of(catalog.get_gpu("A100-80GB")) == (9.5, "my provider's quote")
    assert catalog.money(8900) == "¥8,900"


def test_a_given_rate_converts_the_examples_and_says_where_it_comes_from():
    catalog.set_currency("CNY", per_usd=7.0, source="a test's rate")
    price, why = catalog.price_of(catalog.get_gpu("H100-80GB"))
    assert price == pytest.approx(catalog.EXAMPLE_PRICES["H100-80GB"] * 7.0)
    assert "7 CNY per USD (a test's rate)" in why
    rec = recommend(transformer_for_params(125e6), 2.5e9, gpus=("H100-80GB",), counts=(1, 8))
    best = rec.ranked[0]
    assert best.cost == pytest.approx(best.total_s / 3600 * best.config.count * price)
    header = rec.table().splitlines()[0]   # the cost column is in the currency set, not "$"
    assert "cost ¥" in header and "$" not in header
    assert any(r.startswith("cost: ¥") for r in best.reasons)
    assert best.to_dict()["cost"]["currency"] == "CNY"


def test_bad_currencies_and_rates_are_refused():
    with pytest.raises(ValueError, match="currency='XYZ' is invalid: allowed values are 'USD', 'CNY'"):
        catalog.set_currency("XYZ")
    with pytest.raises(ValueError, match="per_usd=-1 is invalid"):
        catalog.set_currency("CNY", per_usd=-1)


def test_the_planner_widget_names_the_currency():
    from gpututor.lessons.choosing_hardware.figures import PlannerWidget
    catalog.set_currency("CNY", per_usd=7.0, source="a test's rate")
    widget = PlannerWidget(params=125e6, tokens=2.5e9, count=8)
    assert "CNY" in widget.price.description and "CNY" in widget.budget.description
    assert "cost (CNY)" in widget.output.value and "¥" in widget.output.value
