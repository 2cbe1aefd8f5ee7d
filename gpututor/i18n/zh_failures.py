"""Simplified Chinese for lesson 12 (failures at scale): the sentences it prints with ``say()``,
its figures (``gpututor/lessons/failures_at_scale/figures.py``) and its exercise checkers
(``gpututor/lessons/failures_at_scale/exercises.py``)."""

FAILURES = {
    # ---- the lesson's printed sentences -------------------------------------------------------
    "{name:>7}: each rank wrote {per_rank} MB, {total_mb:.1f} MB in all (the whole state: "
    "{state_mb:.1f} MB); a save took {save_s:.2f} s, training waited {blocked_s:.2f} s of it "
    "(median training step: {step_s:.2f} s)":
        "{name:>7}：每个进程写了 {per_rank} MB，共 {total_mb:.1f} MB（完整状态：{state_mb:.1f} MB）；"
        "一次保存用了 {save_s:.2f} s，其中训练等待了 {blocked_s:.2f} s（训练步的中位数：{step_s:.2f} s）",
    "tp on 2 ranks, from fsdp's step 2": "2 个进程上的 tp，从 fsdp 第 2 步的检查点继续",
    "one process, from tp's step 4": "单进程，从 tp 第 4 步的检查点继续",
    "{label}: steps {first} to {last} equal the uninterrupted fsdp run's losses within "
    "rtol 1e-5 (largest relative difference {worst:.1e})":
        "{label}：第 {first} 到 {last} 步的损失与未中断的 fsdp 运行在 rtol 1e-5 内相等"
        "（最大相对差异 {worst:.1e}）",
    "{label}: steps {first} to {last} differ from the uninterrupted fsdp run's losses "
    "(largest relative difference {worst:.1e}, above rtol 1e-5)":
        "{label}：第 {first} 到 {last} 步的损失与未中断的 fsdp 运行不同"
        "（最大相对差异 {worst:.1e}，超过 rtol 1e-5）",
    "rank {rank} failed at step {step} ({error}); the run restarted from the checkpoint of step "
    "{resumed} and finished its {steps} steps in {attempts} attempts":
        "进程 {rank} 在第 {step} 步失败（{error}）；运行从第 {resumed} 步的检查点重启，"
        "共 {attempts} 次尝试完成了全部 {steps} 步",
    "from step {start} on, the losses equal the uninterrupted ddp run's (section 1) within rtol "
    "1e-5 (largest relative difference {worst:.1e})":
        "从第 {start} 步起，损失与未中断的 ddp 运行（第 1 节）在 rtol 1e-5 内相等"
        "（最大相对差异 {worst:.1e}）",
    "from step {start} on, the losses differ from the uninterrupted ddp run's (section 1): largest "
    "relative difference {worst:.1e}, above rtol 1e-5":
        "从第 {start} 步起，损失与未中断的 ddp 运行（第 1 节）不同：最大相对差异 {worst:.1e}，"
        "超过 rtol 1e-5",
    "Llama 3: {unexpected} unexpected interruptions in {days} days on {gpus:,} GPUs = {rate:.2e} "
    "per GPU-hour: one GPU fails every {years:.1f} years on average":
        "Llama 3：{gpus:,} 张 GPU 上 {days} 天内 {unexpected} 次意外中断 = 每 GPU 小时 {rate:.2e} 次："
        "平均每张 GPU 每 {years:.1f} 年故障一次",
    "{n:>6,} GPUs: the job fails every {hours:,.1f} hours on average":
        "{n:>6,} 张 GPU：作业平均每 {hours:,.1f} 小时故障一次",
    "measured here: a rank saved {mb:.2f} MB in {seconds:.2f} s ({rate_mb:.1f} MB/s); at that rate "
    "4 GB take {save:,.0f} s":
        "本机实测：一个进程在 {seconds:.2f} s 内保存了 {mb:.2f} MB（{rate_mb:.1f} MB/s）；"
        "按这个速率，4 GB 需要 {save:,.0f} s",
    "{n:>6,} GPUs: Young's interval {hours:,.1f} h (Daly's: {daly:,.1f} h); at it "
    "{lost:,.1f} GPU-hours lost per day, {share:.1%} of the job; saving every hour instead: "
    "{hourly:,.1f}":
        "{n:>6,} 张 GPU：Young 间隔 {hours:,.1f} 小时（Daly 间隔：{daly:,.1f} 小时）；按此间隔每天损失 "
        "{lost:,.1f} GPU 小时，占作业的 {share:.1%}；若改为每小时保存一次：{hourly:,.1f}",
    "synchronous, at the rate measured here": "同步保存，按本机实测速率",
    "asynchronous, at the rate measured here": "异步保存，按本机实测速率",
    "synchronous, at Llama 3's sustained 2 TB/s": "同步保存，按 Llama 3 存储的持续 2 TB/s",
    "16,384 GPUs, {how}: saves block {delta:,.0f} s, Young's interval {minutes:,.0f} min, "
    "{lost:,.0f} GPU-hours lost per day ({share:.1%})":
        "16,384 张 GPU，{how}：每次保存阻塞 {delta:,.0f} s，Young 间隔 {minutes:,.0f} 分钟，"
        "每天损失 {lost:,.0f} GPU 小时（{share:.1%}）",
    "The run finished: rank 1 did not hang (unexpected).": "运行正常结束：进程 1 没有挂起（出乎意料）。",
    "the run ended {seconds:.1f} s after it started (timeout={timeout:g} s); the report names "
    "rank {rank}, step {step}:":
        "运行在启动 {seconds:.1f} s 后结束（timeout={timeout:g} s）；报告指出的是进程 {rank}、第 {step} 步：",
    # ---- its figures (gpututor/lessons/failures_at_scale/figures.py) ------------------------------------------------
    "What a checkpoint cost, per layout (measured)": "一次检查点的开销，按布局（实测）",
    "MB written by each rank (one save)": "每个进程写入的 MB（一次保存）",
    "seconds per save (slowest rank)": "每次保存的秒数（最慢的进程）",
    "the whole save": "整个保存",
    "training blocked": "训练被阻塞",
    "One run, continued in other layouts": "同一次运行，在其他布局中继续",
    "uninterrupted": "未中断",
    "GPU-hours lost per day against the checkpoint interval (a formula)":
        "每天损失的 GPU 小时与检查点间隔的关系（公式）",
    "{n:,} GPUs": "{n:,} 张 GPU",
    "{n:,} GPUs: Young's interval {hours:.2g} h": "{n:,} 张 GPU：Young 间隔 {hours:.2g} 小时",
    "hours between checkpoints": "两次检查点之间的小时数",
    "GPU-hours lost per day": "每天损失的 GPU 小时",
    # ---- its checkers (gpututor/lessons/failures_at_scale/exercises.py) --------------------------------
    "Young's interval for 2,048 GPUs and saves that block 45 s, in seconds":
        "2,048 张 GPU、每次保存阻塞训练 45 s 时的 Young 间隔（秒）",
    "GPU-hours lost per day: not answered yet. Define your function and pass it in.":
        "每天损失的 GPU 小时：尚未作答。请定义你的函数并把它传进来。",
    "GPU-hours lost per day: your function called the package's formula "
    "(gpututor.plan.failures): write it yourself.":
        "每天损失的 GPU 小时：你的函数调用了本软件包的公式（gpututor.plan.failures）：请自己写出来。",
    "interval {interval:g} s, save {save:g} s, MTBF {mtbf:,.0f} s, {n:,} GPUs, restart {restart:g} s":
        "间隔 {interval:g} s、保存 {save:g} s、MTBF {mtbf:,.0f} s、{n:,} 张 GPU、重启 {restart:g} s",
    "GPU-hours lost per day: for {where} your function returned {got!r}, not a number.":
        "每天损失的 GPU 小时：对于{where}，你的函数返回了 {got!r}，不是一个数。",
    "GPU-hours lost per day: for {where} yours gives {got:,.4g}, not the formula's value. Count "
    "the three costs: the saves (save time per interval), half an interval of work and the "
    "restart per failure; then all the GPUs for 24 hours.":
        "每天损失的 GPU 小时：对于{where}，你的结果是 {got:,.4g}，不是公式给出的值。请数清三项开销："
        "保存（每个间隔的保存时间），以及每次故障损失的半个间隔的工作和重启时间；再乘以所有 GPU 的 24 小时。",
    "Correct: your function gives the formula's GPU-hours lost per day on {n} jobs.":
        "正确：你的函数在 {n} 个作业上给出了与公式相同的每天损失 GPU 小时数。",
}
