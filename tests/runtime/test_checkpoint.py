"""Distributed checkpoints (DCP): every strategy saves its own pieces and resumes from them, and
a run continued in another layout, world size or strategy follows the uninterrupted curve."""
import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.parallel import STRATEGIES, small_layout, small_model
from conftest import tiny_spec

RTOL = 1e-5
SHARE = 0.8   # the most of a checkpoint's bytes one of several ranks writes


def same_curve(resumed: dict, full: dict, start: int) -> None:
    """The resumed run starts at ``start`` and its losses are the uninterrupted run's."""
    assert resumed["first_step"] == start
    torch.testing.assert_close(torch.tensor(resumed["losses"]),
                               torch.tensor(full["losses"][start:]), rtol=RTOL, atol=0)


def layout(name: str, world: int | None = None, mesh: dict | None = None, **changes):
    small_world, small_mesh, options = small_layout(name)
    return tiny_spec(strategy=name, world_size=world or small_world,
                     mesh=mesh if mesh is not None else small_mesh, options=options,
                     model=small_model(name), **changes)


@pytest.mark.parametrize("name", [n for n, s in STRATEGIES.items() if s.supports_checkpoint])
def test_every_strategy_saves_its_pieces_and_resumes_from_them(name, tmp_path):
    spec = layout(name, steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path))
    full = launch(spec).wait()
    assert (tmp_path / "step2" / ".metadata").is_file()
    assert full["checkpoint"]["saves"] == 2
    written = full["checkpoint"]["bytes_per_rank"]
    # every value once (fp32 parameters and AdamW's two moments: 12 bytes a parameter, plus
    # DCP's framing), and every rank writes a part of it: none writes the whole state
    assert all(b is not None and b > 0 for b in written), written
    assert 12 * full["params"] <= sum(written) <= 1.5 * 12 * full["params"], (written, full["params"])
    if spec.world_size > 1:
        assert max(written) <= SHARE * sum(written), written
    resumed = launch(spec.replace(checkpoint_every=0, checkpoint_dir=None,
                                  resume=str(tmp_path / "step2"))).wait()
    same_curve(resumed, full, 2)


def test_a_run_continues_through_four_layouts(tmp_path):
    """fsdp on 4 ranks -> Megatron tp on 2 -> ddp+pp on 4 -> one process, with AdamW's state
    carried along: each leg's losses equal the uninterrupted fsdp run's."""
    common = dict(steps=8, checkpoint_every=2)
    full = launch(layout("fsdp", world=4, checkpoint_dir=str(tmp_path / "a"), **common)).wait()
    tp = launch(layout("tp", world=2, checkpoint_dir=str(tmp_path / "b"),
                       resume=str(tmp_path / "a" / "step2"), **common)).wait()
    same_curve(tp, full, 2)
    pp = launch(layout("ddp+pp", world=4, mesh={"dp": 2, "pp": 2},
                       checkpoint_dir=str(tmp_path / "c"),
                       resume=str(tmp_path / "b" / "step4"), **common)).wait()
    same_curve(pp, full, 4)
    one = launch(layout("single", world=1, resume=str(tmp_path / "c" / "step6"),
                        steps=8)).wait()
    same_curve(one, full, 6)


@pytest.mark.parametrize("source,world", [("zero1", 2), ("zero2", 3), ("zero3", 3),
                                          ("fsdp", 3), ("tp-dtensor", 2), ("fsdp+tp", 4)])
def test_sharded_checkpoints_load_into_ddp_and_back(source, world, tmp_path):
    """Flat ZeRO shards and DTensor shards on uneven splits (3 ranks: the shards cut rows
    anywhere) load into DDP, and DDP's into them; SGD's momentum carried along."""
    common = dict(steps=6, batch_size=12 if world == 3 else 8, optimizer="sgd", lr=0.05)
    mesh = {"dp": 2, "tp": 2} if "+" in source else None
    full = launch(layout(source, world=world, mesh=mesh, checkpoint_every=2,
                         checkpoint_dir=str(tmp_path / "a"), **common)).wait()
    ddp = launch(layout("ddp", world=2, checkpoint_every=2, checkpoint_dir=str(tmp_path / "b"),
                        resume=str(tmp_path / "a" / "step2"), **common)).wait()
    same_curve(ddp, full, 2)
    back = launch(layout(source, world=world, mesh=mesh,
                         resume=str(tmp_path / "b" / "step4"), **common)).wait()
    same_curve(back, full, 4)


def test_async_save_blocks_training_less_than_the_save_takes(tmp_path):
    spec = tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path),
                     checkpoint_async=True)
    full = launch(spec).wait()
    figures = full["checkpoint"]
    assert figures["saves"] == 2 and all(b > 0 for b in figures["bytes_per_rank"])
    assert 0 < figures["blocked_s"] < figures["save_s"], figures
    resumed = launch(spec.replace(checkpoint_every=0, checkpoint_async=False,
                                  resume=str(tmp_path / "step2"))).wait()
    same_curve(resumed, full, 2)


