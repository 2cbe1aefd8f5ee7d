"""Every exercise of every lesson: the published solution passes its checker, a wrong answer fails.

The solutions are read from each notebook's "Solutions" cell (the code in item k solves the k-th
cell that calls a ``check_*`` function), so the test checks what a learner reads. The wrong
answers are written here: for each exercise a mistake a learner plausibly makes.

Each notebook is executed once, by nbconvert (errors allowed, outputs kept), in an *augmented* copy: after every checker cell two
cells are inserted, one that runs the published solution through the cell's checker (it must
pass) and one that runs the wrong answer (the checker must raise ``AssertionError``). So this one
run is also the test that every lesson runs top to bottom (the learner's copy leaves the answers
as ``...``, which the checkers report as "not answered yet").
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from jupyterlab_browser import browser_can_run, cjk_font
from lesson_outputs import output_problems

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# one Chinese lesson runs too (its code is the English one's: tests/test_zh.py); its answers,
# right and wrong, are the English lesson's (WRONG is keyed by the notebook's file stem).
# Lesson 00, English and Chinese, runs in the browser test instead where that test can run
# (Chromium; for Chinese a CJK font too), with the same solutions and wrong answers added:
# each notebook executes once per language in the suite.
ZH_00 = ROOT / "notebooks" / "zh" / "00_start_here.ipynb"
# lesson 08 prints the most text: its Chinese twin runs too, and keeps its outputs, in which no
# printed line may be an English sentence (english_lines)
ZH_08 = ROOT / "notebooks" / "zh" / "08_choosing_hardware.ipynb"
IN_BROWSER = ([NOTEBOOKS[0]] if browser_can_run() else []) + \
    ([ZH_00] if browser_can_run() and cjk_font() else [])
# The CUDA-shaped runs (issue 42): a lesson's Chinese twin runs in a kernel where gpututor sees
# GPUs and a core count this machine does not have, and every run's records are shaped as a CUDA
# run's (None where CUDA leaves a figure unmeasured) while the ranks still train on this CPU
# (tests/cuda_shape.py). Its English lesson runs as it is: the CPU path. (GPUs, usable cores) by
# lesson: the lessons that start ranks get 2, 4 or 8 GPUs (a machine with fewer GPUs than a
# lesson's largest run, where some runs resolve to CUDA and others cannot, is the case lessons
# got wrong) and a core count unlike this machine's; in CI only these run shaped (each adds one
# execution of the lesson). CUDA_SHAPE_ALL=1 shapes every lesson's twin, the one-device lessons
# with one GPU and one core.
MANY_GPUS, FOUR_GPUS, TWO_GPUS, ONE_GPU = (8, 32), (4, 16), (2, 6), (1, 1)
SHAPES = {"02_data_parallel": MANY_GPUS, "03_sharding": FOUR_GPUS, "04_tensor_parallel": TWO_GPUS,
          "05_pipeline_parallel": TWO_GPUS, "08_choosing_hardware": MANY_GPUS,
          "09_composing_parallelisms": MANY_GPUS, "10_long_context": FOUR_GPUS,
          "11_mixture_of_experts": TWO_GPUS, "12_failures_at_scale": FOUR_GPUS,
          "13_cutting_communication": TWO_GPUS}
if os.environ.get("CUDA_SHAPE_ALL") == "1":
    SHAPES = {nb.stem: SHAPES.get(nb.stem, ONE_GPU) for nb in NOTEBOOKS}
SHAPED = [ROOT / "notebooks" / "zh" / f"{stem}.ipynb" for stem in sorted(SHAPES)]
# What a CUDA-shaped run must print, checked by a hidden cell after the lesson's cells: a sentence
# chosen from a run's recorded device ("cuda:0"), not only a cell that runs.
SHAPED_CHECKS = {"03_sharding": 'assert "NCCL" in how_ranks_talk(runs["ddp"]["device"]), '
                                'how_ranks_talk(runs["ddp"]["device"])'}
EXECUTED = [nb for nb in NOTEBOOKS + [ZH_00] if nb not in IN_BROWSER] + [ZH_08]
EXECUTED += [nb for nb in SHAPED if nb not in EXECUTED]
NOTEBOOK_TIMEOUT_S = 600
SOLUTIONS = re.compile(r"<summary>(?:Solutions|参考答案)</summary>")   # English, Chinese lessons
CHECK_CALL = re.compile(r"^\s*(check_\w+)\(\s*([A-Za-z_]\w*)", re.M)

# One plausible mistake per exercise, by notebook and answer variable.
WRONG = {
    "00_start_here": {
        "answer_1": "answer_1 = 32                          # forgot to split the global batch",
        "my_rank_indices": ("def my_rank_indices(n, rank, world_size):   # dealt out, but no padding\n"
                            "    return list(range(rank, n, world_size))"),
        # (doubling the 2-rank run is also wrong, but passes where DDP's speedup is about 1, as
        # on a loaded 2-core machine: one rank's own figure is wrong on every machine)
        "answer_3": 'answer_3 = solo_summary["tokens_per_s"]  # one rank\'s own, not N times it',
        "answer_4": 'answer_4 = 4 * large_params             # one moment instead of two',
    },
    "01_single_device": {
        "my_optimizer_bytes": ("def my_optimizer_bytes(n_params, n_tensors):   # one moment\n"
                               "    return 4 * n_params + 4 * n_tensors"),
        "my_activation_ratio": "my_activation_ratio = 128 / 64   # in proportion to seq_len: the square left out",
        "my_hours": "my_hours = 1e9 * 2 * anatomy.params / anatomy.achieved_flops / 3600   # forward only",
        "my_flops_per_step": textwrap.dedent('''\
            def my_flops_per_step(model, batch_size, seq_len):   # forward only
                n = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
                cfg = model.cfg
                return (2 * n + 2 * 2 * cfg.n_layer * seq_len * cfg.d_model) * batch_size * seq_len'''),
    },
    "01b_one_device": {
        "my_probs_bytes": "my_probs_bytes = 512 * 512 * 4            # one head only",
        "my_bytes_per_param": "my_bytes_per_param = 2                 # forgot the scales",
        "my_full_saving": ("def my_full_saving(seq_len, micro_batch, d_model, n_head, n_layer):   # the T² scores left out\n"
                           "    return n_layer * 60 * seq_len * micro_batch * d_model"),
        "my_update": textwrap.dedent('''\
            def my_update(m, l, acc, s, v):                 # forgot to rescale what came before
                m_new = torch.maximum(m, s.amax(dim=-1))
                p = torch.exp(s - m_new[:, None])
                return m_new, l + p.sum(dim=-1), acc + p @ v'''),
        "my_link_bytes": 'my_link_bytes = (moved["to_host"] // 2, moved["to_device"] // 2)   # section 4\'s 16-bit case',
    },
    "01c_one_device_speed": {
        "my_matmul_intensity": textwrap.dedent('''\
            def my_matmul_intensity(m, k, n, bytes_per_element):   # forgot the output's write
                return 2 * m * k * n / ((m * k + k * n) * bytes_per_element)'''),
        "my_rows": ("my_rows = next(m for m in range(1, 10**6) if 2 * m * 256 * 1024"
                    " / (2 * (m * 256 + 256 * 1024 + m * 1024)) >= ridge(peak, bandwidth))"
                    "   # this CPU's ridge, not the A100's"),
    },
    "02_data_parallel": {
        "my_allreduce": textwrap.dedent('''\
            def my_allreduce(tensor, rank, world):     # all-to-all: right sum, not a ring
                requests = [dist.isend(tensor.clone(), p) for p in range(world) if p != rank]
                incoming = [torch.empty_like(tensor) for p in range(world) if p != rank]
                for buffer, p in zip(incoming, [p for p in range(world) if p != rank]):
                    dist.recv(buffer, p)
                for request in requests:
                    request.wait()
                tensor += sum(incoming)
                return tensor'''),
        "my_bytes_per_step": 'my_bytes_per_step = runs["ddp"]["comm_bytes_per_step"]   # the small GPT\'s, recorded',
        "my_sent_on_64": 'my_sent_on_64 = runs["ddp"]["comm_wire_bytes_per_step"]   # 2 ranks\' recorded, not 64\'s',
    },
    "03_sharding": {
        "my_saving": "my_saving = (4 + 8) * n_params * (2 - 1) / 2   # the 2-rank runs' saving, not 4's",
        "my_fewest_gpus": "my_fewest_gpus = (30, 6)   # N >= 30.3 and 6.5 rounded down, not up",
        "my_zero3_bytes": "my_zero3_bytes = 2 * (4 - 1) / 4 * 4 * n_params   # ZeRO-2's two collectives",
        "my_reduce_scatter": textwrap.dedent('''\
            def my_reduce_scatter(flat, rank, world):    # lesson 02's phase 1 as it is: piece r+1
                pieces = list(flat.tensor_split(world))
                right, left = (rank + 1) % world, (rank - 1) % world
                for step in range(world - 1):
                    send, recv = (rank - step) % world, (rank - step - 1) % world
                    incoming = torch.empty_like(pieces[recv])
                    request = dist.isend(pieces[send].contiguous(), right)
                    dist.recv(incoming, left)
                    request.wait()
                    pieces[recv] += incoming
                return pieces[(rank + 1) % world] / world'''),
    },
    "03b_your_own_model": {
        "my_wrap": textwrap.dedent('''\
            def my_wrap(module):                      # section 2's units: the lesson's Block only
                model = ZeRO3(module, units=Block)
                return model, adamw(model)'''),
    },
    "04_tensor_parallel": {
        "my_row_forward": textwrap.dedent('''\
            def my_row_forward(x_local, weight_local, bias, tp):   # bias added on every rank
                return reduce_from_tensor_parallel_region(F.linear(x_local, weight_local, bias), tp)'''),
        "my_tp_bytes": ("my_tp_bytes = lambda batch, seq_len, d_model, n_layer: "
                        "list(by_degree.values())[1][\"comm_bytes_per_step\"] / 2"
                        "   # section 5's recorded degree-2 run, halved to batch 8"),
    },
    "05_pipeline_parallel": {
        "my_bubble": ("def my_bubble(p, m, x):   # section 5's balanced stages: forgot the slow last stage\n"
                      "    return (p - 1) / (m + p - 1)"),
        "my_fewest_microbatches": ("def my_fewest_microbatches(p, v, target):   # from (p - 1) / (v m) <= target\n"
                                   "    return -(-(p - 1) // (v * target))"),
        "my_bubble_fraction": textwrap.dedent('''\
            def my_bubble_fraction(events):   # the busy share, not the idle share
                busy = sum(e - s for evs in events.values() for _, _, s, e in evs)
                start = min(s for evs in events.values() for _, _, s, _ in evs)
                end = max(e for evs in events.values() for *_, e in evs)
                return busy / (len(events) * (end - start))'''),
        "my_1f1b_order": ("def my_1f1b_order(stage, stages, microbatches):   # GPipe's order\n"
                          "    return [('F', i) for i in range(microbatches)] + "
                          "[('B', i) for i in range(microbatches)]"),
    },
    "06_mixed_precision": {
        "my_update": textwrap.dedent('''\
            def my_update(scale, clean_steps, found_inf, growth_interval):   # grows one step late
                if found_inf:
                    return scale * 0.5, 0
                if clean_steps == growth_interval:
                    return scale * 2.0, 0
                return scale, clean_steps + 1'''),
        "my_held_bytes": textwrap.dedent('''\
            def my_held_bytes(model, dtype, optimizer):   # section 4's 14 bytes a parameter, whatever the layout
                return 14 * sum(p.numel() for p in model.parameters())'''),
        "my_flush_threshold": "my_flush_threshold = 2**-24 / 1000   # the smallest subnormal, not where g*S rounds to 0",
    },
    "07_compression": {
        "my_changed": textwrap.dedent('''\
            def my_changed(weight):                  # forgot torchao's clamp: +128 is no int8
                w = weight.detach().float()
                amax = w.abs().amax(dim=1, keepdim=True)
                ours = torch.round(w / (amax / 127)).clamp(-127, 127)
                return (ours != torch.round(w * (1 / (amax / 127.5)))).sum(dim=1)'''),
        "my_removed": ("def my_removed(d_model, n_layer, share):   # counted proj's bias too: it stays\n"
                       "    return n_layer * round(share * 4 * d_model) * (2 * d_model + 2)"),
        "my_int8_bytes": ("my_int8_bytes = sum(m.weight.numel() for m in teacher.modules()"
                          " if isinstance(m, torch.nn.Linear))   # forgot the scales"),
        "my_quantize": textwrap.dedent('''\
            def my_quantize(weight):               # max(w), not max|w|: misses negative extremes
                w = weight.detach().float()
                scale = (w.amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
                return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale'''),
    },
    "06b_fp8": {
        "my_e4m3_cast": textwrap.dedent('''\
            def my_e4m3_cast(x, amax):                 # amax / max: the scale turned upside down
                scale = amax / 448.0
                return (x.float() * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale'''),
    },
    "08_choosing_hardware": {
        "my_bytes_per_param": ("def my_bytes_per_param(zero_stage, dp):   # as if every stage sharded the weights too\n"
                               "    return 16 / dp if zero_stage else 16"),
        "my_smallest_count": textwrap.dedent('''\
            def my_smallest_count(n_params, zero_stage, memory_gb):   # without the 10 % reserve
                kept = {0: 16, 1: 4, 2: 2, 3: 0}[zero_stage] * n_params
                if kept >= memory_gb * 1e9:
                    return None
                return max(1, -(-(16 * n_params - kept) // (memory_gb * 1e9 - kept)))'''),
        "my_days": ("def my_days(est, hfu):   # the whole step scaled, the exposed sync too\n"
                    '    return est.days * est.assumptions["hfu"] / hfu'),
        "my_formula_error": ("def my_formula_error(row):   # divided by the prediction\n"
                             '    return (row["formula_peak"] - row["measured_peak"]) / row["formula_peak"]'),
        "my_state_bytes": ("def my_state_bytes(n_params, per_param, zero_stage, dp):   # every stage shards all\n"
                           "    total = per_param.params + per_param.grads + per_param.optimizer\n"
                           "    return n_params * total / (dp if zero_stage else 1)"),
        "my_implied_mfu": ("def my_implied_mfu(n_params, n_layer, seq_len, d_model, tokens, gpu_seconds, peak_flops):\n"
                           "    return (6 * n_params + 12 * n_layer * seq_len * d_model) * tokens / (gpu_seconds * peak_flops)"
                           "   # the whole square, not causal"),
    },
    "10_long_context": {
        "my_visible_pairs": ("def my_visible_pairs(T, n, split, rank):   # the contiguous split for both\n"
                             "    return sum(p + 1 for p in range(rank * T // n, (rank + 1) * T // n))"),
        "my_bytes_512": ('my_bytes_512 = by[("one process", 256)] + 2 * (by[("one process", 256)]'
                         ' - by[("one process", 128)])   # a straight line: the T² term left out'),
        "my_cp_bytes": ("my_cp_bytes = build_model(long).cfg.n_layer * 4 * 2 * long.batch_size"
                        " * (long.seq_len // 2) * build_model(long).cfg.d_model * 4"
                        " + 4 * count_parameters(build_model(long))   # cp=2's count, not cp=4's"),
        "my_merge": ("def my_merge(out_a, lse_a, out_b, lse_b):   # a plain average of the two\n"
                     "    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)"),
    },
    "11_mixture_of_experts": {
        "my_capacity": ("def my_capacity(tokens, top_k, n_expert, capacity_factor):   # floor, not ceil\n"
                        "    return math.floor(capacity_factor * tokens * top_k / n_expert)"),
        "my_dropped_share": 'my_dropped_share = sum(sum(r["expert_dropped"][0]) for r in recs) / sum(sum(r["expert_tokens"][0]) for r in recs)   # over the kept only',
        "my_balancing_loss": ("def my_balancing_loss(probs, experts):   # no n_expert in front\n"
                              "    f = torch.bincount(experts.flatten(), minlength=probs.shape[1]).float() / experts.numel()\n"
                              "    return (f * probs.mean(dim=0)).sum()"),
    },
    "12_failures_at_scale": {
        "my_young": textwrap.dedent('''\
            def my_young(n_gpus, per_gpu_hour, blocked_s, save_s):   # the whole save, not what it blocks
                return math.sqrt(2 * save_s * 3600 / (n_gpus * per_gpu_hour))'''),
        "my_lost_gpu_hours": textwrap.dedent('''\
            def my_lost_gpu_hours(interval_s, save_s, mtbf_s, n_gpus, restart_s):   # forgot the restarts
                return (save_s / interval_s + interval_s / 2 / mtbf_s) * n_gpus * 24'''),
    },
    "13_cutting_communication": {
        "my_outer_step": textwrap.dedent('''\
            def my_outer_step(theta, workers, velocity, lr, momentum):   # plain momentum, not Nesterov's
                delta = torch.stack([theta - w for w in workers]).mean(dim=0)
                velocity = momentum * velocity + delta
                return theta - lr * velocity, velocity'''),
    },
    "09_composing_parallelisms": {
        "my_pp_group": "my_pp_group = [8, 9, 10]             # neighbours by rank number",
        "my_dp_group": "my_dp_group = list(range(1, 18, 2))  # every odd rank",
        "my_tp_extra": ('my_tp_extra = runs["ddp+tp"]["mem_by_category"]["params"][0]'
                        ' - single["mem_by_category"]["params"][0] / 2   # the tp=2 run\'s, not tp=3\'s'),
        "my_fits": textwrap.dedent('''\
            def my_fits(rows, capacity):               # forgot the planner's 80 % headroom
                parts = ("params", "grads", "optimizer", "activations")
                return {r["layout"] for r in rows if sum(r[p] for p in parts) <= capacity}'''),
        "my_groups": textwrap.dedent('''\
            def my_groups(shape, dim):                 # the grid transposed: the first dim innermost
                degrees = [degree for _, degree in shape]
                axis = [name for name, _ in shape].index(dim)
                stride = math.prod(degrees[:axis])
                starts = [r for r in range(math.prod(degrees)) if (r // stride) % degrees[axis] == 0]
                return [[start + i * stride for i in range(degrees[axis])] for start in starts]'''),
    },
}


def solution_items(nb: nbformat.NotebookNode) -> list[str]:
    """The code of each numbered item of the notebook's Solutions cell, in order."""
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and SOLUTIONS.search(c.source))
    body = SOLUTIONS.split(cell.source, 1)[1].split("</details>", 1)[0]
    items = re.split(r"^\d+\. ", body, flags=re.M)[1:]
    codes = []
    for item in items:
        block = re.search(r"```python\n(.*?)```", item, re.S)
        if block:
            codes.append(textwrap.dedent(block.group(1)))
            continue
        spans = [s for s in re.findall(r"`([^`]+)`", item)
                 if re.match(r"\s*(import |from |def |[A-Za-z_]\w*\s*=)", s)]
        assert spans, f"no code in solution item: {item[:120]!r}"
        codes.append(spans[0])
    return codes


