"""Lesson 03 (``notebooks/03_sharding.ipynb``): the sharding board and figures, and the lesson's
exercise checkers.
"""