def test_an_fp16_loss_scale_is_saved_and_continued(tmp_path):
    """fp16's GradScaler (a GPU run's; fp16 is refused on CPU, so here in one process, no
    ranks): its scale and growth tracker are saved and a resume continues from them, not from
    the first scale (a resumed run would then skip other steps than the original did)."""
    from types import SimpleNamespace
    from gpututor.models import build_model
    from gpututor.parallel import get_strategy
    from gpututor.runtime.checkpoint import Checkpointer
    spec = RunSpec(model_size="tiny", strategy="single", world_size=1, precision="fp16",
                   steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path))
    model = build_model(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    scaler = torch.amp.GradScaler("cpu")   # as after 6 overflows, then 3 good steps
    scaler.load_state_dict({**scaler.state_dict(), "scale": 2.0**10, "_growth_tracker": 3})
    Checkpointer(spec, get_strategy("single"), 0).save(model, optimizer, 1, scaler)
    resume = spec.replace(checkpoint_every=0, checkpoint_dir=None, resume=str(tmp_path / "step2"))
    ctx = SimpleNamespace(device=torch.device("cpu"))
    fresh = build_model(spec.replace(seed=spec.seed + 1))
    assert Checkpointer(resume, get_strategy("single"), 0).load(
        fresh, torch.optim.AdamW(fresh.parameters(), lr=spec.lr), ctx) == 2
    assert ctx.grad_scaler.get_scale() == 2.0**10
    assert ctx.grad_scaler.state_dict()["_growth_tracker"] == 3
    for (name, p), q in zip(model.named_parameters(), fresh.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0, msg=name)


def test_checkpoint_figures_keep_each_save_apart():
    """An asynchronous save may finish while the next one starts: each save's seconds and
    bytes stay with its own step (the summary's medians are over saves)."""
    from gpututor.runtime.summary import checkpoint_figures
    rec = lambda rank, started=None, blocked=None, written=(): {
        "rank": rank, "checkpoint_step": started, "checkpoint_blocked_s": blocked,
        "checkpoint_written": list(written)}
    save = lambda step, seconds, size: {"step": step, "save_s": seconds, "bytes": size}
    records = [rec(0, 1, 0.01), rec(1, 1, 0.02),                       # save 1 starts
               rec(0, 3, 0.03, [save(1, 1.0, 100)]), rec(1, 3, 0.01, [save(1, 2.0, 80)]),
               rec(0, written=[save(3, 4.0, 120)]), rec(1, written=[save(3, 3.0, 90)])]
    figures = checkpoint_figures(records, world=2)
    assert figures == {"saves": 2, "bytes_per_rank": [120, 90], "save_s": 3.0,
                       "blocked_s": 0.025}


def test_checkpoint_fields_are_validated(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_dir=None is invalid"):
        tiny_spec(checkpoint_every=2)
    spec = tiny_spec(resume="nowhere")   # a spec may name a folder of another machine
    with pytest.raises(ValueError, match="resume='nowhere' is invalid.*existing checkpoint folder"):
        launch(spec)                       # launching checks it, before any rank starts
    with pytest.raises(ValueError, match="checkpoint_every=-1 is invalid"):
        tiny_spec(checkpoint_every=-1, checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match="checkpoint_async='yes' is invalid"):
        tiny_spec(checkpoint_async="yes")


def test_cli_checkpoint_and_resume(tmp_path, capsys):
    """The command line's checkpoint flags, run in this process: ``python -m gpututor run`` as a
    separate process is tests/runtime/test_cli.py's (each process here cost an import of torch
    and gpututor, seconds on 2 cores, for the same code path)."""
    from gpututor.runtime.cli import main
    common = ["run", "--model-size", "tiny", "--batch-size", "8", "--seq-len", "32", "--steps", "4",
              "--quiet"]
    first = main(common + ["--world-size", "2", "--strategy", "zero2", "--checkpoint-every", "2",
                           "--checkpoint-dir", str(tmp_path)])
    assert first == 0, capsys.readouterr().err
    assert (tmp_path / "step2" / ".metadata").is_file()
    capsys.readouterr()
    again = main(common + ["--world-size", "2", "--resume", str(tmp_path / "step2"), "--json", "-"])
    out = capsys.readouterr()
    assert again == 0, out.err
    assert '"first_step": 2' in out.out


@pytest.mark.parametrize("name", [n for n, s in STRATEGIES.items() if not s.supports_checkpoint])
def test_a_strategy_that_cannot_checkpoint_is_refused_before_launch(name, tmp_path):
    with pytest.raises(ValueError, match=f"strategy='{name}' is invalid with checkpointing"):
        launch(layout(name, steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path)))
