"""Lesson 09's planner figure: a layout not run has no measured bar (None, never 0), and each
predicted bar is labelled by the planner's own verdict."""
from gpututor.lessons.composing_parallelisms.figures import prediction_figure


def test_prediction_figure_shows_what_was_run_and_the_verdicts():
    rows = [{"layout": "ddp", "mesh": {"dp": 4}, "total": 30e6, "fits": False},
            {"layout": "fsdp", "mesh": {"dp": 4}, "total": 10e6, "fits": True}]
    fig = prediction_figure(rows, {"fsdp": {"peak_mem_bytes": [8e6, 9e6, 8e6, 8e6]}}, 20e6)
    predicted, measured = fig.data
    assert list(predicted.x) == ["ddp dp4", "fsdp dp4"]
    assert list(predicted.y) == [30.0, 10.0]
    assert list(predicted.text) == ["does not fit", "fits"]
    assert list(measured.y) == [None, 9.0]            # ddp not run: no bar; fsdp: its largest rank
    lines = sorted(shape.y0 for shape in fig.layout.shapes)
    assert lines == [16.0, 20.0]                      # the planner's 80 % and the capacity


def test_out_of_memory_words_speak_the_errors_fields_in_chinese_only():
    from gpututor.i18n import set_language
    from gpututor.lessons.composing_parallelisms.results import out_of_memory_words
    from gpututor.measure.capacity import DeviceOutOfMemory
    from gpututor.runtime.failures import RunFailed
    error = DeviceOutOfMemory(1, 3, "backward", 50_000_000, 40_000_000, 40_000_000,
                              {"params": 10_000_000, "grads": 10_000_000, "optimizer": 20_000_000})
    failure = RunFailed(f"rank 1 failed at step 3: DeviceOutOfMemory: {error}", 1, error=error)
    assert out_of_memory_words(failure) is None   # English: the error's message says it
    assert out_of_memory_words(RunFailed("rank 0 exited with code 9", 0)) is None
    try:
        set_language("zh")
        words = out_of_memory_words(failure)
        assert words.startswith("进程 1 在第 3 步（反向环节）显存不足")
        assert "50.0 MB" in words and "40.0 MB" in words and "优化器状态 20.0 MB" in words
        assert "其他张量 10.0 MB" in words
        assert out_of_memory_words(RunFailed("rank 0 exited with code 9", 0)) is None
    finally:
        set_language("en")
