"""Simplified Chinese for what the widgets, figures and checkers show (English template ->
Chinese). The terms follow the glossary of the Chinese lessons (``notebooks/zh/术语表.md``)."""

ZH = {
    # the run panel (ui/panel.py)
    "Run": "运行",
    "Stop": "停止",
    "ready": "就绪",
    "starting": "启动中",
    "running": "运行中",
    "finished": "已完成",
    "failed": "失败",
    "invalid": "输入有误",
    "stopping": "正在停止",
    "stopped": "已停止",
    "press Run (worker processes are warming up meanwhile)": "点击“运行”（工作进程正在预热）",
    "starting {n} rank(s) on {device} ({why})...": "正在 {device} 上启动 {n} 个进程（rank）（{why}）……",
    "step {step} of {steps}": "第 {step} 步，共 {steps} 步",
    "ending every rank...": "正在结束所有进程……",
    "after {steps} complete steps; every rank has ended": "已完成 {steps} 步；所有进程均已结束",
    "could not start: {error}": "无法启动：{error}",
    "the panel could not draw: {error}": "面板无法绘图：{error}",
    "{strategy} on {n} rank(s), {model} {size}, global batch {batch}":
        "{strategy}，{n} 个进程，{model} {size}，全局批大小 {batch}",
    "loss (mean over ranks)": "损失（各进程平均）",
    "tokens/s of each rank": "各进程的 tokens/s",
    "memory per rank (MB)": "各进程显存/内存（MB）",
    "last step per rank (ms)": "各进程最近一步耗时（ms）",
    "loss": "损失",
    "step": "步数",
    "compute": "计算",
    "waiting for communication": "等待通信",
    "waiting for communication (EMULATED link)": "等待通信（模拟链路）",
    "rank {rank}": "进程 {rank}",
    "rank {rank} tokens/s": "进程 {rank} 的 tokens/s",
    # the exercise checkers (lessons/exercises.py)
    "{what}: not answered yet. Replace ... with your answer and run the cell again.":
        "{what}：尚未作答。请把 ... 换成你的答案，然后重新运行本单元。",
    "{what}: this notebook has not measured it yet (did every cell above run and finish?): nothing to compare your answer with.":
        "{what}：本笔记本还没有测出这个量（上面的单元都运行完了吗？），无法与你的答案比较。",
    "{what}: {answer} is not what this notebook measured. Try again.":
        "{what}：{answer} 与本笔记本测得的结果不符。请再试一次。",
    "Correct. {what}: {number} (measured: {expected})": "正确。{what}：{number}（实测：{expected}）",
    "{what}: not answered yet. Replace ... with a list of names and run the cell again.":
        "{what}：尚未作答。请把 ... 换成一个名称列表，然后重新运行本单元。",
    "{what}: {answer} is not a list of names. Try again.": "{what}：{answer} 不是名称列表。请再试一次。",
    "{what}: {given} is not it ({right} of yours are right, {missing} missing). Try again.":
        "{what}：{given} 不对（其中 {right} 个正确，缺少 {missing} 个）。请再试一次。",
    "Correct. {what}: {names}": "正确。{what}：{names}",
    "Not answered yet: define my_update and run the cell again.": "尚未作答：请定义 my_update，然后重新运行本单元。",
}
