"""What a person sees in JupyterLab works: a real browser runs lesson 00 and watches the live plot.

The test starts JupyterLab on 127.0.0.1 (a token, a port the OS picks, every Jupyter folder and
HOME inside a temp folder, a copy of the notebook so nothing in the repository is written),
drives Debian's Chromium with Playwright for Python (``executable_path``, no browser download),
and then does what a learner does:

1. opens ``notebooks/00_start_here.ipynb``, waits for the status bar to say the kernel is Idle,
   and runs all cells from the Run menu;
2. presses the first panel's **Run** button and samples the live view's loss points from the
   DOM (``data-points`` of the ``.gpututor-live`` element) while the status line says the run
   is going: points must arrive during the run, not only at its end; then the panel's cost line
   must give the browser's own drawing time (the front end reported it back);
3. sets a long run, presses **Run**, then **Stop**, and reads "stopped" in the status line.

On failure a screenshot, the page's console and the server's log are saved in the artifacts
folder that the failure message names. Skipped (with the reason) where Chromium or Playwright is
missing; ``.ci/run`` installs both.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from jupyterlab_browser import (CHROMIUM, NOTEBOOK, ROOT, LabServer, cjk_font, launch_chromium,
                                open_notebook, run_all_cells)

PANEL_CELL = "panel = RunPanel(spec)"   # the code cell whose output is the first panel
LONG_RUN_STEPS = 100_000                # long enough that only Stop can end it
SAMPLE_EVERY_MS = 250   # reading the page costs the browser CPU that the ranks share
POLL_CEILING_S = 120  # how long a poll waits for an event before calling it a hang

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _playwright():
    # Playwright is in the test extra (tests/test_environment.py says so when it is missing);
    # only Debian's Chromium may be absent, as the README says.
    from playwright.sync_api import sync_playwright
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does this)")
    return sync_playwright


# ---- reading the page -----------------------------------------------------------------------

PLOT_POINTS_JS = """cell => {
    const view = cell.querySelector('.gpututor-live');
    return view && view.dataset.points !== undefined ? Number(view.dataset.points) : -1;
}"""


def _status_text(cell) -> str:
    """The panel's status line, e.g. 'running: step 4 of 30 on 2 ranks'."""
    return cell.locator(".widget-html-content").first.inner_text().strip()


def _sample(cell) -> tuple[str, int]:
    return _status_text(cell), cell.evaluate(PLOT_POINTS_JS)


def _watch_run(page, cell, until: set[str], timeout_s: float) -> list[tuple[float, str, int]]:
    """Sample (seconds, status state, plot points) until the status state is in ``until``."""
    start, samples = time.monotonic(), []
    while time.monotonic() - start < timeout_s:
        status, points = _sample(cell)
        state = status.split(":", 1)[0].strip()
        samples.append((round(time.monotonic() - start, 3), state, points))
        if state in until:
            return samples
        page.wait_for_timeout(SAMPLE_EVERY_MS)
    raise AssertionError(f"the panel's status did not reach {until} within {timeout_s} s; "
                         f"last samples: {samples[-10:]}")


def _press_run(page, cell, run_button) -> None:
    """Click Run and wait until the status line shows the new run (the old one said "finished")."""
    run_button.click()
    start = time.monotonic()
    # POLL_CEILING_S bounds a wait for an event (a hang is what it catches), not a speed: on a
    # busy 2-core machine a click took up to several seconds to reach the kernel
    while not _status_text(cell).startswith(("starting", "running")):
        assert time.monotonic() - start < POLL_CEILING_S, \
            f"Run did not start a run: {_status_text(cell)!r}"
        page.wait_for_timeout(20)


# ---- the test -------------------------------------------------------------------------------

def _in_browser(tmp_path: Path, notebook: Path, drive) -> dict:
    """Serve ``notebook`` with JupyterLab, open it in Chromium and call ``drive(page, server,
    timings)``; on failure save the artifacts and name them. Returns the timings."""
    sync_playwright = _playwright()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    server, timings, console = LabServer(tmp_path / "lab", notebook), {}, []
    page = None
    try:
        timings["server_up_s"] = server.start()
        with sync_playwright() as pw:
            context, page = launch_chromium(pw, server, tmp_path / "chromium")
            try:
                page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
                page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
                drive(page, server, timings)
            except BaseException:
                _save_artifacts(page, artifacts, server, console, timings)
                raise
            finally:
                context.close()
    except Exception as exc:
        if not any(artifacts.iterdir()):
            _save_artifacts(None, artifacts, server, console, timings)
        raise AssertionError(f"{exc}\n\nartifacts (screenshot, console, server log): "
                             f"{artifacts}") from exc
    finally:
        server.close()
    return timings