def exercises(nb: nbformat.NotebookNode) -> list[dict]:
    """Every checker cell, its answer variable and the published solution that answers it."""
    checks = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for checker, variable in CHECK_CALL.findall(cell.source):
            if variable.startswith(("my_", "answer_")):
                checks.append({"cell": index, "checker": checker, "variable": variable,
                               "source": cell.source})
    for check, code in zip(checks, solution_items(nb), strict=True):
        check["solution"] = code
    return checks


def bound_names(code: str) -> set[str]:
    names = set()
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _checker_source(check: dict) -> str:
    """The checker cell without its ``name = ...`` placeholder line."""
    placeholder = re.compile(rf"^\s*{check['variable']}\s*=\s*\.\.\..*$", re.M)
    return placeholder.sub("", check["source"]).strip()


def augmented(nb: nbformat.NotebookNode, wrong: dict) -> nbformat.NotebookNode:
    """A copy of ``nb`` that proves each exercise right after its checker cell."""
    out = nbformat.from_dict(nb)
    for check in reversed(exercises(nb)):
        source = _checker_source(check)
        accept = f"# added by tests/test_exercises.py: the published solution\n{check['solution']}\n{source}"
        guarded = textwrap.indent(source, "    ")
        reject = (f"# added by tests/test_exercises.py: a wrong answer\n{wrong[check['variable']]}\n"
                  f"try:\n{guarded}\nexcept AssertionError as rejected:\n"
                  f"    print('wrong answer rejected:', str(rejected)[:200])\nelse:\n"
                  f"    raise RuntimeError({check['variable']!r} + ': the checker accepted a wrong answer')")
        out.cells[check["cell"] + 1:check["cell"] + 1] = [nbformat.v4.new_code_cell(accept),
                                                          nbformat.v4.new_code_cell(reject)]
    return out


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_has_a_published_solution_and_a_wrong_answer(notebook: Path):
    nb = nbformat.read(notebook, as_version=4)
    found = exercises(nb)
    assert found, f"{notebook.name} has no exercise checked by code"
    for check in found:
        assert check["variable"] in bound_names(check["solution"]), (
            f"{notebook.name}: solution {check['solution']!r} does not define {check['variable']}")
    assert {c["variable"] for c in found} == set(WRONG[notebook.stem]), (
        f"{notebook.name}: wrong answers are written for {sorted(WRONG[notebook.stem])}, "
        f"the notebook checks {[c['variable'] for c in found]}")
    for variable, code in WRONG[notebook.stem].items():
        assert variable in bound_names(code), f"wrong answer for {variable} does not define it"


