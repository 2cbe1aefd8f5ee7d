"""Pipeline parallel: consecutive layers on consecutive ranks. ``stages.py`` (the cut, and the
model chunks of interleaved schedules), ``schedules.py`` (naive, GPipe, 1F1B from scratch),
``interleaved.py`` (interleaved 1F1B from scratch), ``torch_pipelining.py``
(``torch.distributed.pipelining``, interleaved and zero-bubble schedules too), ``timeline.py``
(each stage's measured timeline and bubble)."""
