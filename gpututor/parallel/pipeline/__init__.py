"""Pipeline parallel: consecutive layers on consecutive ranks. ``stages.py`` (the cut),
``schedules.py`` (naive, GPipe, 1F1B from scratch), ``torch_pipelining.py``
(``torch.distributed.pipelining``), ``timeline.py`` (each stage's measured timeline and bubble)."""
