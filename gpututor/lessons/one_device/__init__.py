"""Lesson 01b (``notebooks/01b_one_device.ipynb``): its measurements, verdicts, attention figures
and exercise checkers (its runs and other figures are shared with 01c in ``lessons.common``).
"""
