"""The shared page in a real browser (headless Chromium through chromedriver): keys move through cycles, the
nodes drawn are the record's, the headline is the core's, and every panel fits the window at 1280x720, 1920x1080
and in the presentation layout. Skipped, saying why, where no Chromium, chromedriver or selenium is found
(``.ci/run`` installs Debian's ``chromium`` and ``chromium-driver``). SPECVIZ_SHOTS=folder keeps the screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from specviz_app.demo import copy_demo
from specviz_core.recording.store import Recording
from specviz_core.share.page import share
from specviz_core.share.payload import page_data

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
DRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    SELENIUM = True
except ImportError:
    SELENIUM = False

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER and SELENIUM),
    reason="the browser tests need Chromium and chromedriver (Debian: apt install chromium chromium-driver) and "
           "selenium (the test extra): " + ", ".join(n for n, ok in (("no Chromium", CHROMIUM), ("no chromedriver",
                                                                      DRIVER), ("no selenium", SELENIUM)) if not ok))

PANELS = ("tree-panel", "why-panel", "output-panel", "charts-panel")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("share-browser")
    db = copy_demo(folder)
    with Recording(db, read_only=True) as rec:
        goose = next(s for s in rec.sessions() if s.method == "goose")
        data = page_data(rec, goose.id)
    return share(db, folder / "goose.html", goose.id).path, data


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def open_at(browser, path: Path, width: int, height: int) -> None:
    browser.set_window_size(width, height)
    # the window's outer size includes nothing in headless mode, but make the viewport exact anyway
    inner = browser.execute_script("return [innerWidth, innerHeight]")
    browser.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    browser.get(path.as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def press(browser, key: str, times: int = 1) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for _ in range(times):
        ActionChains(browser).send_keys(key).perform()


def fits(browser, ids) -> list[str]:
    """The panels (by element id) that are not wholly inside the viewport, or that are empty."""
    return browser.execute_script("""
        const bad = [];
        for (const id of arguments[0]) {
          const r = document.getElementById(id).getBoundingClientRect();
          if (r.width < 20 || r.height < 16 || r.left < 0 || r.top < 0 || r.right > innerWidth + 0.5 ||
              r.bottom > innerHeight + 0.5) bad.push(id + " " + JSON.stringify(r));
        }
        if (document.documentElement.scrollWidth > innerWidth || document.documentElement.scrollHeight > innerHeight)
          bad.push("the page scrolls");
        return bad;""", list(ids))


def shot(browser, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("SPECVIZ_SHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(folder / f"share-{name}.png"))


def test_keys_step_through_the_cycles_and_the_nodes_are_the_records(browser, page, tmp_path):
    from selenium.webdriver.common.keys import Keys

    path, data = page
    open_at(browser, path, 1280, 720)
    assert browser.execute_script("return document.body.dataset.cycle") == "0"
    press(browser, Keys.ARROW_RIGHT, 3)
    assert browser.execute_script("return document.body.dataset.cycle") == "3"
    assert browser.find_element("id", "where").text == f"cycle 3 of {len(data['cycles'])}"
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('#tree g.node')].map(g => [Number(g.dataset.node), g.dataset.kind])")
    want = [[b["id"], b["kind"]] for b in data["cycles"][3]["tree"]["boxes"]]
    assert sorted(drawn) == sorted(want)
    assert browser.find_element("id", "headline").text == data["headline"]["short"]
    assert browser.find_element("id", "why").text == data["cycles"][3]["why"]
    press(browser, Keys.ARROW_LEFT)
    assert browser.execute_script("return document.body.dataset.cycle") == "2"
    press(browser, Keys.END)
    assert browser.execute_script("return document.body.dataset.cycle") == str(len(data["cycles"]) - 1)
    press(browser, Keys.HOME)
    assert browser.execute_script("return document.body.dataset.cycle") == "0"
    press(browser, Keys.SPACE)  # play: the cycles move on by themselves
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return Number(document.body.dataset.cycle) >= 2"))
    press(browser, Keys.SPACE)


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_every_panel_fits_the_screen_and_the_presentation_layout_too(browser, page, tmp_path, size):
    path, _ = page
    open_at(browser, path, *size)
    assert fits(browser, (*PANELS, "mask-panel", "kv-panel", "headline")) == []
    shot(browser, f"{size[0]}x{size[1]}", tmp_path)
    press(browser, "p")
    assert browser.execute_script("return document.body.classList.contains('present')")
    assert fits(browser, (*PANELS, "headline")) == []
    assert not browser.find_element("id", "mask-panel").is_displayed()
    shot(browser, f"{size[0]}x{size[1]}-presentation", tmp_path)


def test_a_tree_too_wide_to_read_is_framed_by_its_accepted_path_in_the_presentation_layout(browser, tmp_path):
    """A 60-node goose tree with a 30-token accepted spine: scaled whole into a 1280-pixel slide its labels are a few
    pixels high. The presentation layout frames the root, the accepted path and the bonus token instead (as the
    window's presentation mode does): every one of them inside the tree panel, labels at least 9 pixels high."""
    from gui_records import goose_session

    from specviz_core.viewer.tree_layout import BONUS

    source = goose_session(n_nodes=60, spine_len=40, spine_accepted=30, branch_continues=0)
    db = tmp_path / "wide.db"
    with Recording(db, create=True) as rec:
        writer = rec.new_session(source.info)
        for i in range(len(source)):
            writer.append(source.cycle(i))
        writer.finish("complete", "max_new_tokens")
    path = share(db, tmp_path / "wide.html").path
    record = source.cycle(len(source) - 1)
    open_at(browser, path, 1280, 720)
    press(browser, "p")
    from selenium.webdriver.common.keys import Keys

    press(browser, Keys.END)
    assert browser.execute_script("return document.getElementById('tree').dataset.framed") == "path"
    out = browser.execute_script("""
        const panel = document.getElementById('tree').getBoundingClientRect(), bad = [];
        for (const id of arguments[0]) {
          const g = document.querySelector(`#tree g.node[data-node="${id}"]`);
          const r = g.querySelector('rect').getBoundingClientRect(), t = g.querySelector('text').getBoundingClientRect();
          if (r.left < panel.left - 0.5 || r.right > panel.right + 0.5 || r.top < panel.top - 0.5 ||
              r.bottom > panel.bottom + 0.5) bad.push(`${id} out of the panel`);
          if (t.height < 9) bad.push(`${id}'s label ${t.height.toFixed(1)} px high`);
        }
        return bad;""", [0, *record.accepted_path, BONUS])
    assert out == []
    shot(browser, "wide-tree-presentation", tmp_path)
