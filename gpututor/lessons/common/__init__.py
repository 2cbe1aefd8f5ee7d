"""What several lessons share: the answer checker, the code-exercise guards and the shell a
checker runs the learner's function in (``code_exercise``), sweeps and the step's anatomy, the
results kept from lesson to lesson, and lessons 01b/01c's one-device runs (``one_device``) and
their figures (``one_device_figures``).
"""
