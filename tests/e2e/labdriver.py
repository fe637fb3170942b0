"""Drive a headless JupyterLab with Playwright in Debian's Chromium. Used by tests/e2e
(through conftest.py) and by bench/ui.py; it does not import pytest.

Everything waits on selectors or on server state (a bounded poll), never on a fixed sleep.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
JS_ERROR_TEXT = "Click to show javascript error"
LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"


class LabError(AssertionError):
    """Something the page or the server did wrong; an AssertionError so pytest reports it
    as a test failure."""


def missing_requirements() -> str:
    """What this machine lacks for driving JupyterLab ('' when nothing)."""
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"Debian's chromium at {CHROMIUM}")
    for module in ("playwright", "jupyterlab", "ipykernel", "anywidget", "nbformat"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"the Python package {module}")
    return ", ".join(missing)


def launch_chromium(playwright):
    """Debian's Chromium, headless (Playwright's own browser download is never used)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


# --- the server ------------------------------------------------------------------

class Timeout(LabError):
    pass


def poll(what: str, probe, timeout: float = 90.0, interval: float = 0.1):
    """Call `probe()` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)  # a poll interval, not a wait for something to happen
    raise Timeout(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@dataclass
class Lab:
    """A running JupyterLab: its URL, token, notebook root and log file."""

    url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen

    def api(self, method: str, path: str, body: dict | None = None):
        """Call the REST API; return the decoded JSON (or None for an empty body)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def write_notebook(self, name: str, cells: list[str]) -> str:
        """Write a notebook of code cells (with a python3 kernelspec) under the root."""
        import nbformat

        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        return name

    def kernel_for(self, name: str) -> dict | None:
        """The kernel model of the session on notebook `name`, if one exists."""
        for s in self.api("GET", "/api/sessions"):
            if s.get("path") == name and s.get("kernel"):
                return self.api("GET", f"/api/kernels/{s['kernel']['id']}")
        return None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def start_lab(tmp: Path, log_name: str = "e2e-jupyterlab.log") -> Lab:
    """Start JupyterLab rooted in `tmp`/root, isolated from ~/.jupyter; return when it answers."""
    dirs = {name: tmp / name for name in ("config", "runtime", "data", "settings",
                                          "workspaces", "ipython", "root")}
    for d in dirs.values():
        d.mkdir(parents=True)
    notif = dirs["settings"] / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
               JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), IPYTHONDIR=str(dirs["ipython"]),
               JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    _check_kernelspec(env)
    token = secrets.token_hex(16)
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / log_name
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab",
             "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.port_retries=0",
             "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['root']}",
             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.expose_app_in_browser=True",
             # Notebook 7 (the `notebook` package) is served by the same server at /notebooks/.
             "--JupyterNotebookApp.expose_app_in_browser=True"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=dirs["root"])

    def server_info():
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        f = dirs["runtime"] / f"jpserver-{proc.pid}.json"
        try:
            return json.loads(f.read_text())
        except (OSError, ValueError):
            return None

    info = poll("JupyterLab's jpserver-<pid>.json", server_info, timeout=60)
    lab = Lab(url=f"http://127.0.0.1:{info['port']}", token=token, root=dirs["root"],
              log=log, process=proc)

    def ready():
        try:
            return lab.api("GET", "/api/status") is not None
        except (urllib.error.URLError, ConnectionError):
            return False

    poll("JupyterLab's /api/status", ready, timeout=60)
    return lab


def _check_kernelspec(env: dict) -> None:
    """The notebooks ask for kernel `python3`; it must run this interpreter (the venv's)."""
    out = subprocess.run([sys.executable, "-m", "jupyter", "kernelspec", "list", "--json"],
                         env=env, capture_output=True, text=True, check=True).stdout
    spec = json.loads(out)["kernelspecs"].get("python3")
    fix = f"run `{sys.executable} -m ipykernel install --sys-prefix --name python3` (make setup does)"
    if spec is None:
        raise LabError(f"no python3 kernelspec visible to JupyterLab; {fix}")
    exe = spec["spec"]["argv"][0]
    # "python" is replaced by the server's own interpreter (jupyter_client does that).
    if exe not in ("python", "python3", sys.executable):
        raise LabError(f"the python3 kernelspec runs {exe}, not {sys.executable}; {fix}")


def stop_lab(lab: Lab) -> None:
    """POST /api/shutdown (server and kernels exit); terminate only if that fails."""
    try:
        lab.api("POST", "/api/shutdown")
    except (urllib.error.URLError, ConnectionError):
        pass
    try:
        lab.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        lab.process.terminate()
        try:
            lab.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            lab.process.kill()
            lab.process.wait()


# --- helpers -----------------------------------------------------------

BUSY = re.compile(r"(apply|export|undo|redo)ing…")


def action_done(explorer, timeout: float = 60) -> None:
    """Wait for the end of the Explorer's action in flight (its button says "…ing…" until
    then): its new step shows before it ends, and a click or key made before the end is
    dropped (widgets/_busy.OneAtATime)."""
    poll("the action to end", lambda: explorer.locator("button", has_text=BUSY).count() == 0, timeout)


