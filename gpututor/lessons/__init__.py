"""The lessons' own code, one folder per notebook, above the runtime.

==========================================  =====================================
notebook                                    folder (``gpututor/lessons/...``)
==========================================  =====================================
``00_start_here``                           ``start_here/``
``01_single_device``                        ``single_device/``
``01b_one_device``                          ``one_device/``
``01c_one_device_speed``                    ``one_device_speed/``
``02_data_parallel``                        ``data_parallel/``
``03_sharding``                             ``sharding/``
``03b_your_own_model``                       ``your_own_model/``
``04_tensor_parallel``                      ``tensor_parallel/``
``05_pipeline_parallel``                    ``pipeline_parallel/``
``06_mixed_precision``                      ``mixed_precision/``
``06b_fp8``                                 ``fp8/``
``07_compression``                          ``compression/``
``08_choosing_hardware``                    ``choosing_hardware/``
``09_composing_parallelisms``               ``composing_parallelisms/``
``10_long_context``                         ``long_context/``
``11_mixture_of_experts``                   ``mixture_of_experts/``
``12_failures_at_scale``                    ``failures_at_scale/``
``13_cutting_communication``                ``cutting_communication/``
(several)                                   ``common/``
==========================================  =====================================

A folder holds what only its lesson uses: its runs and the tasks they start in ranks, its
exercise checkers (``exercises.py``: every ``check_*``), its figures and widgets (modules whose
name has ``figures`` in it). ``common/`` holds what several lessons share (the answer checker,
the code exercises' guards, sweeps); ``gpututor.ui`` what every lesson shares (the run panel,
the live figure, comparisons).

Two rules, tested in ``tests/test_architecture.py``: lesson folders never import each other
(only ``common/``); and a module a rank may unpickle (runs, tasks, checkers: every module
without ``figures`` in its name) imports no plotting or widget code, nor ``gpututor.ui``.
"""
