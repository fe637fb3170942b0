"""End-to-end fixtures: one headless JupyterLab for the whole session, driven by
Playwright in Debian's Chromium. The driving itself lives in ``labdriver.py`` (shared
with bench/ui.py); this file only scopes it for pytest.

* ``lab`` (session): JupyterLab isolated from ``~/.jupyter`` (config, runtime, data,
  settings, workspaces and IPython dirs in a temp dir), rooted in a temp dir where the
  tests write their notebooks; stopped with ``POST /api/shutdown``.
* ``browser`` (session) and ``page`` (per test): Chromium and a fresh browser context.
  After every test the page must not show "Click to show javascript error"; a failing
  test leaves ``test-artifacts/e2e-FAILED-<test>.png`` and prints the server log's tail.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import labdriver  # noqa: E402  (after the path is set)


def pytest_collection_modifyitems(items):
    """Every test in tests/e2e is an e2e test, whether or not it says so."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so `page` knows whether the test failed."""
    report = yield
    setattr(item, f"e2e_report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    missing = labdriver.missing_requirements()
    if missing:
        pytest.skip(f"end-to-end tests need {missing} (`make system-test setup` installs them)")
    for stale in labdriver.ARTIFACTS.glob("e2e-FAILED-*.png"):  # from an earlier run
        stale.unlink()
    server = labdriver.start_lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        labdriver.stop_lab(server)


@pytest.fixture(scope="session")
def browser(lab, chromium):
    return chromium


@pytest.fixture
def page(browser, lab, request):
    """A fresh page (1500x1300: the Explorer fits in the notebook panel); fails the test if a widget shows a JavaScript error."""
    context = browser.new_context(viewport={"width": 1500, "height": 1300})
    with _checked_page(context, lab, request.node.name, lambda: getattr(request.node, "e2e_report_call", None)) as pg:
        yield pg


@contextlib.contextmanager
def _checked_page(context, lab, name: str, report):
    """A page of `context` that collects uncaught errors; on leaving, a failed test
    (``report()``) leaves a screenshot and the server log, a passing one is checked for
    widget errors."""
    context.set_default_timeout(90_000)  # a busy CI machine: a wait on a condition, not a time asserted
    pg = context.new_page()
    pg.page_errors = []  # uncaught exceptions in the page, for failure messages
    pg.on("pageerror", lambda exc: pg.page_errors.append(str(exc)))
    try:
        yield pg
        outcome = report()
        if outcome is not None and outcome.failed:
            _save_failure(pg, name, lab)
        else:
            labdriver.assert_no_js_error(pg)
    finally:
        context.close()


@pytest.fixture(scope="module")
def desk_page(browser, lab):
    """One page at the Explorer's default size (1600x1000) shared by a module's
    journeys, which build on each other (a notebook run once, then used in turn).
    Use it through `desk`, which checks it after each journey."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    with _checked_page(context, lab, "desk", lambda: None) as pg:
        yield pg


@pytest.fixture
def desk(desk_page, lab, request):
    """`desk_page` for one journey: a failing journey leaves its screenshot, a passing
    one must leave no widget showing a JavaScript error."""
    yield desk_page
    report = getattr(request.node, "e2e_report_call", None)
    if report is not None and report.failed:
        _save_failure(desk_page, request.node.name, lab)
    else:
        labdriver.assert_no_js_error(desk_page)


def _save_failure(page, test_name: str, lab) -> None:
    labdriver.ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=str(labdriver.ARTIFACTS / f"e2e-FAILED-{test_name}.png"))
    except Exception:  # the page may be gone; the log below still helps
        pass
    print(f"--- page errors: {page.page_errors}\n--- JupyterLab log tail:\n{lab.log_tail()}")
