"""The sidebar folded on a narrow window: below NARROW_PX wide (an 800 px laptop window, a tablet) the page list
takes ~250 px of the page's width, so a tab opened there starts with it folded (its » button opens it), and
from 1000 px up it starts open. Streamlit's own `initial_sidebar_state="auto"` folds it only below 768 px. A
learner's own opening or folding stands: Streamlit keeps it in the browser's localStorage, and then nothing here
acts; the fold done here is not kept there, so a wider window later starts with the sidebar open again."""
from __future__ import annotations

import streamlit as st

NARROW_PX = 1000  # a window narrower than this (px) starts with the sidebar folded

_FOLD = """<script>
(() => {
  const NARROW_PX = %d;
  const chosen = () => Object.keys(localStorage).filter((k) => k.startsWith("stSidebarCollapsed-"));
  const fold = (tries) => {
    if (window.innerWidth >= NARROW_PX || chosen().length) return;  // wide, or the learner chose
    const sidebar = document.querySelector("[data-testid='stSidebar']");
    const button = document.querySelector("[data-testid='stSidebarCollapseButton'] button");
    if (!sidebar || !button) { if (tries > 0) setTimeout(() => fold(tries - 1), 50); return; }
    if (sidebar.getAttribute("data-collapsed") !== "false") return;  // folded already
    const before = new Set(chosen());
    button.click();  // Streamlit keeps a click as the learner's choice; this one is not theirs
    setTimeout(() => chosen().filter((k) => !before.has(k)).forEach((k) => localStorage.removeItem(k)), 0);
  };
  if (!window.__paralabNarrow) {  // once per tab: later runs and pages leave the sidebar as the learner has it
    window.__paralabNarrow = true;
    fold(100);
    // Streamlit unfolds it again when the window's width changes (its own rule: above 768 px): fold it back
    let wait;
    window.addEventListener("resize", () => { clearTimeout(wait); wait = setTimeout(() => fold(0), 200); });
  }
})();
</script>"""


def fold_sidebar() -> None:
    """Draw (invisibly, in a hidden box at the top of the page) the script that folds the sidebar of a tab opened
    narrower than NARROW_PX; call once per run, before the page's content."""
    with st.container(key="narrow"):
        st.html("<style>.st-key-narrow { display: none; }</style>" + _FOLD % NARROW_PX, unsafe_allow_javascript=True)
