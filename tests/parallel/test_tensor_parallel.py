"""Tensor parallel: each parallel layer equals its dense layer (forward and backward), training
with tp and tp-dtensor equals one process, and bad degrees are refused before launch."""
import copy
import sys

import cloudpickle
import pytest
import torch
import torch.nn as nn

from gpututor import launch
from gpututor.model_sizes import GPTConfig
from gpututor.models import MLP, CausalSelfAttention
from gpututor.parallel.tensor_parallel import megatron as tpm
from conftest import assert_equals_one_process, tiny_spec

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the ranks run this file's task

close = torch.testing.assert_close


def _column_equals_dense(tp) -> None:
    dense = nn.Linear(4, 6 * tp.size)
    col = tpm.ColumnParallelLinear.from_dense(dense, tp)
    rows = tpm.owned_indices(dense.out_features, tp)       # this rank's output features
    x, upstream = torch.randn(3, 5, 4), torch.randn(3, 5, 6 * tp.size)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = dense(x1), col(x2)
    y1.backward(upstream)
    y2.backward(upstream[..., rows])
    close(y2, y1[..., rows], msg="column: output")
    close(x2.grad, x1.grad, msg="column: input gradient (f all-reduces it)")
    close(col.weight.grad, dense.weight.grad[rows], msg="column: weight gradient")
    close(col.bias.grad, dense.bias.grad[rows], msg="column: bias gradient")
    close(col.full_state()["weight"], dense.weight.detach(), msg="column: gathered weight")


def _row_equals_dense(tp) -> None:
    dense = nn.Linear(6 * tp.size, 4)
    row = tpm.RowParallelLinear.from_dense(dense, tp)
    cols = tpm.owned_indices(dense.in_features, tp)        # this rank's input features
    x, upstream = torch.randn(3, 5, 6 * tp.size), torch.randn(3, 5, 4)
    x1, x2 = x.clone().requires_grad_(), x[..., cols].clone().requires_grad_()
    y1, y2 = dense(x1), row(x2)
    y1.backward(upstream)
    y2.backward(upstream)
    close(y2, y1, msg="row: output (g all-reduces the partial sums)")
    close(x2.grad, x1.grad[..., cols], msg="row: input gradient")
    close(row.weight.grad, dense.weight.grad[:, cols], msg="row: weight gradient")
    close(row.bias.grad, dense.bias.grad, msg="row: bias gradient")
    close(row.full_state()["weight"], dense.weight.detach(), msg="row: gathered weight")


