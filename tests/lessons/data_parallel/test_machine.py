"""Lesson 02's words about the machine (``gpututor.lessons.data_parallel.machine``) follow the
run's device as a run records it: "cuda:0" on a GPU, "cpu" on the CPU, in English and Chinese."""
import pytest

from gpututor.i18n import set_language
from gpututor.lessons.data_parallel import machine


@pytest.mark.parametrize("language, gpu_word, cpu_word", [("en", "NCCL", "gloo"),
                                                          ("zh", "NCCL", "gloo")])
def test_how_ranks_talk_reads_the_device_type(language, gpu_word, cpu_word):
    set_language(language)
    try:
        for device in ("cuda", "cuda:0", "cuda:1"):
            sentence = machine.how_ranks_talk(device)
            assert gpu_word in sentence and "loopback" not in sentence and "TCP" not in sentence
        sentence = machine.how_ranks_talk("cpu")
        assert cpu_word in sentence and "NCCL" not in sentence
        if language == "zh":
            assert "Here" not in sentence and "Here" not in machine.how_ranks_talk("cuda:0")
    finally:
        set_language("en")


def test_rank_slots_count_gpus_for_a_recorded_cuda_device(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert machine.rank_slots("cuda:0")[0] == 3
    assert machine.strong_scaling_worlds("cuda:0", 64) == []       # 4 GPUs needed for 4 ranks
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert machine.strong_scaling_worlds("cuda:0", 64) == [4, 8]
