"""Lessons 03 and 04's line on where the runs go: GPUs only with one per rank for the largest
run, else CPU with the reason, in English and Chinese."""
import pytest

from gpututor import RunSpec
from gpututor.i18n import set_language
from gpututor.lessons.common.devices import device_line

CASES = [(0, "cpu", "no GPU visible", "看不到 GPU"),
         (1, "cpu", "GPUs here: 1, fewer than the 4", "这里有 1 张 GPU，少于"),
         (2, "cpu", "GPUs here: 2, fewer than the 4", "这里有 2 张 GPU，少于"),
         (4, "cuda", "one GPU per rank (4 GPUs here", "每个进程一张 GPU（这里有 4 张"),
         (8, "cuda", "one GPU per rank (8 GPUs here", "每个进程一张 GPU（这里有 8 张")]


@pytest.mark.parametrize("gpus, device, en, zh", CASES)
def test_device_line_names_the_device_and_why(monkeypatch, gpus, device, en, zh):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    spec = RunSpec(model="gpt").pin_device(4)
    assert torch.device(spec.device).type == device
    assert en in device_line(spec, 4)
    try:
        set_language("zh")
        assert zh in device_line(spec, 4)
    finally:
        set_language("en")
