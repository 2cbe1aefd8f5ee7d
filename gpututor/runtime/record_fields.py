"""What a step's record says besides its loss: times and communication, memory, FLOPs and MFU.

The worker (runtime/worker.py) runs the steps and turns what each one measured into record
fields here. Two figures are measured on one step only, because measuring slows that step
down: its FLOPs (``FlopCounterMode``) and its memory by category (a ``LiveBytesProbe``). Each is
reported on every record from its step on, which is why the two classes below keep them.
"""
from __future__ import annotations

import torch

from ..formulas import flops_utilization
from ..measure.flops import uncounted_attention_flops
from ..measure.memory import state_bytes

NOT_COUNTED = {"params": None, "grads": None, "optimizer": None}


def step_record(ctx, step_time: float, tokens: int, mem: dict) -> dict:
    """The step's times, communication and model-state bytes, as record fields. What the
    communication meter could not measure (``CommMeter.unmetered``, ``exposed_unknown``) is
    None, and compute time with it: not measured, not 0."""
    measured = lambda value: None if ctx.comm.unmetered else value
    waited = lambda value: None if ctx.comm.exposed_unknown else measured(value)
    return {
        "step_time_s": step_time,
        "tokens_per_s": tokens / step_time,
        "compute_s": waited(step_time - ctx.comm.exposed_s),
        "comm_s": waited(ctx.comm.exposed_s),
        "comm_busy_s": measured(ctx.comm.busy_s),
        "comm_bytes": measured(ctx.comm.bytes),
        "comm_wire_bytes": measured(ctx.comm.wire_bytes),
        "emulated_comm_s": ctx.comm.emulated_s,
        **{f"{name}_s": seconds for name, seconds in ctx.phases.items()},
        **ctx.extra,
        **({"timeline": ctx.timeline.spans()} if ctx.timeline is not None else {}),
        "mem_params": mem["params"], "mem_grads": mem["grads"], "mem_optimizer": mem["optimizer"],
    }


class FlopFields:
    """A rank's FLOPs fields: ``flops`` counted on one step and reported from then on, and on
    every step the model's FLOPs and MFU (``formulas.flops_utilization`` of them)."""

    def __init__(self, flops_per_token: float, model_cfg, spec, device: torch.device,
                 dp_size: int, world_size: int, peak_flops: float | None):
        self.flops_per_token, self.model_cfg, self.seq_len = flops_per_token, model_cfg, spec.seq_len
        self.device, self.dp_size, self.world_size = device, dp_size, world_size
        self.peak_flops = peak_flops   # None where the device's peak is not known: no MFU
        self.counted = None

    def fields(self, counted: int | None, step_time: float, tokens: int) -> dict:
        """This step's FLOPs fields; ``counted``: what ``FlopCounterMode`` counted on it, if it
        counted (the attention FLOPs it cannot see on CPU are added)."""
        if counted is not None:
            self.counted = counted + uncounted_attention_flops(self.model_cfg, tokens,
                                                               self.seq_len, self.device)
        # MFU counts the model's FLOPs (6·N·tokens + attention), not recomputation (PaLM, App. B);
        # model-parallel ranks (tp, pp) share one batch's work: each does dp/world of it
        model_flops = self.flops_per_token * tokens * self.dp_size / self.world_size
        flops = self.counted
        return {"flops": flops, "achieved_flops": flops / step_time if flops else None,
                "model_flops": model_flops,
                "mfu": flops_utilization(model_flops, step_time, self.peak_flops)
                if self.peak_flops else None}


class MemoryFields:
    """A rank's memory fields: model-state bytes on the first steps and the last, the probed
    step's activation and peak bytes from then on, the setup's peak, the CUDA allocator's peak."""

    def __init__(self, setup_peak: int, device: torch.device, probe_step: int, last_step: int):
        self.setup_peak, self.device = setup_peak, device
        self.probe_step, self.last_step = probe_step, last_step
        self.activations = self.peak = None

    def state(self, step: int, model, optimizer) -> dict:
        """Parameter, gradient and optimizer-state bytes, for :func:`step_record`. They are fixed
        once the optimizer state exists: counted (about 1 ms for every tensor) on the first
        steps and the last, None ("not counted") between."""
        if step <= self.probe_step or step == self.last_step:
            return state_bytes(model, optimizer)
        return NOT_COUNTED

    def fields(self, probed: tuple | None) -> dict:
        """This step's memory fields; ``probed``: ``(activation bytes, peak bytes)`` if the
        probe measured this step."""
        if probed is not None:
            self.activations, self.peak = probed
        # One meaning on every device: the probe's peak of live tensor bytes during its step.
        # The CUDA allocator's own high-water mark (rounded blocks, workspaces) is another figure.
        allocator_peak = torch.cuda.max_memory_allocated(self.device) \
            if self.device.type == "cuda" else None
        return {"mem_activations": self.activations, "mem_peak": self.peak,
                "mem_setup_peak": self.setup_peak, "mem_allocator_peak": allocator_peak}
