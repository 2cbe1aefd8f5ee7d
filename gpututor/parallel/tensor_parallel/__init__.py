"""Tensor parallel: one layer's weights split over ranks. ``megatron.py`` (Megatron's f/g and
column/row parallel linear layers from scratch), ``dtensor.py`` (DTensor's plan)."""
