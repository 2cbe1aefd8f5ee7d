"""Lesson 09 (``notebooks/09_composing_parallelisms.ipynb``): the rank-grid figures and the
lesson's exercise checkers.
"""
