"""Measuring a step: time, communication, memory, FLOPs. Strategies use this layer; it never
imports them.

- ``timing``: phase timers, the communication meter, a timer for library collectives;
- ``collectives``: bus factors of collectives, and a task that benchmarks them;
- ``memory``: bytes by category (parameters, gradients, optimizer state, activations);
- ``capacity``: a rank's memory capacity enforced (``DeviceOutOfMemory``, as a GPU fails);
- ``flops``: the training-FLOPs formula and device peaks (for MFU);
- ``matmul``: this machine's measured matmul rate;
- ``attention_cost``: attention's time and bytes against the sequence length;
- ``roofline``: measured peak and memory bandwidth, operators' arithmetic intensity;
- ``profile``: ``torch.profiler`` on a few steps, read as top operators and a timeline.
"""
