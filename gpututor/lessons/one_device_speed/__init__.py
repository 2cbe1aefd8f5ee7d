"""Lesson 01c (``notebooks/01c_one_device_speed.ipynb``): ``torch.compile``'s costs, the verdicts,
the compile, profiler and roofline figures, and the lesson's exercise checkers.
"""
