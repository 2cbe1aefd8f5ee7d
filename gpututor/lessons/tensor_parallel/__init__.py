"""Lesson 04 (``notebooks/04_tensor_parallel.ipynb``): the collectives DTensor's plan runs, the
split schematic, the verdicts on its runs, and the lesson's exercise checkers.
"""
