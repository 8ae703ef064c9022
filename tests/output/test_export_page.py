"""The exported page (CONTRACT §7) in a real headless browser: Debian's chromium, driven by Playwright.

The page is opened from disk (file://) with every request recorded: it must fetch nothing, log
no console error, draw something (the canvas is not the background colour), and move: two
moments of the motion, an orbit and a zoom each give a different picture. The controls are used
as a user does (dragging the slider, clicking play, the mouse on the canvas).

Where chromium or Playwright are missing the tests skip, unless MBSIM_REQUIRE_TOOLS is set
(.ci/run installs them and sets it), where they fail.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from mbsim.cli.main import cli

BACKGROUND = np.array([245, 245, 242])  # the viewer's clear colour (0.96, 0.96, 0.95)
SHOTS = Path(os.environ.get("MBSIM_SCREENSHOTS", "")) if os.environ.get("MBSIM_SCREENSHOTS") else None


def _chromium() -> str | None:
    for name in (os.environ.get("MBSIM_CHROMIUM"), "chromium", "chromium-browser", "/usr/bin/chromium"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if executable is None or sync_playwright is None:
        what = "chromium" if executable is None else "playwright"
        if os.environ.get("MBSIM_REQUIRE_TOOLS"):
            pytest.fail(f"{what} is missing; .ci/run installs it")
        pytest.skip(f"{what} is not installed (.ci/run installs Debian's chromium and playwright)")
    with sync_playwright() as p:
        # the flags: no sandbox as root, and none of chromium's own network traffic (this
        # machine's network is closed; the page must not need it anyway)
        args = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
        b = p.chromium.launch(executable_path=executable, args=args)
        print(f"browser: {executable}, {b.version}")
        yield b
        b.close()


class Page:
    """An exported page opened in the browser, with what it logged and requested."""

    def __init__(self, browser, path: Path, fragment: str = "") -> None:
        self.page = browser.new_page(viewport={"width": 960, "height": 640})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri() + fragment)
        self.page.wait_for_function("window.mbsim && window.mbsim.ready", timeout=30_000)

    def canvas(self, name: str | None = None) -> np.ndarray:
        from PIL import Image

        png = self.page.locator("#view").screenshot()
        if SHOTS is not None and name:
            SHOTS.mkdir(parents=True, exist_ok=True)
            (SHOTS / f"{name}.png").write_bytes(png)
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)

    def drag_slider_to(self, t: float) -> None:
        """Move the time slider as a user would (its value, then the input event it fires)."""
        self.page.locator("#time").evaluate(
            "(el, t) => { el.value = String(t); el.dispatchEvent(new Event('input', {bubbles: true})); }", t
        )

    def close(self) -> None:
        self.page.close()


def drawn(image: np.ndarray) -> float:
    """Share of the canvas that is not background."""
    return float(np.mean(np.abs(image - BACKGROUND).max(axis=-1) > 30))


def changed(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a - b).max(axis=-1) > 30))


def export(result: Path, out: Path, *args: str) -> Path:
    r = CliRunner().invoke(cli, ["export", str(result), "-o", str(out), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out


def test_the_page_plays_offline_and_moves(browser, result_3d, tmp_path) -> None:
    with h5py.File(result_3d, "r") as f:
        time = f["time"][:]
    page_file = export(result_3d, tmp_path / "every_shape.html")
    page = Page(browser, page_file)
    try:
        text = page.page.inner_text("body")
        assert "every shape" in text and "lagrange" in text and "completed" in text  # name, method, status
        slider = page.page.locator("input[type=range]#time")
        assert float(slider.get_attribute("min")) == pytest.approx(time[0])
        assert float(slider.get_attribute("max")) == pytest.approx(time[-1])
        page.drag_slider_to(time[0])
        start = page.canvas("3d_start")
        assert "t = 0.000" in page.page.inner_text("#clock")
        page.drag_slider_to(0.25)
        later = page.canvas("3d_later")
        assert "t = 0.250" in page.page.inner_text("#clock")
        assert drawn(start) > 0.02 and drawn(later) > 0.02  # bodies and ground on the canvas
        assert changed(start, later) > 0.002  # the bodies moved
        # the slider paused the motion; play runs it on
        assert page.page.evaluate("window.mbsim.time()") == pytest.approx(0.25)
        page.page.click("#play")
        page.page.wait_for_timeout(400)
        assert page.page.evaluate("window.mbsim.time()") != pytest.approx(0.25)
        page.page.click("#play")
        # orbit (drag) and zoom (wheel) change the picture at a fixed time
        page.drag_slider_to(0.1)
        before = page.canvas()
        box = page.page.locator("#view").bounding_box()
        page.page.mouse.move(box["x"] + 300, box["y"] + 300)
        page.page.mouse.down()
        page.page.mouse.move(box["x"] + 450, box["y"] + 260, steps=5)
        page.page.mouse.up()
        orbited = page.canvas("3d_orbited")
        assert changed(before, orbited) > 0.01
        page.page.mouse.wheel(0, -400)
        assert changed(orbited, page.canvas("3d_zoomed")) > 0.01
        assert page.errors == []
        assert all(url.startswith(("file:", "data:", "blob:")) for url in page.requests), page.requests
    finally:
        page.close()


def test_a_planar_page_and_a_moment_in_the_address(browser, result_2d, tmp_path) -> None:
    page_file = export(result_2d, tmp_path / "planar.html")
    page = Page(browser, page_file, "#t=0.3")
    try:
        assert page.page.evaluate("window.mbsim.time()") == pytest.approx(0.3)  # opened paused there
        assert page.page.inner_text("#play") == "play"
        moment = page.canvas("2d_t03")
        assert drawn(moment) > 0.02
        page.drag_slider_to(0.0)
        assert changed(moment, page.canvas("2d_t0")) > 0.002
        assert page.errors == []
    finally:
        page.close()


def test_without_webgl_the_page_draws_on_a_2d_canvas(browser, result_3d, tmp_path) -> None:
    """A browser with WebGL switched off gets the canvas-2D fallback (forced here by ?canvas2d):
    the same picture up to shading details, and it moves."""
    page_file = export(result_3d, tmp_path / "fallback.html")
    webgl = Page(browser, page_file, "#t=0.2")
    flat = Page(browser, page_file, "?canvas2d#t=0.2")
    try:
        reference, picture = webgl.canvas(), flat.canvas("3d_canvas2d")
        assert drawn(picture) > 0.02
        assert changed(reference, picture) < 0.05  # the same scene from the same camera
        flat.drag_slider_to(0.0)
        assert changed(picture, flat.canvas()) > 0.002
        assert flat.errors == [] and webgl.errors == []
    finally:
        webgl.close()
        flat.close()


def test_compare_page_shows_each_solver_beside_the_other(browser, tmp_path) -> None:
    from export_scenes import SHAPES_2D

    scene = tmp_path / "planar.yaml"
    scene.write_text(SHAPES_2D, encoding="utf-8")
    args = ["compare", str(scene), "--solvers", "lagrange,gauss", "-o", str(tmp_path / "cmp")]
    r = CliRunner().invoke(cli, [*args, "--export", str(tmp_path / "both.html")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    page = Page(browser, tmp_path / "both.html")
    try:
        labels = page.page.locator(".label").all_inner_texts()
        assert labels == ["lagrange", "gauss"]
        runs = page.page.locator(".runs li").all_inner_texts()
        assert "lagrange" in runs[0] and "gauss" in runs[1] and all("completed" in r for r in runs)
        assert drawn(page.canvas("compare")) > 0.02
        assert page.errors == []
    finally:
        page.close()


@pytest.mark.slow
def test_a_10000_row_100_body_page_stays_small_and_plays(browser, tmp_path, benchmark_module) -> None:
    """The benchmark's large result (benchmarks/export.py times its export)."""
    scene = tmp_path / "hundred.yaml"
    scene.write_text(benchmark_module("export").hundred_bodies(10_001), encoding="utf-8")
    r = CliRunner().invoke(cli, ["run", str(scene), "-o", str(tmp_path / "h.h5"), "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    page_file = export(tmp_path / "h.h5", tmp_path / "h.html")
    assert page_file.stat().st_size < 20_000_000
    page = Page(browser, page_file)
    try:
        # every recorded row is in the page (no thinning was needed)
        assert "every" not in page.page.inner_text(".notes")
        assert page.page.evaluate("window.mbsim.range()") == pytest.approx([0.0, 10.0])
        page.drag_slider_to(0.5)
        a = page.canvas("hundred_05")
        page.drag_slider_to(1.0)
        assert drawn(a) > 0.02
        assert changed(a, page.canvas("hundred_10")) > 0.002
        assert page.errors == []
    finally:
        page.close()


def test_a_page_over_its_budget_keeps_every_nth_row_and_says_so(result_3d, tmp_path, monkeypatch) -> None:
    """No browser needed: the page's header says which rows it holds."""
    import json
    import re

    from mbsim.output import viewer

    with h5py.File(result_3d, "r") as f:
        recorded = len(f["time"])
    full = export(result_3d, tmp_path / "full.html").stat().st_size
    monkeypatch.setattr(viewer, "PAGE_BUDGET", full - 2_000)  # just too small for every row
    text = export(result_3d, tmp_path / "thin.html").read_text(encoding="utf-8")
    header = json.loads(re.search(r'id="mbsim-header">(.*?)</script>', text).group(1))
    (run,) = header["runs"]
    assert run["recorded"] == recorded and 1 < run["keys"] < recorded
    stride = int(re.search(r"every (\d+)th recorded row is shown", text).group(1))
    assert run["keys"] == len(range(0, recorded, stride)) + (0 if (recorded - 1) % stride == 0 else 1)
    assert len(text.encode()) <= full - 2_000
