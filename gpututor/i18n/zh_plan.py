"""Simplified Chinese for what the planner says (``gpututor/plan``): an estimate's reasons, a
recommendation's notes and the header of its table (English template -> Chinese)."""

PLAN = {
    # ---- an estimate's reasons (plan/recommend.py) ---------------------------------------------
    "precision: {gpu} has no bf16, so this plans fp16 with loss scaling (the same 2 bytes per "
    "value; fp16's narrow range needs a loss scaler, lesson 06)":
        "精度：{gpu} 不支持 bf16，所以这里按 fp16 加损失缩放来规划（每个值同样是 2 字节；"
        "fp16 的数值范围窄，需要损失缩放，见第 06 课）",
    "fits in memory: per GPU parameters {params}, gradients {grads}, optimizer {optimizer}, "
    "activations {activations}: {total} of {usable} usable ({memory} x {share})":
        "显存放得下：每个 GPU 上参数 {params}，梯度 {grads}，优化器状态 {optimizer}，"
        "激活值 {activations}：共 {total}，可用 {usable}（{memory} x {share}）",
    "does not fit in memory: per GPU parameters {params}, gradients {grads}, optimizer "
    "{optimizer}, activations {activations}: {total} of {usable} usable ({memory} x {share})":
        "显存放不下：每个 GPU 上参数 {params}，梯度 {grads}，优化器状态 {optimizer}，"
        "激活值 {activations}：共 {total}，可用 {usable}（{memory} x {share}）",
    "why it does not fit: the model states alone ({states}) exceed the GPU; shard them (a higher "
    "ZeRO stage), add GPUs, or split the model (tensor/pipeline parallel)":
        "放不下的原因：仅模型状态（{states}）就超过了 GPU；可以把它们分片（更高的 ZeRO 阶段）、"
        "增加 GPU，或者切分模型（张量并行/流水线并行）",
    "why it does not fit: the model states alone ({states}) exceed the GPU; add GPUs, or split "
    "the model (tensor/pipeline parallel)":
        "放不下的原因：仅模型状态（{states}）就超过了 GPU；可以增加 GPU，或者切分模型"
        "（张量并行/流水线并行）",
    "why it does not fit: activations ({activations}) push it over; use recomputation, a smaller "
    "micro-batch, or tensor/pipeline parallel":
        "放不下的原因：激活值（{activations}）让它超出；可以用激活重计算、更小的微批次，"
        "或者张量并行/流水线并行",
    " (if it fitted: it does not)": "（假如放得下的话：实际放不下）",
    ", pipeline bubble {bubble:.3g} s": "，流水线气泡 {bubble:.3g} s",
    "step: compute {compute:.3g} s, waiting on links {comm:.3g} s{bubble}; {steps:,} steps = "
    "{days:,.1f} days{unfit}":
        "单步：计算 {compute:.3g} s，等待链路 {comm:.3g} s{bubble}；{steps:,} 步 = "
        "{days:,.1f} 天{unfit}",
    "link-bound: {share:.0%} of each step waits on communication, most of it {kind} traffic over "
    "{link}; more GPUs would not help much, a faster link would":
        "受限于链路：每一步有 {share:.0%} 的时间在等待通信，其中大部分是经过 {link} 的{kind}流量；"
        "增加 GPU 帮助不大，更快的链路才有用",
    "tensor-parallel": "张量并行",
    "pipeline": "流水线并行",
    "data-parallel": "数据并行",
    "cost: {cost} at {price}/GPU-hour ({source}){unfit}":
        "成本：{cost}，按每 GPU 小时 {price} 计（{source}）{unfit}",
    "cost: {source}": "成本：{source}",
    "cost: not priced ({source})": "成本：未定价（{source}）",
    "sequence parallel with tensor parallel (the layer norms' and dropouts' activations split "
    "over the tensor-parallel GPUs), ":
        "张量并行时使用序列并行（层归一化和 dropout 的激活值分到张量并行的各个 GPU 上），",
    "causal attention (half the s×s square)": "因果注意力（s×s 方阵的一半）",
    "full s×s attention": "完整的 s×s 注意力",
    "assumed: {hfu:.0%} of peak on all it computes (HFU; MFU of the step {mfu:.0%}), "
    "{tokens:,.0f} tokens per step, links at {efficiency:.0%} of their rate, {overlap:.0%} of "
    "backward hiding data-parallel traffic, {parallel}{attention}":
        "假设：全部计算达到峰值的 {hfu:.0%}（HFU；这一步的 MFU 为 {mfu:.0%}），"
        "每步 {tokens:,.0f} 个 token，链路达到其速率的 {efficiency:.0%}，数据并行的通信有 "
        "{overlap:.0%} 与反向传播重叠，{parallel}{attention}",

    # ---- a recommendation's table and notes (plan/ranking.py) ----------------------------------
    "cost {symbol}": "成本 {symbol}",
    "GB/GPU": "GB/GPU",
    "meets": "达标",
    "({count} GPU counts and links where no layout fits are left out: see the notes)":
        "（有 {count} 种 GPU 数与链路的组合没有放得下的布局，未列出：见说明）",
    "{gpu} has no bf16: planned in {planned} with loss scaling (asked for {asked})":
        "{gpu} 不支持 bf16：按 {planned} 加损失缩放规划（要求的是 {asked}）",
    "nothing tried fits in memory: try more GPUs or a GPU with more memory":
        "试过的配置都放不下：请尝试更多 GPU，或显存更大的 GPU",
    "nothing tried fits in memory; even {count} GPU needs {need:,.0f} GB per GPU of {usable:,.0f} "
    "usable: try more GPUs or a GPU with more memory":
        "试过的配置都放不下；即使 {count} 张 GPU，每张也需要 {need:,.0f} GB，而可用的只有 "
        "{usable:,.0f} GB：请尝试更多 GPU，或显存更大的 GPU",
    "nothing tried fits in memory; even {count} GPUs need {need:,.0f} GB per GPU of {usable:,.0f} "
    "usable: try more GPUs or a GPU with more memory":
        "试过的配置都放不下；即使 {count} 张 GPU，每张也需要 {need:,.0f} GB，而可用的只有 "
        "{usable:,.0f} GB：请尝试更多 GPU，或显存更大的 GPU",
    "one GPU is enough: {label} fits and takes {days:,.1f} days for {cost}; more GPUs only buy "
    "time":
        "单卡就够了：{label} 放得下，需要 {days:,.1f} 天，花费 {cost}；多卡只是用钱换时间",
    "one GPU is enough: {label} fits and takes {days:,.1f} days; more GPUs only buy time":
        "单卡就够了：{label} 放得下，需要 {days:,.1f} 天；多卡只是用钱换时间",
    "one GPU fits ({label}) but misses the deadline or budget: {days:,.1f} days":
        "单卡放得下（{label}），但达不到期限或预算：{days:,.1f} 天",
    "{gpu}: the model does not fit on one GPU; the smallest count that fits is {count}":
        "{gpu}：单卡放不下这个模型；放得下的最少 GPU 数是 {count}",
    "every configuration listed fits in its GPU's usable memory; {count} GPU counts and links "
    "where none fits are left out":
        "列出的每个配置都放得进其 GPU 的可用显存；有 {count} 种 GPU 数与链路的组合一个都放不下，未列出",
    "the smallest cluster that meets the deadline and budget: {label} ({days:,.1f} days, {cost})":
        "满足期限和预算的最小集群：{label}（{days:,.1f} 天，{cost}）",
    "the smallest cluster that meets the deadline and budget: {label} ({days:,.1f} days)":
        "满足期限和预算的最小集群：{label}（{days:,.1f} 天）",
    "no configuration meets the deadline and budget: the fastest and cheapest that fit are shown":
        "没有配置同时满足期限和预算：列出的是放得下的配置中最快、最便宜的",
    "no configuration meets the deadline: the fastest and cheapest that fit are shown":
        "没有配置满足期限：列出的是放得下的配置中最快、最便宜的",
    "no configuration meets the budget: the fastest and cheapest that fit are shown":
        "没有配置满足预算：列出的是放得下的配置中最快、最便宜的",
    "no configuration meets the constraints: the fastest and cheapest that fit are shown":
        "没有配置满足约束：列出的是放得下的配置中最快、最便宜的",
    "{gpus}: not priced, so the budget cannot be checked and none of its layouts counts as "
    "meeting it; give a price (catalog.set_price or price_per_hour) to rank it":
        "{gpus}：未定价，所以无法核对预算，它的布局都不算满足预算；给出价格"
        "（catalog.set_price 或 price_per_hour）后才能参与排名",
    "link-bound: {label} waits on communication most of each step; a faster link would speed it "
    "up more than more GPUs":
        "受限于链路：{label} 每一步的大部分时间都在等待通信；更快的链路比更多的 GPU 更能提速",
    # plan/recommend.py Config.shown: the configuration's line in the tables and notes
    "selective recompute": "选择性重计算",
    "full recompute": "完全重计算",
    "micro-batch {n}": "微批次 {n}",
    # catalog.py: where the example prices come from (a source shown beside a cost; tr(source))
    "example: middle of the specialty-cloud on-demand range, mercatus-ai.com 'Cloud GPU pricing' "
    "(May 2026); set your own":
        "示例价格：专业云按需价格区间的中间值，来源 mercatus-ai.com “Cloud GPU pricing”（2026 年 5 月）；请换成你自己的价格",
    "example: middle of the one-GPU on-demand listings ($0.35, $0.53), computeprices.com 'Tesla T4 "
    "GPU' (checked 8 April 2026); set your own":
        "示例价格：单卡按需报价（$0.35、$0.53）的中间值，来源 computeprices.com “Tesla T4 GPU”"
        "（2026 年 4 月 8 日查阅）；请换成你自己的价格",
    "not priced: no citable V100 list price found (aimultiple.com 'Cloud GPU Rental Price Index', "
    "20 May 2026: the V100 is leaving the price sheets); pass price_per_hour or set_price":
        "未定价：找不到可引用的 V100 标价（aimultiple.com “Cloud GPU Rental Price Index”，2026 年 5 月 20 日："
        "V100 正在退出各家的价格表）；请传入 price_per_hour 或调用 set_price",
    "not priced: no price known; pass price_per_hour": "未定价：不知道价格；请传入 price_per_hour",
}
