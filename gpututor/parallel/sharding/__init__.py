"""Sharding: ranks keep 1/N of the model state. ``zero.py`` (ZeRO-1/2/3 from scratch),
``fsdp.py`` (FSDP2's ``fully_shard``, ZeRO-3 in production)."""