def with_exercises(notebook: Path, folder: Path) -> Path:
    """A copy of ``notebook`` with each exercise's published solution and a wrong answer added
    after its checker cell (``tests/test_exercises.py``'s augmented copy). Lesson 00 runs here
    that way, and not again under nbval: it executes once per language, and its checkers are
    proven in the browser (a wrong answer accepted raises, which fails Run All Cells)."""
    import nbformat
    from test_exercises import WRONG, augmented
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / notebook.name
    nbformat.write(augmented(nbformat.read(notebook, as_version=4), WRONG[notebook.stem]), path)
    return path


def test_lesson_00_in_a_real_browser(tmp_path: Path):
    timings = _in_browser(tmp_path, with_exercises(NOTEBOOK, tmp_path / "lesson"), _drive_lesson)
    print("browser test timings:", json.dumps(timings))


def test_a_chinese_lesson_in_a_real_browser(tmp_path: Path):
    """notebooks/zh/00 runs in the browser, and its panel's labels are Chinese, drawn with a CJK
    font (not boxes: .ci/run installs Debian's fonts-noto-cjk)."""
    font = cjk_font()
    if font is None:
        pytest.skip("no CJK font for Chinese (apt-get install fonts-noto-cjk; .ci/run does this)")

    def drive(page, server, timings):
        open_notebook(page, server)
        cell = run_all_cells(page, timings).filter(has_text=PANEL_CELL)
        assert cell.count() == 1, f"expected one cell with {PANEL_CELL!r}, found {cell.count()}"
        cell.scroll_into_view_if_needed()
        assert cell.locator("button.jupyter-button", has_text="运行").count() == 1
        assert cell.locator("button.jupyter-button", has_text="停止").count() == 1
        status = _status_text(cell)
        assert status.startswith("已完成"), f"the panel's status line is not Chinese: {status!r}"
        titles = cell.evaluate("c => [...c.querySelectorAll('.gpututor-live-title')]"
                               ".map(t => t.textContent)")
        assert "损失（各进程平均）" in titles, f"the plot's titles: {titles}"
        page.screenshot(path=str(tmp_path / "zh_panel.png"), full_page=False)

    timings = _in_browser(tmp_path, with_exercises(ROOT / "notebooks" / "zh" / NOTEBOOK.name,
                                                   tmp_path / "lesson"), drive)
    print(f"zh browser test ({font}) timings:", json.dumps(timings))