# three or more English words in a row: a sentence, or a table head, a reader must decode
ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z]+(?:[ ,:;]+[A-Za-z][a-z]+){2,}\b")
# a line the test added (a wrong answer rejected: its message is the checker's, tested in Chinese
# by tests/test_i18n.py) is not the lesson's
ADDED_LINE = re.compile(r"^wrong answer rejected:")


def english_lines(nb: nbformat.NotebookNode) -> list[str]:
    """The printed lines of an executed notebook (streams, plain text, HTML without tags) that
    hold an English sentence (three English words in a row); code, numbers, units and names such
    as "64x H100-80GB, nvlink4+ib-ndr | dp 64 ZeRO-1" are not sentences."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = out.get("data", {})
            texts = [out.get("text", "")]
            if "text/html" in data:
                texts.append(re.sub(r"<[^>]+>", " ", data["text/html"]))
            elif "text/plain" in data and not any(k.startswith("application/") for k in data):
                texts.append(data["text/plain"])
            found += [line.strip() for text in texts for line in text.splitlines()
                      if ENGLISH_RUN.search(line) and not ADDED_LINE.match(line)]
    return found


def test_english_lines_tells_a_sentence_from_names_and_numbers():
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", text=(
        " 1  64x H100-80GB, nvlink4+ib-ndr | dp 64 ZeRO-1, 选择性重计算, 微批次 1    47.1    是\n"
        "本机：cpu，单个进程的矩阵乘法 75.4 GFLOP/s；tokens/s 12,000\n"
        "cost: not priced (no price known)\n"))]
    cell.outputs.append(nbformat.v4.new_output("display_data", data={
        "text/html": "<td>run</td><td>predicted error</td>", "text/plain": "<HTML>"}))
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert english_lines(nb) == ["cost: not priced (no price known)", "run  predicted error"]


def cuda_shaped(nb: nbformat.NotebookNode, shape: tuple[int, int]) -> nbformat.NotebookNode:
    """``nb`` (augmented) with the hidden cell that shapes its kernel first; every cell keeps
    its index in the lesson in ``metadata.lesson_cell`` (the cells the test added have none)."""
    from cuda_shape import setup_cell
    out = nbformat.from_dict(nb)
    out.cells.insert(0, nbformat.v4.new_code_cell(setup_cell(*shape)))
    return out


@pytest.fixture(scope="module")
def results_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results") / "results.json"


# Cells that show an error on purpose, by notebook stem: {lesson cell: why}. None today: the
# lessons catch the errors they demonstrate and show them as text (tests/lesson_outputs.py).
SHOWN_ON_PURPOSE: dict = {}


@pytest.mark.slow
@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S + 60)   # the notebook's own limit bounds it, not the 300 s
@pytest.mark.parametrize("notebook", EXECUTED, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_runs_and_its_checkers_accept_solutions_and_reject_wrong_answers(
        notebook: Path, tmp_path: Path, results_file: Path):
    """Run the augmented notebook once, keeping every cell's output (nbconvert, errors allowed, so
    that every failing cell is reported, not only the first), then read the outputs: a cell that
    raised fails the test, and so does anything tests/lesson_outputs.py says a learner must not
    see under Run All (stderr, red rank text, a printed line wider than the cell, a legend in
    colours its traces do not draw)."""
    nb = nbformat.read(notebook, as_version=4)
    path = tmp_path / notebook.name
    shape = SHAPES.get(notebook.stem) if notebook in SHAPED else None
    for index, cell in enumerate(nb.cells):
        cell.metadata["lesson_cell"] = index
    written = augmented(nb, WRONG[notebook.stem])
    if shape is not None:   # the CUDA-shaped run of a Chinese twin
        written = cuda_shaped(written, shape)
        if notebook.stem in SHAPED_CHECKS:
            written.cells.append(nbformat.v4.new_code_cell(SHAPED_CHECKS[notebook.stem]))
    nbformat.write(written, path)
    executed = tmp_path / "executed.ipynb"
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
               "--allow-errors", str(path), "--output", str(executed),
               "--ExecutePreprocessor.timeout=300"]
    # the lessons' findings for lesson 00's claims go to a file of the whole test session
    env = {**os.environ, "GPUTUTOR_RESULTS": str(results_file)}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            timeout=NOTEBOOK_TIMEOUT_S, env=env)
    assert result.returncode == 0, (
        f"{notebook.name} did not run to the end:\n{result.stdout[-3000:]}\n{result.stderr[-4000:]}")
    ran = nbformat.read(executed, as_version=4)
    where = "" if shape is None else (
        f" (run CUDA-shaped: {shape[0]} GPU(s), {shape[1]} usable core(s), records as a CUDA "
        "run's; tests/cuda_shape.py)")
    found = problems(ran, notebook.stem)
    assert not found, f"{notebook.relative_to(ROOT / 'notebooks')}{where}:\n  " + "\n  ".join(found)
    if notebook == ZH_08:
        found = english_lines(ran)
        assert not found, f"{notebook.name} printed English sentences: {found[:20]}"


def problems(ran: nbformat.NotebookNode, stem: str) -> list[str]:
    """What is wrong in an executed augmented notebook: the lesson's cells' problems
    (tests/lesson_outputs.py, each named "cell N" as the lesson's readers count), then each
    error of a cell the test added (named by the lesson cell it follows)."""
    seen = output_problems(ran, on_purpose=SHOWN_ON_PURPOSE.get(stem, {}),
                           cell_of=lambda _, cell: cell.metadata.get("lesson_cell"))
    return seen + [f"{added_cell_name(ran, i)}: {out['ename']}: {out['evalue'][:300]}"
                   for i, cell in enumerate(ran.cells) if cell.cell_type == "code"
                   and cell.metadata.get("lesson_cell") is None
                   for out in cell.get("outputs", []) if out["output_type"] == "error"]


def added_cell_name(nb: nbformat.NotebookNode, index: int) -> str:
    """A cell the test added, named by the lesson's cell it follows."""
    cell = nb.cells[index]
    before = [c.metadata.get("lesson_cell") for c in nb.cells[:index]
              if c.metadata.get("lesson_cell") is not None]
    added = "the published solution" if "the published solution" in cell.source[:80] else \
        "the wrong answer" if "a wrong answer" in cell.source[:80] else "the test's check"
    return (f"{added} the test runs after cell {before[-1]}" if before
            else "the test's setup cell")


if __name__ == "__main__":   # write the augmented copies, to open and run them by hand
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpututor-exercises")
    out.mkdir(parents=True, exist_ok=True)
    for notebook in NOTEBOOKS:
        nbformat.write(augmented(nbformat.read(notebook, as_version=4), WRONG[notebook.stem]),
                       out / notebook.name)
        print("wrote", out / notebook.name)
