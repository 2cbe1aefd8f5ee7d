"""The planner: what fits in memory, how long training takes, what it costs, and why.

- ``catalog``: GPUs and links with their datasheet numbers and sources; add your own.
- ``memory``: per-device bytes (ZeRO paper's model states, Korthikanti et al.'s activations);
- ``as_built``: the tiny GPT as built here, held as each strategy holds it.
- ``time``: FLOPs over peak x MFU, ring collectives, pipeline bubble, total time and cost.
- ``recommend``: one configuration's estimate with reasons, or a ranking of many.
- ``command``: ``python -m gpututor plan``, the command line.
- ``interruptions``: interruption rates, a job's mean time between interruptions, and the
  checkpoint interval that loses the least work (Young 1974, Daly 2006) [ref: young1974-interval]
  [ref: daly2006-interval].

Every function here is a formula or a table: nothing launches a run. The planner checked
against measured runs is ``gpututor.lessons.choosing_hardware.calibrate``; its notebook widget is
``gpututor.lessons.choosing_hardware.figures``. Import what you need from the modules (this file imports none of
them, so that ``measure`` can read the device table in ``catalog`` without a circle).
"""
