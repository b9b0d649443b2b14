"""The per-question page in a real browser (headless Chromium through selenium): what it shows, and that the filters
change the visible rows. Skipped, saying why, without selenium (the ``dev`` extra) or Debian's ``chromium`` and
``chromium-driver`` (``.ci/run`` installs them where apt is available)."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from test_bench_results_page import KATE, SEER, page_data

from knapsack_dspy.bench.reporting.html_page import write_page

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
    if not (CHROMIUM and DRIVER):
        pytest.skip("no headless browser: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="kdspy-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _visible_questions(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [row.get_attribute("data-key") for row in driver.find_elements(By.CSS_SELECTOR, "#qtable tr.q")
            if row.is_displayed()]


def test_the_page_shows_every_question_and_its_filters_change_what_is_shown(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page = write_page(tmp_path / "page.html", page_data())
    browser.get(page.as_uri())
    find = browser.find_element
    assert browser.title == "unit"
    assert _visible_questions(browser) == ["tatqa:q0", "tatqa:q1", "tatqa:q2", "tatqa:q3"]
    assert find(By.ID, "count").text == "showing 4 of 4 questions"
    first = find(By.CSS_SELECTOR, "#qtable tr.q")
    assert "What is item 0?" in first.text and "gold 0" in first.text and "900 tokens" in first.text
    assert "Paired comparisons" in find(By.ID, "tables").text  # the report's tables
    assert find(By.CSS_SELECTOR, "#plot-list img").get_attribute("src").startswith("data:image/png")
    assert "score_vs_M.png not drawn: one M" in find(By.ID, "not-drawn").text

    find(By.ID, "f-disagree").click()
    assert _visible_questions(browser) == ["tatqa:q1", "tatqa:q2", "tatqa:q3"]
    assert find(By.ID, "count").text == "showing 3 of 4 questions"
    Select(find(By.ID, "f-type")).select_by_value("span")
    assert _visible_questions(browser) == ["tatqa:q1", "tatqa:q3"]
    find(By.ID, "f-disagree").click()
    Select(find(By.ID, "f-type")).select_by_value("")
    # where seer beats kate: right in seer, wrong in kate (q3's kate call failed: counted wrong)
    Select(find(By.ID, "f-right")).select_by_value(SEER)
    Select(find(By.ID, "f-wrong")).select_by_value(KATE)
    assert _visible_questions(browser) == ["tatqa:q1", "tatqa:q3"]
    Select(find(By.ID, "f-right")).select_by_value(KATE)
    Select(find(By.ID, "f-wrong")).select_by_value(SEER)
    assert _visible_questions(browser) == ["tatqa:q2"]
    Select(find(By.ID, "f-right")).select_by_value("")
    Select(find(By.ID, "f-wrong")).select_by_value("")
    search = find(By.ID, "f-text")
    search.send_keys("item 3")
    assert _visible_questions(browser) == ["tatqa:q3"]
    search.clear()
    search.send_keys(" ")  # an "input" event with an empty query: every question again
    assert len(_visible_questions(browser)) == 4

    # a row opens the runs side by side: exemplars (with their questions), output, prompt status
    find(By.CSS_SELECTOR, "#qtable tr.q[data-key='tatqa:q1']").click()
    cards = browser.find_elements(By.CSS_SELECTOR, "tr.detail .card")
    assert [c.get_attribute("data-run") for c in cards] == [KATE, SEER]
    seer = cards[1].text
    assert "Exemplar question 1?" in seer and "Exemplar question 2?" in seer and "ans = 1  # seer" in seer
    assert "prompt: not rendered" in seer and "prompt: unrecorded" in cards[0].text
    assert "gold derivation: 1 + 0" in find(By.CSS_SELECTOR, "tr.detail .facts").text
    find(By.CSS_SELECTOR, "#qtable tr.q[data-key='tatqa:q1']").click()  # closes again
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.detail")

    # a run's column can be hidden
    kate_header = find(By.CSS_SELECTOR, f"#qtable th[data-run='{KATE}']")
    assert kate_header.is_displayed()
    find(By.ID, "f-run-0").click()
    assert not kate_header.is_displayed()
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
