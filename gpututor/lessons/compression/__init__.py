"""Lesson 07 (``notebooks/07_compression.ipynb``): distillation runs, the verdicts and tables of its
results, the trade-off figures and the lesson's exercise checkers.
"""
