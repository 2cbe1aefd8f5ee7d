"""The CUDA-shaped lesson runs' parts (tests/cuda_shape.py, tests/test_exercises.py), without a
notebook: what a shaped record leaves unmeasured, and how a failure names the lesson's cell."""
import nbformat

from cuda_shape import shaped_record
from gpututor import RunSpec
from test_exercises import cuda_shaped, problems

RECORD = {"rank": 1, "step": 3, "step_time_s": 0.1, "comm_s": 0.02, "compute_s": 0.08,
          "mem_peak": 1000, "mem_allocator_peak": None, "device": "cpu"}


def test_a_shaped_record_is_a_cuda_ranks():
    fsdp = RunSpec(strategy="fsdp", world_size=2, device="cuda")
    shaped = shaped_record(fsdp, RECORD)
    assert (shaped["device"], shaped["comm_s"], shaped["compute_s"]) == ("cuda:1", None, None)
    assert shaped["mem_allocator_peak"] == 1000 and RECORD["comm_s"] == 0.02   # a copy
    ddp = shaped_record(RunSpec(strategy="ddp", world_size=2, device="cuda"), RECORD)
    assert (ddp["comm_s"], ddp["compute_s"]) == (0.02, 0.08)   # measured on CUDA too
    assert shaped_record(fsdp, {"step": 0, "op": "all_reduce"}) == {"step": 0, "op": "all_reduce"}


def test_a_failure_names_the_lessons_cell():
    cells = [nbformat.v4.new_markdown_cell("# lesson"), nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_code_cell("print(r['comm_s'] * 1e3)")]
    for index, cell in enumerate(cells):
        cell.metadata["lesson_cell"] = index
    added = nbformat.v4.new_code_cell("# added by tests/test_exercises.py: the published solution\n")
    nb = cuda_shaped(nbformat.v4.new_notebook(cells=cells + [added]), (8, 32))
    nb.cells[3].outputs = [nbformat.v4.new_output(
        "error", ename="TypeError", evalue="unsupported operand type(s) for *: 'NoneType' and 'float'",
        traceback=[])]
    nb.cells[4].outputs = [nbformat.v4.new_output("error", ename="AssertionError",
                                                  evalue="1 is not 2", traceback=[])]
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ImportError", evalue="no",
                                                  traceback=[])]
    assert problems(nb, "03_sharding") == [
        "cell 2: TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'",
        "the test's setup cell: ImportError: no",
        "the published solution the test runs after cell 2: AssertionError: 1 is not 2"]
