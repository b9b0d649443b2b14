"""The images of docs/results.md: the committed results directories' plots and screenshots of their pages.

    python benchmarks/docs_images.py            # after kdspy report on both directories

Copies every plot of ``benchmarks/results/embedded_seer_kate_random`` and ``benchmarks/results/budget_sweep_selection``
to ``docs/img/<directory>/`` and takes screenshots of the embedded run's page in headless Chromium (Debian's
``chromium`` + ``chromium-driver``, driven by selenium): the summary, and the questions where SEER is right and
KATE wrong with the first one opened (what each run saw). Screenshots are saved with at most 128 colours.
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
IMAGES = ROOT / "docs" / "img"
DIRECTORIES = ("embedded_seer_kate_random", "budget_sweep_selection")


def copy_plots() -> list[Path]:
    written = []
    for name in DIRECTORIES:
        target = IMAGES / name
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob("*.png"):
            old.unlink()
        for plot in sorted((RESULTS / name).glob("*.png")):
            shutil.copyfile(plot, target / plot.name)
            written.append(target / plot.name)
    return written


def _browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='kdspy-shots-')}", f"--window-size={width},{height}",
                 "--hide-scrollbars"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def _save(driver, path: Path) -> Path:
    from PIL import Image

    with Image.open(io.BytesIO(driver.get_screenshot_as_png())) as image:
        image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def screenshots(page: Path) -> list[Path]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = _browser(1400, 1000)
    try:
        driver.get(page.resolve().as_uri())
        written = [_save(driver, IMAGES / "page_summary.png")]
        runs = {option.text: option.get_attribute("value")
                for option in driver.find_elements(By.CSS_SELECTOR, "#f-right option")}
        Select(driver.find_element(By.ID, "f-right")).select_by_value(runs["seer"])
        Select(driver.find_element(By.ID, "f-wrong")).select_by_value(runs["kate"])
        first = next(row for row in driver.find_elements(By.CSS_SELECTOR, "#qtable tr.q") if row.is_displayed())
        first.click()
        driver.execute_script("document.getElementById('questions').scrollIntoView()")
        time.sleep(0.3)
        written.append(_save(driver, IMAGES / "page_seer_beats_kate.png"))
        return written
    finally:
        driver.quit()


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    written = copy_plots() + screenshots(RESULTS / DIRECTORIES[0] / "page.html")
    for path in written:
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
