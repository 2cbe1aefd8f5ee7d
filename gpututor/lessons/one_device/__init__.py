"""Lesson 01b (``notebooks/01b_one_device.ipynb``): its exercise checkers (its runs and figures are
shared with 01c in ``lessons.common``).
"""
