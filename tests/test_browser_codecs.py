"""The Codecs page's bit explorer as a Float Toy, in a real browser (Playwright on Debian's Chromium, as
tests/test_browser.py): a typed value lights its code's bits, each field in its own colour with the bit's digit on
it, a clicked bit flips the code and the Value field follows, the number line draws, and at 800 px nothing scrolls
sideways. Screenshots at 1400 and 800 px go to $PARALAB_SCREENSHOTS when set. Skipped without /usr/bin/chromium."""
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from app_browser import draw_all, settle  # noqa: E402
from browser_fixtures import browser, needs_chromium, server, shot  # noqa: E402,F401  (shared fixtures)
from browser_fixtures import no_exception  # noqa: E402

pytestmark = needs_chromium

# each field's pills: the background of a lit (1) and an unlit (0) one, and the digit each shows (CSS ::before)
_PILLS = """(field) => {
  const box = document.querySelector(`.st-key-bx_field_${field}`);
  const style = (sel, pseudo) => { const b = box.querySelector(sel); return b && getComputedStyle(b, pseudo); };
  const on = "button[aria-pressed='true']", off = "button[aria-pressed='false']";
  return {lit: style(on) && style(on).backgroundColor, unlit: style(off) && style(off).backgroundColor,
          one: style(on, '::before') && style(on, '::before').content,
          zero: style(off, '::before') && style(off, '::before').content};
}"""


def _metric(page, label: str) -> str:
    box = page.locator("[data-testid='stMetric']", has_text=label).first
    return box.locator("[data-testid='stMetricValue']").inner_text().strip()


def _wait_metric(page, label: str, want: str) -> None:
    page.wait_for_function(
        """([label, want]) => [...document.querySelectorAll("[data-testid='stMetric']")].some(m =>
             m.innerText.split('\\n')[0].trim() === label && m.querySelector("[data-testid='stMetricValue']")
               .innerText.trim() === want)""", arg=[label, want], timeout=60_000)
    settle(page)


def test_float_toy_types_a_value_and_flips_a_bit(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/codecs?guess=skip&section=Bit+explorer&bx_fmt=fp16")
    settle(page)
    value = page.locator("[data-testid='stTextInput']", has_text="Value").locator("input")
    value.fill("0.1")
    value.press("Enter")
    _wait_metric(page, "Value", "0.0999756")  # fp16's code for 0.1
    no_exception(page, "codecs bit explorer")
    assert _metric(page, "Next above") == "0.100037" and _metric(page, "Rounds from") == "[0.0999451, 0.100006]"
    assert page.get_by_text("You typed 0.1: fp16 stores 0.0999755859375").count() == 1
    # coloured fields: each field's lit bits in its own colour, the digit 1 on a lit bit and 0 on an unlit one
    fields = {f: page.evaluate(_PILLS, f) for f in ("sign", "exponent", "mantissa")}
    assert fields["exponent"]["lit"] == "rgb(84, 162, 75)" and fields["mantissa"]["lit"] == "rgb(228, 87, 86)"
    assert fields["sign"]["unlit"] == "rgb(255, 255, 255)" and fields["sign"]["zero"] == '"0"'
    assert fields["mantissa"]["one"] == '"1"' and fields["mantissa"]["zero"] == '"0"'
    assert draw_all(page) >= 1  # the number line
    page.get_by_text("Bit explorer (Float Toy)").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, tmp_path, "codecs-float-toy-1400")
    # click the mantissa's last bit (0 for 0.1's code): the next value up, in the field and the URL
    page.locator(".st-key-bx_field_mantissa button").filter(has_text=re.compile(r"^m0$")).click()
    _wait_metric(page, "Value", "0.100037")
    assert value.input_value() == "0.10003662109375"
    query = parse_qs(urlparse(page.url).query)
    assert query["bx_code"] == ["11879"] and query["bx_x"] == ["0.10003662109375"]
    assert page.evaluate(_PILLS, "mantissa")["lit"] == "rgb(228, 87, 86)"
    no_exception(page, "codecs bit explorer after a bit flip")
    page.set_viewport_size({"width": 800, "height": 1000})
    settle(page)
    assert page.evaluate("() => document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth") <= 0
    page.get_by_text("Bit explorer (Float Toy)").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, tmp_path, "codecs-float-toy-800")
    page.close()

