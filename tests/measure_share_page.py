"""Measure the shared page of a long session: its size and how long Chromium takes to open it (to the first cycle
drawn), for the demo session and for a 200-cycle goose session of 60-node trees on a random 2-layer model.

    python tests/measure_share_page.py [--cycles 200]

Prints one line per page; needs chromium, chromedriver and selenium for the opening time (else prints the size).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from specviz_app.demo import copy_demo
from specviz_core.bench.host_work import prompt_ids, two_layer_model
from specviz_core.recording.store import Recording
from specviz_core.session.session import Session
from specviz_core.session.spec import check_method, spec_for
from specviz_core.share.page import share


def long_session(folder: Path, cycles: int) -> Path:
    target = two_layer_model(49152)
    spec = spec_for(check_method("goose", {"budget": "paper"}), prompt_ids(49152), max_new_tokens=4 * cycles)
    db = folder / "long.db"
    with Recording(db, create=True) as rec:
        s = Session(spec, target, None, recording=rec)
        for _ in range(cycles):
            if s.done:
                break
            s.step()
        s.end()
    return db


def open_ms(path: Path, rounds: int = 3) -> float | None:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,720"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        times = []
        for _ in range(rounds):
            d.get("about:blank")
            t0 = time.perf_counter()
            d.get(path.as_uri())
            WebDriverWait(d, 60).until(lambda x: x.execute_script("return document.body.dataset.ready === '1'"))
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)
    finally:
        d.quit()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, db in (("demo", copy_demo(folder)), (f"{args.cycles}-cycle goose", long_session(folder, args.cycles))):
            t0 = time.perf_counter()
            page = share(db, folder / f"{name.split()[0]}.html")
            write_s = time.perf_counter() - t0
            with Recording(db, read_only=True) as rec:
                nodes = statistics.median(len(c.nodes) for c in rec.cycles(page.session_id))
            ms = open_ms(page.path)
            print(f"{name}: {page.n_cycles} cycles, median {nodes:.0f} nodes a cycle; page {page.size_bytes / 1e6:.2f} MB, "
                  f"written in {write_s:.1f} s; opens in {'%.0f ms' % ms if ms is not None else '(no chromium)'}")


if __name__ == "__main__":
    main()
