"""Expert parallel: each rank holds some of a MoE layer's experts and a slice of the batch; tokens
travel to their experts' ranks and back. ``all_to_all.py`` (the differentiable all-to-all,
dispatch and combine), ``scratch.py`` (the ``ep`` and ``ddp+ep`` strategies)."""