def _drive_lesson(page, server: LabServer, timings: dict) -> None:
    started = time.monotonic()
    # "Run All Cells" before the kernel is Idle opens a "Select Kernel" dialog and runs nothing.
    open_notebook(page, server)
    timings["page_to_kernel_idle_s"] = round(time.monotonic() - started, 2)

    code_cells = run_all_cells(page, timings)
    # the panels' speedup is set beside what the DDP panel's view used; under Run All the
    # browser's drawing time reaches the kernel only after the queued cells (said so)
    # (in the verdict's details: text_content reads them folded too)
    gap = code_cells.filter(has_text="view_gap_line(quiet").locator(".jp-OutputArea").text_content()
    assert re.search(r"CPU-s in the kernel( and [0-9.]+ s of drawing in the browser|, [0-9.]+% "
                     r"of 2 cores \(one per rank\) over the run's wall time. The browser's drawing time was not reported)",
                     gap), gap
    # the bad-input cell: launch refuses the spec before any rank starts, and says why
    refused = code_cells.filter(has_text="batch_size=33").locator(".jp-OutputArea").inner_text()
    assert "ValueError: batch_size=33 is invalid: allowed is a multiple of 2" in refused, refused
    timings["view_gap_line"] = next((line for line in gap.splitlines() if "panels' speedup" in
                                     line and "without a view" in line), gap)[:600]
    cell = code_cells.filter(has_text=PANEL_CELL)
    assert cell.count() == 1, f"expected one cell with {PANEL_CELL!r}, found {cell.count()}"
    cell.scroll_into_view_if_needed()
    run_button = cell.locator("button.jupyter-button", has_text="Run")
    stop_button = cell.locator("button.jupyter-button", has_text="Stop")
    steps_input = cell.locator(".widget-text", has_text="steps").locator("input")
    status, points = _sample(cell)
    assert status.startswith("finished"), f"the notebook's own run did not finish: {status!r}"
    steps = int(steps_input.input_value())
    assert points == steps, f"after Run All the loss plot has {points} points, expected {steps}"

    # 1. Run: points must reach the plot while the status line says the run is going.
    pressed = time.monotonic()
    _press_run(page, cell, run_button)
    samples = _watch_run(page, cell, {"finished", "failed", "stopped", "invalid"}, 180)
    timings["button_run_s"] = round(time.monotonic() - pressed, 2)
    final_state, final_points = samples[-1][1], samples[-1][2]
    assert final_state == "finished", f"the run ended {final_state}: {_status_text(cell)}"
    assert final_points == steps, f"the plot ended with {final_points} points, expected {steps}"
    live = sorted({p for _, state, p in samples if state == "running" and 0 < p < steps})
    first_live = next((t for t, state, p in samples if state == "running" and p > 0), None)
    timings["button_to_first_live_point_s"] = first_live
    timings["live_point_counts_seen"] = live
    assert len(live) >= 2, ("the live plot did not fill while the run was going (distinct "
                            f"point counts seen during 'running': {live}); samples: {samples}")
    cost_line = cell.locator(".widget-html-content").nth(1)
    start = time.monotonic()
    # the grey summary line (its details folded): "live view: x % of the run in the kernel,
    # drawing y %" once the front end has reported its drawing time, "drawing not measured" before
    while not re.search(r"live view: [0-9.]+ % of the run in the kernel, drawing [0-9.]+ %",
                        cost_line.inner_text()):
        assert time.monotonic() - start < POLL_CEILING_S, \
            f"no drawing time reported: {cost_line.inner_text()!r}"
        page.wait_for_timeout(200)
    assert "the browser's drawing code" in cost_line.text_content()   # the folded account
    timings["view_cost_line"] = cost_line.text_content().strip()

    # 2. Stop: a long run, stopped after some points arrived.
    steps_input.fill(str(LONG_RUN_STEPS))
    steps_input.press("Enter")      # an IntText sends its value on Enter (or on leaving it)
    page.wait_for_timeout(1000)     # the idle kernel has the new value before Run reads it
    _press_run(page, cell, run_button)
    start = time.monotonic()
    while True:
        status, points = _sample(cell)
        if status.startswith("running") and points >= 3:
            assert f"of {LONG_RUN_STEPS} " in status, f"not the long run: {status!r}"
            break
        assert not status.startswith(("finished", "failed", "invalid")), status
        assert time.monotonic() - start < POLL_CEILING_S, \
            f"the long run never drew 3 points: {status!r}"
        page.wait_for_timeout(SAMPLE_EVERY_MS)
    assert stop_button.is_enabled(), "Stop is disabled while a run is going"
    stop_pressed = time.monotonic()
    stop_button.click()
    samples = _watch_run(page, cell, {"finished", "failed", "stopped", "invalid"}, 60)
    timings["stop_to_stopped_s"] = round(time.monotonic() - stop_pressed, 2)
    status = _status_text(cell)
    assert status.startswith("stopped"), f"after Stop the status line says {status!r}"
    assert "every rank has ended" in status, status
    assert samples[-1][2] < LONG_RUN_STEPS
    assert run_button.is_enabled() and not stop_button.is_enabled()
    timings["total_s"] = round(time.monotonic() - started, 2)


