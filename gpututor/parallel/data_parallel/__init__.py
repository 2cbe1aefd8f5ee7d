"""Data parallel: every rank holds the whole model and a slice of the batch; gradients are
averaged. ``scratch.py`` (naive all-reduce, then bucketed and overlapped), ``ddp.py``
(``DistributedDataParallel``), ``ring.py`` (the ring all-reduce from send/recv)."""
