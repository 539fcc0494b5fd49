"""The annotated text and the HTML report in a real browser: headless Chromium, driven by Playwright.

Offline, from ``file://`` URLs: the filters work, formulas render as MathML, links resolve both
ways, every state of an anchor and of a check shows, in the text and in the legend, and a block
whose checks ran on the text before it changed says so. The browser is the system's Chromium
(``$CLAIMS_CHROMIUM``, else ``chromium`` on the PATH; ``.ci/run`` installs Debian's): Playwright's
own download of a browser does not work on these machines. Without a Chromium, or without
Playwright, the tests are skipped and say why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath

from claims_harness.engine import ANCHOR_STATUSES

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("CLAIMS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine: install Debian's chromium, "
                                                          "or set CLAIMS_CHROMIUM to its path")
# What the machine's closed network and a root user need (a fresh profile, no background connections).
ARGUMENTS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """Four report directories of one revised toy text: a passing run, a failing one, no run at all, and a run of the
    text before its revision (``before``: the page of the revised text, the results of a run on the original)."""
    root = tmp_path_factory.mktemp("browser") / "course_two"
    shutil.copytree(HERE / "course_two", root, ignore=shutil.ignore_patterns("reports", ".claims-cache"))
    (root / "broken_toy.py").write_text('"""The toy sum, off by one."""\n\n\ndef running_sum(values):\n'
                                        '    total, sums = 1, []\n    for value in values:\n        total += value\n'
                                        '        sums.append(total)\n    return sums\n', encoding="utf-8")
    text = (root / "TEXT.md").read_text(encoding="utf-8")
    (root / "TEXT-1.0.md").write_text(text, encoding="utf-8")
    moved = "The running sums of 3, 1 and 4 are 3, 4 and 8.\n"
    text = (text.replace(moved + "\n", "").replace("- The last running sum is the total of all the values.\n", "")
            .replace("it is 5050.\n", "it is 5050.\n\n" + moved)
            .replace("the sum is 55", "the sum is 56")
            .replace("the total of the ones before it", "the total of the values before it")
            .replace("$$\n1 + 2", "A new paragraph with the number 42.\n\n$$\n1 + 2"))
    (root / "TEXT.md").write_text(text, encoding="utf-8")
    ledger = root / "claims" / "lesson1.yaml"
    ledger.write_text(ledger.read_text(encoding="utf-8").replace(
        "says: With positive values a running sum never decreases.",
        "says: With positive values, a running sum never decreases."), encoding="utf-8")
    before = ["verify", "--no-cache", "--claims-text", "toy=TEXT-1.0.md", "--claims-report", "before"]
    for arguments, status in ((["verify", "--no-cache"], 0),
                              (["verify", "--no-cache", "--claims-impl", "broken_toy", "--claims-report", "broken"], 1),
                              (["text", "html", "--out", "unrun"], 0),
                              (before, 0), (["text", "html", "--out", "before"], 0)):  # the old results, the new text
        # In a process of its own: the toy's verifiers must not join this process's registry.
        done = subprocess.run([sys.executable, "-m", "claims_harness.cli", *arguments], cwd=root, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": pythonpath(root)}, check=False)
        assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    return {"passed": root / "reports", "failed": root / "broken", "unrun": root / "unrun", "before": root / "before"}


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=ARGUMENTS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    opened = browser.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    opened.close()


def test_every_state_of_an_anchor_shows_with_its_own_border(page, pages):
    page.goto((pages["passed"] / "claims_text.html").as_uri())
    borders = {}
    # The sums example moved to the other step: relocated (a move within a step is the legend's).
    for state in ("unchanged", "relocated", "reworded", "changed", "unreviewed", "marked", "uncovered"):
        block = page.locator(f".block.anchor-{state}").first
        assert block.is_visible(), state
        borders[state] = block.evaluate("element => getComputedStyle(element).borderTopStyle + ' ' + "
                                        "getComputedStyle(element).borderTopColor")
    assert len(set(borders.values())) == len(borders), borders  # each state looks different
    orphaned = page.locator("#place-l1-last-is-total")
    assert orphaned.is_visible() and "its block is gone" in orphaned.inner_text()
    unheld = page.locator("mark.unheld", has_text="42")
    assert unheld.is_visible()
    assert page.locator("mark.unheld", has_text="56").is_visible()


def test_every_state_of_the_checks_shows_with_its_own_fill(page, pages):
    fills = {}
    for report, state in (("passed", "passed"), ("failed", "failed"), ("unrun", "not-run"),
                          ("passed", "not-checkable"), ("before", "before-the-change")):
        page.goto((pages[report] / "claims_text.html").as_uri())
        block = page.locator(f".block.check-{state}").first
        assert block.is_visible(), (report, state)
        fills[state] = block.evaluate("element => getComputedStyle(element).backgroundColor")
    assert len(set(fills.values())) == len(fills), fills


# What shows a state: a block's border (its anchor) or its fill (its checks), as the browser computed them.
SHOWN = ("element => { const style = getComputedStyle(element); return {border: style.borderTopWidth + ' ' + "
         "style.borderTopStyle + ' ' + style.borderTopColor, color: style.borderTopColor, style: style.borderTopStyle, "
         "width: parseFloat(style.borderTopWidth), fill: style.backgroundColor}; }")
TRANSPARENT = "rgba(0, 0, 0, 0)"
CHECK_STATES = ("passed", "failed", "before-the-change", "not-run", "not-checkable")


def test_every_state_in_the_legend_shows_as_it_does_on_a_block(page, pages):
    """Each swatch of the legend is drawn: a border of its own for each state of an anchor (the shading for an
    uncovered block), a fill of its own for each state of the checks; and it is drawn as the blocks of that state
    are, wherever the pages have one."""
    anchors = [*ANCHOR_STATUSES, "marked", "uncovered"]
    page.goto((pages["before"] / "claims_text.html").as_uri())
    assert page.eval_on_selector_all('#filters input[data-filter="anchor"]', "boxes => boxes.map(box => box.value)") \
        == anchors
    assert page.eval_on_selector_all('#filters input[data-filter="check"]', "boxes => boxes.map(box => box.value)") \
        == [*CHECK_STATES, "none"]
    swatches = {state: page.locator(f".legend .swatch.anchor-{state}") for state in anchors}
    fills = {state: page.locator(f".legend .swatch.check-{state}") for state in CHECK_STATES}
    shown = {}
    for state, swatch in [*swatches.items(), *fills.items()]:
        assert swatch.count() == 1 and swatch.is_visible(), state
        shown[state] = swatch.evaluate(SHOWN)
    for state in anchors:
        if state == "uncovered":  # no border: the shading
            assert shown[state]["fill"] != TRANSPARENT, shown[state]
        else:
            assert shown[state]["color"] != TRANSPARENT and shown[state]["style"] != "none" \
                and shown[state]["width"] > 0, (state, shown[state])
    assert len({shown[state]["border"] for state in anchors if state != "uncovered"}) == len(anchors) - 1, shown
    for state in CHECK_STATES:
        assert shown[state]["fill"] != TRANSPARENT, (state, shown[state])
    assert len({shown[state]["fill"] for state in CHECK_STATES}) == len(CHECK_STATES), shown
    # The legend's swatch of a state is drawn as the blocks of that state.
    seen_anchor, seen_check = set(), set()
    for report in ("passed", "failed", "unrun", "before"):
        page.goto((pages[report] / "claims_text.html").as_uri())
        for state in anchors:
            block = page.locator(f".block.anchor-{state}")
            if block.count():
                seen_anchor.add(state)
                on_block = block.first.evaluate(SHOWN)
                key = "fill" if state == "uncovered" else "border"
                assert on_block[key] == shown[state][key], (report, state, on_block, shown[state])
        for state in CHECK_STATES:
            block = page.locator(f".block.check-{state}")
            if block.count():
                seen_check.add(state)
                assert block.first.evaluate(SHOWN)["fill"] == shown[state]["fill"], (report, state)
    assert seen_check == set(CHECK_STATES)
    assert {"unchanged", "reworded", "changed", "unreviewed", "marked", "uncovered"} <= seen_anchor, seen_anchor


def test_a_drifted_block_says_its_results_predate_the_change(page, pages):
    """The results of a run on the text before its revision, on the revised text's page: the changed block's
    check fill is "before the change", not "passed", and its statement and the page's notice say so; an unchanged
    block keeps its verdict. A run on the revised text shows no such fill."""
    page.goto((pages["before"] / "claims_text.html").as_uri())
    statement = page.locator("#place-l1-triangular-at-ten")
    block = page.locator(".block", has=statement)
    assert block.get_attribute("data-check") == "before-the-change"
    assert block.get_attribute("data-anchor") == "changed"
    assert "checks passed before the change" in statement.inner_text()
    assert page.locator(".block", has=page.locator("#place-l1-triangular-closed-form")).get_attribute(
        "data-check") == "passed"  # the formula did not change: the run saw it as it is
    notice = page.locator("#stale-results")
    assert notice.is_visible() and "The results of 1 statement predate the text's change" in notice.inner_text()
    assert block.evaluate(SHOWN)["fill"] != page.locator(".block.check-passed").first.evaluate(SHOWN)["fill"]
    page.locator('#filters input[data-filter="check"][value="before-the-change"]').uncheck()
    assert not block.is_visible()
    page.goto((pages["passed"] / "claims_text.html").as_uri())
    assert page.locator(".block.check-before-the-change").count() == 0
    assert page.locator("#stale-results").count() == 0
    assert "checks passed" in page.locator("#place-l1-triangular-at-ten").inner_text()


def test_the_filters_of_the_annotated_text_work(page, pages):
    page.goto((pages["passed"] / "claims_text.html").as_uri())
    blocks = page.locator(".block")
    total = blocks.count()
    unchanged = page.locator(".block.anchor-unchanged").count()
    assert 0 < unchanged < total
    page.locator('#filters input[data-filter="anchor"][value="unchanged"]').uncheck()
    assert page.locator(".block.anchor-unchanged:visible").count() == 0
    assert page.locator(".block:visible").count() == total - unchanged
    page.locator('#filters input[data-filter="anchor"][value="unchanged"]').check()
    page.locator("#only-unheld").check()
    visible = page.locator(".block:visible")
    assert visible.count() == page.locator('.block[data-unheld="1"]').count() >= 2
    assert all(visible.nth(index).get_attribute("data-unheld") == "1" for index in range(visible.count()))
    page.locator("#only-unheld").uncheck()
    page.locator('#filters input[data-filter="check"][value="not-checkable"]').uncheck()
    assert page.locator(".block.check-not-checkable:visible").count() == 0


def test_formulas_render_as_mathml_in_both_pages(page, pages):
    for name in ("claims_text.html", "claims_report.html"):
        page.goto((pages["passed"] / name).as_uri())
        formula = page.locator("math").first
        box = formula.bounding_box()
        assert box is not None and box["width"] > 20 and box["height"] > 10, name
        assert page.locator("math mfrac").count() >= 1, name
    page.goto((pages["passed"] / "claims_text.html").as_uri())
    assert page.locator(".kind-formula code.tex").count() == 0  # no formula fell back to its source


def test_links_resolve_from_the_text_to_the_report_and_back(page, pages):
    page.goto((pages["passed"] / "claims_text.html").as_uri())
    link = page.locator('a[href="claims_report.html#statement-l1-triangular-at-ten"]').first
    link.click()
    page.wait_for_url("**/claims_report.html#statement-l1-triangular-at-ten")
    assert page.evaluate("document.querySelector(':target') && document.querySelector(':target').id") == \
        "statement-l1-triangular-at-ten"
    back = page.locator("#statement-l1-triangular-at-ten a.to-text")
    target = back.get_attribute("href").partition("#")[2]
    back.click()
    page.wait_for_url(f"**/claims_text.html#{target}")
    assert page.evaluate("document.querySelector(':target').id") == target
    assert "l1-triangular-at-ten" in page.locator(f"#{target}").inner_text()
    page.goto((pages["passed"] / "claims_report.html").as_uri())
    from_claim = page.locator("#claim-triangular-closed-form a.to-text").first
    target = from_claim.get_attribute("href").partition("#")[2]
    from_claim.click()
    page.wait_for_url(f"**/claims_text.html#{target}")
    assert page.evaluate("document.querySelector(':target').id") == target
    # Every fragment either page links to names exactly one element of the page it names.
    ids, links = {}, {}
    for name in ("claims_report.html", "claims_text.html"):
        page.goto((pages["passed"] / name).as_uri())
        ids[name] = page.eval_on_selector_all("[id]", "elements => elements.map(element => element.id)")
        links[name] = page.eval_on_selector_all("a[href*='#']", "links => links.map(link => link.getAttribute('href'))")
    for name, hrefs in links.items():
        for href in hrefs:
            file, _, fragment = href.partition("#")
            if file in ("", "claims_report.html", "claims_text.html"):
                assert ids[file or name].count(fragment) == 1, (name, href)


def test_the_report_filters_hide_claims(page, pages):
    page.goto((pages["failed"] / "claims_report.html").as_uri())
    claims_shown = page.locator("article.claim:visible")
    assert claims_shown.count() == 1
    page.locator('#filters input[data-filter="status"][value="failed"]').uncheck()
    assert page.locator("article.claim:visible").count() == 0
    assert page.locator("#text-counts").is_visible()