def assert_no_js_error(page) -> None:
    """Fail if any widget shows JupyterLab's "Click to show javascript error" (the message
    says which error: clicking the box reveals it)."""
    shown = page.get_by_text(JS_ERROR_TEXT).count()
    if not shown:
        return
    details = []
    for box in page.locator(".jupyter-widgets-error-widget").all():
        try:
            box.click(timeout=2000)
            details.append(box.inner_text(timeout=2000).strip())
        except Exception as exc:  # the box may be out of view; the count still fails below
            details.append(f"(could not read the error: {exc})")
    raise LabError(f"the page shows {JS_ERROR_TEXT!r} {shown} time(s): {details}\n"
                   f"uncaught page errors: {getattr(page, 'page_errors', '(not collected)')}")


def open_notebook(page, lab: Lab, name: str, timeout: float = 60, ui: str = "lab") -> dict:
    """Open notebook `name` in JupyterLab (`ui="lab"`) or Jupyter Notebook 7
    (`ui="notebook"`) and wait until its kernel is really attached and idle.

    The toolbar's idle indicator reads idle before a kernel exists, so this polls the
    server: a session for the notebook, then its kernel idle with a connection.
    Returns the kernel model.
    """
    url = f"/lab/tree/{name}?reset&" if ui == "lab" else f"/notebooks/{name}?"
    page.goto(f"{lab.url}{url}token={lab.token}")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.context"
                           f" && window.jupyterapp.shell.currentWidget.context.path === {json.dumps(name)}")

    def attached():
        k = lab.kernel_for(name)
        return k if k and k["execution_state"] == "idle" and k["connections"] >= 1 else None

    # Widgets get the width a person gives them: no file browser beside the notebook.
    if ui == "lab":
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    kernel = poll(f"an idle kernel attached to {name}", attached, timeout=timeout, interval=0.2)
    # The page's own session must also see the kernel as ready before running cells.
    page.wait_for_function(
        "() => { const s = window.jupyterapp.shell.currentWidget.sessionContext;"
        " return s.isReady && s.session && s.session.kernel && s.kernelDisplayStatus === 'idle'; }")
    return kernel


_RUN_ALL = """async (timeoutMs) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  const run = app.commands.execute('notebook:run-all-cells');
  const timer = new Promise((_, reject) =>
    setTimeout(() => reject(new Error('run-all did not finish in ' + timeoutMs + ' ms')), timeoutMs));
  const ok = await Promise.race([run, timer]);
  const cells = [];
  const model = panel.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const c = model.cells.get(i);
    if (c.type !== 'code') continue;
    const outputs = c.outputs.toJSON();
    cells.push({ index: i, count: c.executionCount,
      errors: outputs.filter(o => o.output_type === 'error')
        .map(o => o.ename + ': ' + o.evalue + '\\n' + (o.traceback || []).join('\\n')) });
  }
  return { ok, cells };
}"""


def run_all(page, timeout: float = 120) -> list[dict]:
    """Run all cells (the `notebook:run-all-cells` command, as the Run menu does) and wait
    until they have all run; fail with the traceback if one raised."""
    result = page.evaluate(_RUN_ALL, int(timeout * 1000))
    errors = [e for c in result["cells"] for e in c["errors"]]
    if errors:
        raise LabError("a notebook cell raised:\n" + _strip_ansi("\n".join(errors)))
    not_run = [c["index"] for c in result["cells"] if c["count"] is None]
    assert result["ok"] and not not_run, f"cells not run: {not_run} ({result})"
    return result["cells"]


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


_EXECUTE = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const out = [];
  const future = kernel.requestExecute({ code, store_history: false });
  future.onIOPub = (msg) => {
    const c = msg.content;
    if (msg.header.msg_type === 'stream') out.push(c.text);
    if (msg.header.msg_type === 'error') out.push('ERROR ' + c.ename + ': ' + c.evalue);
  };
  await future.done;
  return out.join('');
}"""


def kernel_json(page, code: str):
    """Run `code` in the open notebook's kernel (no cell is added) and return the JSON
    it prints: how a test asks Python what the page should show."""
    text = page.evaluate(_EXECUTE, code)
    if text.startswith("ERROR") or not text.strip():
        raise LabError(f"the kernel could not answer: {text!r}\ncode: {code}")
    return json.loads(text)


def output_area(page, cell_index: int):
    """The output area of the notebook's cell number `cell_index` (0-based)."""
    return page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(cell_index).locator(".jp-OutputArea")


def set_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme with the `apputils:change-theme` command and wait for it."""
    page.evaluate("t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme)
    page.wait_for_function("t => document.body.dataset.jpThemeName === t", arg=theme)
    light = "true" if theme == LIGHT else "false"
    page.wait_for_function("l => document.body.dataset.jpThemeLight === l", arg=light)
    # The theme's stylesheet is applied once the layout colour variable changes with it.
    page.wait_for_function(
        "l => { const c = getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim();"
        " const dark = ['#111','#111111','rgb(17, 17, 17)'].includes(c);"
        " return c !== '' && (l === 'true') !== dark; }", arg=light)


def shoot(locator, name: str) -> Path:
    """Save a screenshot of `locator` to test-artifacts/NAME.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    locator.scroll_into_view_if_needed()
    locator.page.mouse.move(0, 0)  # no hover tooltip in the picture
    locator.screenshot(path=str(path), animations="disabled")
    return path


def shoot_themes(page, locator, name: str) -> list[Path]:
    """Screenshots of `locator` in the light then the dark theme; leaves the light theme on
    (the theme is a user setting, shared by the session's server)."""
    paths = []
    try:
        for theme, suffix in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(page, theme)
            assert_no_js_error(page)
            paths.append(shoot(locator, f"{name}-{suffix}"))
    finally:
        set_theme(page, LIGHT)
    return paths
