"""Lesson 06 (``notebooks/06_mixed_precision.ipynb``): its exercise checkers.
"""
