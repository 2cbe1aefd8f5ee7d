"""JupyterLab served on 127.0.0.1 and driven in Debian's Chromium: the machinery of the browser
tests (tests/test_browser.py) and of the live view's benchmark (benchmarks/bench_live_view.py).

Everything Jupyter, IPython, XDG and npm write goes to a temp folder; the server has a token and a
port the OS picks; ``LabServer.close`` ends it and every process it started.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "00_start_here.ipynb"
CHROMIUM = Path(os.environ.get("GPUTUTOR_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--disable-dev-shm-usage", "--no-first-run", "--disable-gpu"]


def isolated_jupyter_env(base: Path) -> dict[str, str]:
    """HOME and every Jupyter/XDG/npm folder inside ``base``, so a test that starts JupyterLab
    writes nothing else."""
    dirs = {"HOME": "home", "JUPYTER_CONFIG_DIR": "jupyter/config",
            "JUPYTER_DATA_DIR": "jupyter/data", "JUPYTER_RUNTIME_DIR": "jupyter/runtime",
            "IPYTHONDIR": "ipython", "JUPYTERLAB_SETTINGS_DIR": "lab/settings",
            "JUPYTERLAB_WORKSPACES_DIR": "lab/workspaces", "npm_config_cache": "npm",
            "XDG_CONFIG_HOME": "xdg/config", "XDG_CACHE_HOME": "xdg/cache",
            "XDG_DATA_HOME": "xdg/data", "XDG_RUNTIME_DIR": "xdg/runtime"}
    env = dict(os.environ)
    for name, sub in dirs.items():
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(base / sub)
    os.chmod(base / "xdg/runtime", 0o700)
    env.pop("JUPYTER_PATH", None)   # keep only this environment's extensions (widgets, plotly)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_lab_settings(settings_dir: Path) -> None:
    """No news prompt; every cell attached to the DOM so a locator finds any of them."""
    for plugin, values in {"apputils-extension/notification": {"fetchNews": "false"},
                           "notebook-extension/tracker": {"windowingMode": "none"}}.items():
        path = settings_dir / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


class LabServer:
    """``jupyter lab`` on 127.0.0.1 with a token; :meth:`close` ends it and all it started."""

    def __init__(self, base: Path, notebook: Path = NOTEBOOK):
        self.base, self.token = base, secrets.token_hex(16)
        self.env = isolated_jupyter_env(base)
        write_lab_settings(Path(self.env["JUPYTERLAB_SETTINGS_DIR"]))
        self.root = base / "root"
        # e.g. notebooks/zh/00_start_here.ipynb; a notebook outside the repository: its name
        self.notebook = notebook.relative_to(ROOT) if notebook.is_relative_to(ROOT) \
            else Path(notebook.name)
        (self.root / self.notebook).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(notebook, self.root / self.notebook)
        self.log_path = base / "server.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 60.0) -> float:
        """Start the server; return the seconds until it answered."""
        command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
                   "--ServerApp.port=0", "--ServerApp.port_retries=0",
                   f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                   "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if os.geteuid() == 0:
            command.append("--allow-root")
        started = time.monotonic()
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(command, cwd=self.root, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        runtime = Path(self.env["JUPYTER_RUNTIME_DIR"])
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n"
                                   + self.log_path.read_text()[-3000:])
            info = runtime / f"jpserver-{self.proc.pid}.json"
            if info.exists():
                try:
                    port = json.loads(info.read_text())["port"]
                    self.url = f"http://127.0.0.1:{port}"
                    urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=5)
                    return time.monotonic() - started
                except (ValueError, KeyError, OSError):
                    pass  # written half, or not answering yet
            time.sleep(0.1)
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n"
                           + self.log_path.read_text()[-3000:])

    def close(self) -> None:
        """SIGTERM (the server shuts its kernels down), then kill whatever of its tree is left."""
        if self.proc is None:
            return
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        _, alive = psutil.wait_procs(tree, timeout=10)
        for proc in alive:  # only processes this server started, by pid
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        self.log.close()


def cjk_font() -> str | None:
    """The font family fontconfig gives Simplified Chinese, if it is a CJK font."""
    try:
        family = subprocess.run(["fc-match", "-f", "%{family}", ":lang=zh-cn"], capture_output=True,
                                text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return family if "CJK" in family or "WenQuanYi" in family else None


def browser_can_run() -> bool:
    """Debian's Chromium is here (Playwright is in the test extra): tests/test_browser.py runs."""
    return os.access(CHROMIUM, os.X_OK)


def launch_chromium(pw, server: LabServer, home: Path):
    """Debian's Chromium, headless, with its own profile and HOME under ``home``; returns the
    Playwright context and its page."""
    context = pw.chromium.launch_persistent_context(
        user_data_dir=str(home / "profile"), executable_path=str(CHROMIUM), headless=True,
        viewport={"width": 1400, "height": 1000}, env={**server.env, "HOME": str(home)},
        args=CHROMIUM_ARGS)
    return context, (context.pages[0] if context.pages else context.new_page())


def open_notebook(page, server: LabServer) -> None:
    """Open the server's notebook and wait until its kernel is Idle (before "Run All Cells")."""
    page.goto(f"{server.url}/lab/tree/{server.notebook.as_posix()}?reset&token={server.token}")
    kernel_idle(page, timeout_ms=120_000)


def kernel_idle(page, timeout_ms: float) -> None:
    page.locator("#jp-main-statusbar").get_by_text("Idle").first.wait_for(timeout=timeout_ms)


def run_all_cells(page, timings: dict):
    """Run All Cells from the Run menu; wait until every code cell ran; return the code cells."""
    run_all = time.monotonic()
    page.locator(".lm-MenuBar-item").get_by_text("Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Every code cell has an execution count once all ran: no "[*]" and no "[ ]" is left.
    code_cells = page.locator(".jp-Notebook .jp-CodeCell")
    prompts = code_cells.locator(".jp-InputArea-prompt")
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                          ).filter(has_text="Traceback")
    deadline = time.monotonic() + 480
    while True:
        assert errors.count() == 0, f"a cell raised: {errors.first.inner_text()[:2000]}"
        texts = prompts.all_inner_texts()
        if texts and all(t.strip() not in ("[*]:", "[ ]:", "") for t in texts):
            break
        assert time.monotonic() < deadline, f"the notebook did not finish running: {texts}"
        page.wait_for_timeout(250)
    kernel_idle(page, timeout_ms=60_000)
    # once more, now that all ran: the last cell's traceback may be drawn after its prompt
    page.wait_for_timeout(500)
    assert errors.count() == 0, f"a cell raised: {errors.first.inner_text()[:2000]}"
    timings["run_all_cells_s"] = round(time.monotonic() - run_all, 2)
    return code_cells
