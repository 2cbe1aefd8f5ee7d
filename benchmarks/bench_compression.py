"""Compression on this machine: every variant of lesson 07, measured side by side in one run.

A tiny-GPT teacher is trained (a real run, longer than the lesson's), then:
1. int8: from scratch (weight-only), torch.ao dynamic, torchao weight-only (if installed):
   bytes on disk and CPU inference latency against fp32, and the loss change;
2. magnitude pruning at 50 % and 90 % (and the sweep), loss before and after a short fine-tune,
   next to the unpruned model fine-tuned for the same steps; 50 % of MLP neurons removed;
3. distillation: a 1-layer student alone vs distilled at a few (temperature, alpha);
4. the trade-off table (bytes, latency, validation loss) of all of them, latency interleaved.

    python benchmarks/bench_compression.py [--teacher-steps 800] [--student-steps 200]
"""
from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import torch

from common import report
from gpututor import RunSpec, build_model, launch
from gpututor.compression import distill, measure, prune, quantize
from gpututor.lessons.compression.runs import launch_distillation

STUDENT = (("n_layer", 1), ("n_head", 2), ("d_model", 64))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teacher-steps", type=int, default=800)
    parser.add_argument("--student-steps", type=int, default=200)
    parser.add_argument("--fine-tune-steps", type=int, default=40)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="gpututor-bench-"))
    teacher_spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1,
                           batch_size=32, seq_len=16, steps=args.teacher_steps, lr=1e-3,
                           save_state=str(workdir / "teacher.pt"))
    student_spec = teacher_spec.replace(steps=args.student_steps, lr=3e-3, seed=1, options=())
    teacher_summary = launch(teacher_spec).wait()
    teacher = build_model(teacher_spec)
    teacher.load_state_dict(torch.load(workdir / "teacher.pt"))
    teacher.eval()
    val = measure.validation_batches(teacher_spec, n_batches=8)

    # 1. int8
    quantized = {"int8 from scratch": quantize.quantize_linears(teacher),
                 "int8 dynamic (torch.ao)": quantize.quantize_dynamic_int8(teacher)}
    if quantize.torchao_version():
        quantized["int8 weight-only (torchao)"] = quantize.quantize_torchao_int8(teacher)

    # 2. pruning
    ft = args.fine_tune_steps
    sweep = [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95]
    sweep_loss = {s: measure.eval_loss(prune.make_permanent(prune.prune_magnitude(teacher, s)), val)
                  for s in sweep}
    dense_ft = copy.deepcopy(teacher)
    prune.fine_tune(dense_ft, teacher_spec, ft)
    pruned, pruning = {}, {}
    for s in (0.5, 0.9):
        model = prune.prune_magnitude(teacher, s)
        prune.fine_tune(model, teacher_spec, ft)
        pruned[s] = prune.make_permanent(model)
        pruning[f"{s:.0%}"] = {"sparsity_reached": prune.weight_sparsity(model),
                               "loss_before_fine_tune": sweep_loss[s],
                               "loss_after_fine_tune": measure.eval_loss(model, val)}
    neurons = prune.shrink_mlps(teacher, 0.5)
    neurons_before = measure.eval_loss(neurons, val)
    prune.fine_tune(neurons, teacher_spec, ft)

    # 3. distillation
    def student_run(name, **kwargs):
        path = workdir / f"{name}.pt"
        summary = launch_distillation(student_spec, teacher_spec, workdir / "teacher.pt",
                                              save_state=str(path), student_shape=STUDENT,
                                              **kwargs).wait()
        model = distill.build_student(student_spec, STUDENT)
        model.load_state_dict(torch.load(path))
        return summary, model

    students, distillation = {}, {}
    for name, kwargs in {"alone": dict(alpha=0.0),
                         "T=1 a=0.5": dict(temperature=1.0, alpha=0.5),
                         "T=2 a=0.5": dict(temperature=2.0, alpha=0.5),
                         "T=4 a=0.5": dict(temperature=4.0, alpha=0.5),
                         "T=1 a=1": dict(temperature=1.0, alpha=1.0)}.items():
        summary, model = student_run(name.replace(" ", "_").replace("=", ""), **kwargs)
        students[f"student {name}"] = model
        distillation[name] = {"final_train_loss": summary["final_loss"],
                              "validation_loss": measure.eval_loss(model, val),
                              "ms_per_step": summary["step_time_s"] * 1e3}

    # 4. all variants side by side
    variants = {"fp32 teacher": teacher, **quantized, f"unpruned + {ft} steps": dense_ft,
                f"50% pruned + {ft} steps": pruned[0.5], f"90% pruned + {ft} steps": pruned[0.9],
                f"50% neurons removed + {ft} steps": neurons,
                "student alone": students["student alone"],
                "student distilled T=1 a=0.5": students["student T=1 a=0.5"]}
    rows = measure.measure_variants(variants, teacher_spec, rounds=9, repeats_per_round=5,
                                    n_eval_batches=8)
    base = rows[0]
    by_name = {r["variant"]: r for r in rows}
    report("compression", {
        "config": {"teacher_steps": args.teacher_steps, "student_steps": args.student_steps,
                   "fine_tune_steps": ft, "batch_size": teacher_spec.batch_size,
                   "seq_len": teacher_spec.seq_len, "torchao": quantize.torchao_version()},
        "teacher": {"final_train_loss": teacher_summary["final_loss"],
                    "validation_loss": base["loss"], "bytes": base["bytes"]},
        "int8_vs_fp32": {name: {"bytes_ratio": by_name[name]["bytes"] / base["bytes"],
                                "latency_ratio": by_name[name]["latency_s"] / base["latency_s"],
                                "loss_change": by_name[name]["loss"] - base["loss"]}
                         for name in quantized},
        "pruning_sweep_loss_no_fine_tune": {f"{s:.0%}": v for s, v in sweep_loss.items()},
        "pruning": {**pruning, "unpruned_same_fine_tune_loss": measure.eval_loss(dense_ft, val),
                    "neurons_50%": {"loss_before_fine_tune": neurons_before,
                                    "loss_after_fine_tune": measure.eval_loss(neurons, val)}},
        "distillation": distillation,
        "tradeoff": rows,
    })


if __name__ == "__main__":
    main()
