"""Lesson 06 (``notebooks/06_mixed_precision.ipynb``): the verdicts and tables of its results, the
figure of speed by format, and its exercise checkers.
"""
