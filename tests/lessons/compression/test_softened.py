"""Lesson 07, section 4: the distillation temperature is the package's default, and T > 1
flattens the teacher's distributions (T = 1 leaves them as they are)."""

import torch

from gpututor.compression.distill import DistillTask, distillation_loss
from gpututor.lessons.compression.runs import TEMPERATURE, softened


class Fixed(torch.nn.Module):
    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, x):
        return self.logits.expand(*x.shape, -1)


def test_the_lesson_distils_at_the_packages_default_temperature():
    assert TEMPERATURE == DistillTask.temperature == 2.0
    import inspect
    assert inspect.signature(distillation_loss).parameters["temperature"].default == TEMPERATURE


def test_a_higher_temperature_flattens_the_distribution():
    model = Fixed(torch.tensor([4.0, 2.0, 1.0, 0.0, -1.0, -2.0]))
    data = [(torch.zeros(2, 3, dtype=torch.long), None)]
    at = {t: softened(model, data, t) for t in (1.0, 2.0, 4.0)}
    p = torch.softmax(model.logits, -1)
    assert abs(at[1.0]["top1"] - p.max().item()) < 1e-6
    assert at[1.0]["top1"] > at[2.0]["top1"] > at[4.0]["top1"]
    assert at[1.0]["entropy_bits"] < at[2.0]["entropy_bits"] < at[4.0]["entropy_bits"]