def _save_artifacts(page, folder: Path, server: LabServer, console: list, timings: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if page is not None:
        try:
            page.screenshot(path=str(folder / "failure.png"), full_page=True)
            (folder / "page.html").write_text(page.content())
        except Exception as exc:  # noqa: BLE001 - the original failure matters more
            (folder / "screenshot-error.txt").write_text(repr(exc))
    (folder / "console.txt").write_text("\n".join(console))
    (folder / "timings.json").write_text(json.dumps(timings, indent=2))
    if server.log_path.exists():
        shutil.copy(server.log_path, folder / "server.log")


def test_the_gantt_and_expert_load_views_and_a_ranks_cell_draw_in_a_real_browser(tmp_path: Path):
    """Lesson 05's live Gantt chart (spans in rows) and lesson 11's expert load (bars and two
    line charts) drawn by the LiveFigure's canvases, not plotly.js: each chart reports what it
    drew (``data-points``: spans, bars or points). Then a ``%%ranks`` cell (lesson 03) on four
    live ranks shows four columns side by side, each with its own rank's value."""
    import nbformat
    lesson = nbformat.read(NOTEBOOK, as_version=4)
    nb = nbformat.v4.new_notebook(metadata=lesson.metadata)
    nb.cells = [nbformat.v4.new_code_cell(source) for source in (
        "from gpututor.ui.live_figure import LiveFigure\n"
        "from gpututor.lessons.mixture_of_experts.figures import expert_load_figure\n"
        "from gpututor.lessons.pipeline_parallel.figures import gantt",
        "events = {0: [('F', 0, 0.000, 0.010), ('F', 1, 0.010, 0.020), ('B', 0, 0.030, 0.050)],\n"
        "          1: [('F', 0, 0.010, 0.020), ('B', 0, 0.020, 0.030), ('F', 1, 0.030, 0.040)]}\n"
        "spans = LiveFigure()\n"
        "spans.show(gantt(events, 'Step 3', 0.25))\n"
        "spans",
        "records = [{'step': s, 'expert_tokens': [[5 + s, 3, 4, 4]], 'expert_dropped': [[s, 0, 0, 0]],\n"
        "            'comm_wire_bytes': 1e6 * s} for s in range(4)]\n"
        "load = LiveFigure()\n"
        "load.show(expert_load_figure(records))\n"
        "load",
        "%load_ext gpututor\n%ranks start 4",
        "%%ranks\nanswer = torch.tensor([10 * rank])\ndist.all_reduce(answer)\n(rank, answer.item())",
        "%ranks stop")]
    path = tmp_path / "views.ipynb"
    nbformat.write(nb, path)

    def drive(page, server, timings):
        open_notebook(page, server)
        run_all_cells(page, timings)
        views = page.locator(".gpututor-live")
        views.nth(1).wait_for(timeout=60_000)
        drawn = [views.nth(i).evaluate(
            "v => [...v.querySelectorAll('canvas')].map(c => Number(c.dataset.points))")
            for i in range(views.count())]
        assert drawn[0] == [6], f"the Gantt chart drew {drawn[0]} spans, not the 6 given"
        assert drawn[1] == [4, 4, 4], f"the expert load drew {drawn[1]}: 4 bars, 4 and 4 points"
        table = page.locator("table.gpututor-ranks")
        table.wait_for(timeout=60_000)
        heads = table.locator("th").all_inner_texts()
        columns = table.locator("td").all_inner_texts()
        assert [h.strip() for h in heads] == [f"rank {r}" for r in range(4)], heads
        assert [c.strip() for c in columns] == [f"({r}, 60)" for r in range(4)], columns
        page.screenshot(path=str(tmp_path / "views.png"), full_page=True)

    print("views timings:", json.dumps(_in_browser(tmp_path, path, drive)))


def test_run_all_cells_fails_when_a_cell_raises(tmp_path: Path):
    """What proves lesson 00's checkers in the browser: a wrong answer accepted raises, and Run
    All Cells must then fail, also when the raising cell is the last one (its traceback can be
    drawn after its prompt shows the count)."""
    import nbformat
    lesson = nbformat.read(NOTEBOOK, as_version=4)
    nb = nbformat.v4.new_notebook(metadata=lesson.metadata)
    nb.cells = [nbformat.v4.new_code_cell("print('fine')"), nbformat.v4.new_code_cell(
        "raise RuntimeError('my_answer: the checker accepted a wrong answer')")]
    path = tmp_path / "raises.ipynb"
    nbformat.write(nb, path)

    def drive(page, server, timings):
        open_notebook(page, server)
        with pytest.raises(AssertionError, match=r"(?s)a cell raised: .*the checker accepted"):
            run_all_cells(page, timings)

    _in_browser(tmp_path, path, drive)
