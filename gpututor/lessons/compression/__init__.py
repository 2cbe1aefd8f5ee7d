"""Lesson 07 (``notebooks/07_compression.ipynb``): distillation runs, the trade-off figures and the
lesson's exercise checkers.
"""
