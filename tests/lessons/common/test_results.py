"""Findings kept from lesson to lesson answer lesson 00's common claims; an unmeasured claim
says so."""
from __future__ import annotations

import pytest

from gpututor.i18n import set_language
from gpututor.lessons.common import results
from gpututor.lessons.start_here.figures import claims_html


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_RESULTS", str(tmp_path / "results.json"))
    return tmp_path / "results.json"


def test_a_claim_is_not_measured_until_its_lesson_remembers_a_finding(store):
    rows = {r["lesson"]: r for r in results.claims()}
    assert rows["06"]["values"] is None and "not measured yet: run lesson 06" in claims_html(results.claims())
    results.remember("06.bf16", time_ratio=1.31, memory_ratio=0.87)
    assert store.exists()
    row = next(r for r in results.claims() if r["lesson"] == "06")
    assert row["values"] == {"time_ratio": 1.31, "memory_ratio": 0.87}
    page = claims_html(results.claims())
    assert "bf16 autocast took 1.31x the time of fp32 per step and 0.87x its peak memory" in page
    results.remember("06.bf16", time_ratio=0.5, memory_ratio=0.5)      # the newest run wins
    assert results.recall("06.bf16")["values"]["time_ratio"] == 0.5


def test_bad_findings_are_refused():
    with pytest.raises(ValueError, match="key='06.fp8' is invalid"):
        results.remember("06.fp8", time_ratio=1.0)
    with pytest.raises(ValueError, match="missing: \\['memory_ratio'\\]"):
        results.remember("06.bf16", time_ratio=1.0)


def test_every_claim_answers_from_a_known_finding_and_speaks_chinese():
    for claim in results.CLAIMS:
        assert claim.key in results.FINDINGS
        claim.showed.format(**{k: 1.0 for k in results.FINDINGS[claim.key]})   # its placeholders exist
    results.remember("00.speedup", speedup=1.5, world_size=2, gpus=0)
    set_language("zh")
    try:
        page = claims_html(results.claims())
    finally:
        set_language("en")
    assert "尚未测量" in page and "1.50" in page and "N 张卡" in page