def _blocks_equal_dense(tp, meter, mesh) -> dict:
    """The GPT's MLP and attention: dense vs from scratch vs DTensor; all-reduces counted."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    from gpututor.parallel.tensor_parallel.dtensor import SplitQKVAttention

    cfg = GPTConfig(n_head=2 * tp.size, d_model=8 * tp.size, block_size=16)
    counts = {}
    for kind in ("mlp", "attention"):
        torch.manual_seed(1)
        dense = MLP(cfg.d_model, 4 * cfg.d_model) if kind == "mlp" else CausalSelfAttention(cfg)
        if kind == "mlp":
            scratch = tpm.TensorParallelMLP(dense, tp)
            dtensor = parallelize_module(copy.deepcopy(dense), mesh,
                                         {"fc": ColwiseParallel(), "proj": RowwiseParallel()})
        else:
            scratch = tpm.TensorParallelAttention(dense, tp)
            dtensor = parallelize_module(SplitQKVAttention(copy.deepcopy(dense)), mesh, {
                "q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                "proj": RowwiseParallel()})
        x, upstream = torch.randn(2, 7, cfg.d_model), torch.randn(2, 7, cfg.d_model)
        xs = [x.clone().requires_grad_() for _ in range(3)]
        before = meter.calls
        outs = [m(xi) for m, xi in zip((dense, scratch, dtensor), xs)]
        for out in outs:
            out.backward(upstream)
        counts[f"{kind}_allreduces"] = meter.calls - before    # from scratch only
        for name, out, xi in (("from scratch", outs[1], xs[1]), ("DTensor", outs[2], xs[2])):
            close(out, outs[0], msg=f"{kind} {name}: output")
            close(xi.grad, xs[0].grad, msg=f"{kind} {name}: input gradient")
        want = {n: p.grad for n, p in dense.named_parameters()}
        for name, module in scratch.named_modules():
            if isinstance(module, (tpm.ColumnParallelLinear, tpm.RowParallelLinear)):
                for key, grad in module.full_state(grad=True).items():
                    close(grad, want[f"{name}.{key}"], msg=f"{kind} from scratch: {name}.{key}")
        for name, p in dtensor.named_parameters():
            if name[0] in "qkv" and name[1] == ".":     # q, k, v: thirds of the fused qkv
                expected = want[f"qkv.{name[2:]}"].chunk(3)["qkv".index(name[0])]
            else:
                expected = want[name]
            grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            close(grad, expected, msg=f"{kind} DTensor: {name} gradient")
    return counts


def _layers_equal_dense_task(spec, rank, world, device, emit):
    """In every rank: each parallel layer and block against its dense version."""
    from torch.distributed.device_mesh import init_device_mesh

    from gpututor.measure.timing import CollectiveTimer, CommMeter

    torch.set_num_threads(spec.threads_per_rank)
    meter = CommMeter(world_size=world)
    tp = tpm.TensorParallelGroup(rank, world, timer=CollectiveTimer(meter, device))
    torch.manual_seed(0)   # the same layers, inputs and upstream gradients on every rank
    _column_equals_dense(tp)
    _row_equals_dense(tp)
    counts = _blocks_equal_dense(tp, meter, init_device_mesh(device.type, (world,)))
    emit({"step": 0, **counts})


def test_parallel_layers_equal_dense_forward_and_backward():
    spec = tiny_spec(strategy="tp", world_size=2)
    records = launch(spec, task=_layers_equal_dense_task).wait()
    assert len(records) == 2
    for record in records:   # Megatron: one all-reduce in forward (g), one in backward (f)
        assert record["mlp_allreduces"] == 2 and record["attention_allreduces"] == 2


@pytest.mark.parametrize("strategy", ["tp", "tp-dtensor"])
def test_tensor_parallel_training_equals_one_process(tmp_path, strategy):
    # Plain SGD at a large learning rate: a gradient off by a factor (f or g summing where it
    # should not, a replicated weight's gradient added up over the ranks) moves the weights by
    # that factor; AdamW, dividing by sqrt(v), would hide it (see test_data_parallel). With SGD
    # the split matmuls' other order of summation shows only as ~1e-7 in the weights.
    spec = tiny_spec(strategy=strategy, world_size=2, steps=4, optimizer="sgd", lr=0.1,
                     save_state=str(tmp_path / "tp.pt"))
    run = launch(spec)
    summary = run.wait()
    assert_equals_one_process(spec, summary)   # losses and every weight, to ~1e-6
    state = torch.load(spec.save_state)
    records = [r for r in run.records if r["step"] == 3]
    full = sum(p.numel() * 4 for p in state.values()) - state["head.weight"].numel() * 4
    for r in records:   # each rank holds its slices of the big matrices, plus the replicated rest
        assert r["mem_params"] < 0.75 * full
    if strategy == "tp":   # 4 all-reduces of B x T x d fp32 activations per block and step
        cfg = (spec.batch_size, spec.seq_len, 96, 2)   # tiny GPT: d_model 96, 2 blocks
        assert summary["comm_bytes_per_step"] == 4 * cfg[3] * cfg[0] * cfg[1] * cfg[2] * 4
    else:   # DTensor's collectives are torch's own: not measured, so None, never a made-up 0
        for key in ("comm_s", "compute_s", "comm_bytes_per_step", "comm_wire_bytes_per_step"):
            assert summary[key] is None, key
        assert all(r["comm_s"] is None and r["comm_bytes"] is None for r in run.records)


@pytest.mark.parametrize("strategy", ["tp", "tp-dtensor"])
def test_bad_degrees_are_clear_errors_before_launch(strategy):
    with pytest.raises(ValueError, match=rf"world_size=3 is invalid for strategy='{strategy}'.*"
                       r"2 attention heads \(n_head\) must split .*allowed is tp degrees 1, 2$"):
        tiny_spec(strategy=strategy, world_size=3)
    with pytest.raises(ValueError, match=r"world_size=3 .* 256 MLP hidden units \(d_hidden\)"):
        tiny_spec(strategy=strategy, world_size=3, model="mlp", model_size="small")


def _dtensor_qkv_backward_task(spec, rank, world, device, emit):
    """In every rank: the split attention under DTensor, planned as the lesson plans it and with
    a ``PrepareModuleInput`` on the module that makes its input a DTensor once; the all-reduces
    of backward counted by ``CommDebugMode``, and the input gradients compared."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, parallelize_module)

    from gpututor.parallel.tensor_parallel.dtensor import SplitQKVAttention

    torch.set_num_threads(spec.threads_per_rank)
    mesh = init_device_mesh(device.type, (world,))
    cfg = GPTConfig(n_head=2 * world, d_model=8 * world, block_size=16)
    torch.manual_seed(0)   # the same layer, input and upstream gradient on every rank
    dense = CausalSelfAttention(cfg)
    x, upstream = torch.randn(2, 7, cfg.d_model), torch.randn(2, 7, cfg.d_model)
    counts, grads = {}, {}
    for variant in ("plan", "prepared"):
        attention = SplitQKVAttention(copy.deepcopy(dense))
        if variant == "prepared":   # the input becomes a Replicate DTensor once, for q, k and v
            parallelize_module(attention, mesh, PrepareModuleInput(
                input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),),
                use_local_output=False))
        parallelize_module(attention, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(),
                                             "v": ColwiseParallel(), "proj": RowwiseParallel()})
        xi = x.clone().requires_grad_()
        out = attention(xi)
        out = out.to_local() if hasattr(out, "to_local") else out
        mode = CommDebugMode()
        with mode:
            out.backward(upstream)
        counts[variant] = sum(n for op, n in mode.get_comm_counts().items() if "all_reduce" in str(op))
        grads[variant] = xi.grad
    close(grads["prepared"], grads["plan"], msg="the input gradient, with and without PrepareModuleInput")
    emit({"step": 0, **{f"{k}_backward_allreduces": v for k, v in counts.items()}})


def test_dtensor_qkv_gradients_are_summed_before_one_all_reduce_with_prepare_module_input():
    """Lesson 04 §4: the plan's three ColwiseParallel q, k, v each all-reduce their own input
    gradient in backward; a PrepareModuleInput on the attention makes it one, as Megatron's."""
    records = launch(tiny_spec(strategy="tp-dtensor", world_size=2), task=_dtensor_qkv_backward_task).wait()
    for record in records:
        assert record["plan_backward_allreduces"] == 3, record
        assert record["prepared_backward_allreduces"] == 1, record


def test_dtensor_plan_all_reduces_twice_per_block_in_forward():
    from gpututor.lessons.tensor_parallel.collectives import count_collectives
    counted = count_collectives(tiny_spec(strategy="tp-dtensor", world_size=2, batch_size=2))
    assert counted["forward"] == {"all_reduce": 2 * 2}       # tiny GPT: 2 blocks
    assert counted["backward"]["all_reduce"] >= 2 * 2        # q, k, v: one each in torch 2.13
