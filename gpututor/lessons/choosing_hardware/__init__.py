"""Lesson 08 (``notebooks/08_choosing_hardware.ipynb``): this machine measured, the planner's
calibration against runs, the planner widget and figures, and the lesson's exercise checkers.
"""
