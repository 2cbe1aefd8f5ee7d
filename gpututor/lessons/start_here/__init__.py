"""Lesson 00 (``notebooks/00_start_here.ipynb``): the contention ceiling, the table of common claims
and the lesson's exercise checkers.
"""
