"""Simplified Chinese for what the persistent ranks (``%%ranks``, ``gpututor.ranks``) say."""

RANKS = {
    "{n} ranks started on {device} in {seconds:.2f} s: run a cell on them with %%ranks.":
        "{n} 个进程已在 {device} 上启动，用时 {seconds:.2f} s：用 %%ranks 在它们上运行单元格。",
    "The ranks are stopped: no process or temp file of theirs is left.":
        "进程已停止：它们的进程和临时文件都没有留下。",
    "The group was restarted ({n} fresh ranks, in {seconds:.1f} s); every rank's names are gone.":
        "进程组已重启（{n} 个新进程，用时 {seconds:.1f} s）；每个进程中的变量都已丢失。",
    "The ranks are not running: start them with %ranks start N or gpututor.ranks(N).":
        "进程没有在运行：用 %ranks start N 或 gpututor.ranks(N) 启动它们。",
    "The ranks are not running.": "进程没有在运行。",
    "error": "出错",
    "still waiting": "仍在等待",
    "interrupted": "已中断",
    "died": "已退出",
    "alive": "运行中",
    "gone": "已退出",
    "The cell did not end within timeout={timeout:g} s: ranks {waiting} were still waiting (a "
    "collective that not every rank called waits forever); ranks that finished: {finished}.":
        "单元格没有在 timeout={timeout:g} s 内结束：进程 {waiting} 仍在等待（不是每个进程都调用的"
        "集合通信会永远等下去）；已完成的进程：{finished}。",
    "rank {rank} is waiting here (innermost first):": "进程 {rank} 在这里等待（最内层在前）：",
    "rank {rank} died during the cell ({why}).": "进程 {rank} 在运行单元格时退出了（{why}）。",
    "Interrupted: ranks {stuck} did not stop within {grace:g} s (a rank waiting inside a "
    "collective cannot be interrupted).":
        "已中断：进程 {stuck} 没有在 {grace:g} s 内停下（在集合通信中等待的进程无法被中断）。",
    "Interrupted: every rank stopped the cell and kept its names.":
        "已中断：每个进程都停止了这个单元格，并保留了自己的变量。",
    "The group was restarted ({n} fresh ranks, in {seconds:.1f} s). Lost: {gone}.":
        "进程组已重启（{n} 个新进程，用时 {seconds:.1f} s）。丢失的变量：{gone}。",
    "The group was restarted ({n} fresh ranks, in {seconds:.1f} s); no names were lost.":
        "进程组已重启（{n} 个新进程，用时 {seconds:.1f} s）；没有丢失变量。",
    "{n} ranks on {device} ({backend}), cells run: {cells}, started in {seconds:.2f} s":
        "{n} 个进程，在 {device} 上（{backend}），已运行单元格：{cells}，启动用时 {seconds:.2f} s",
    "rank {rank}: pid {pid}, {state}, names: {names}":
        "进程 {rank}：pid {pid}，{state}，变量：{names}",
    "Could not gather {name}: {failures}.": "无法收集 {name}：{failures}。",
    "its value cannot be sent ({error})": "它的值无法发送（{error}）",
    "its value cannot be read in the kernel ({error})": "它的值无法在内核中读取（{error}）",
    "it died ({why})": "它退出了（{why}）",
    "no answer within {timeout:g} s": "{timeout:g} s 内没有回应",
    "not defined": "未定义",
    "Interrupted while the ranks were sending {name}.": "进程发送 {name} 时被中断。",
}
