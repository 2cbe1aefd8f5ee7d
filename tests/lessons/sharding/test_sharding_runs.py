"""Lesson 03's words about how its ranks talk (``gpututor.lessons.sharding.runs.how_ranks_talk``)
follow the run's device as a run records it: "cuda:0" on a GPU, "cpu" on the CPU, in English and
Chinese (the examiner's finding: ``device == "cuda"`` printed the gloo sentence on a GPU)."""
import pytest

from gpututor.i18n import set_language
from gpututor.lessons.sharding.runs import how_ranks_talk


@pytest.mark.parametrize("language", ["en", "zh"])
def test_how_ranks_talk_reads_the_device_type(language):
    set_language(language)
    try:
        for device in ("cuda", "cuda:0", "cuda:1"):
            sentence = how_ranks_talk(device)
            assert "NCCL" in sentence and "gloo" not in sentence and "TCP" not in sentence
        sentence = how_ranks_talk("cpu")
        assert "gloo" in sentence and "NCCL" not in sentence
        if language == "zh":
            assert "Here" not in sentence and "Here" not in how_ranks_talk("cuda:0")
    finally:
        set_language("en")
