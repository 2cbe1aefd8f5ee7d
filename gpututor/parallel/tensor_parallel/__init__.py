"""Tensor parallel: one layer's weights split over ranks. ``tp_communications.py`` (the group and
Megatron's f/g), ``megatron.py`` (column/row parallel linear layers from scratch, the strategy
``tp``), ``sequence.py`` (sequence parallel on top), ``dtensor.py`` (DTensor's plan)."""
