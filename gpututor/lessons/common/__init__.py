"""What several lessons share: the answer checker and the code-exercise guards, sweeps and the
step's anatomy, the results kept from lesson to lesson, and lessons 01b/01c's one-device runs
(``one_device``) and their figures (``one_device_figures``).
"""
