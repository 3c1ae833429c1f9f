// One plotly figure, drawn in the page (no iframe) by the bundled plotly.js (app/plotly_bundle), loaded once a tab,
// once the chart comes near the window (whenNear).
// data: {figure: the figure's JSON, src: the bundle's URL}.
// Streamlit's plotly template leaves placeholder colours (#000001..#000040) that its own chart element
// fills from the theme; here they come from the theme's CSS variables (--st-*), so dark mode works too.
const PLACEHOLDER = /#0000([0-3][0-9]|40)/gi;

function library(src) {
  const w = window;
  if (!w.__paralabPlotly) {
    w.__paralabPlotly = w.Plotly ? Promise.resolve(w.Plotly) : new Promise((ok, fail) => {
      const s = document.createElement("script");
      s.src = src;
      s.onload = () => ok(w.Plotly);
      s.onerror = () => { w.__paralabPlotly = null; fail(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }
  return w.__paralabPlotly;
}

// A chart is drawn once it comes within NEAR_PX of the window (at once if it is there already): charts further down
// cost a first visit nothing (drawn, each took ~0.1 s and ~500 DOM nodes on 2 cores); the box keeps the chart's height
// meanwhile, so nothing moves when it is drawn.
const NEAR_PX = 0;

function scroller(el) {  // the box the page scrolls in (Streamlit's main area), else the window
  for (let p = el.parentElement; p; p = p.parentElement) {
    const y = getComputedStyle(p).overflowY;
    if ((y === "auto" || y === "scroll") && p.scrollHeight > p.clientHeight) return p;
  }
  return null;
}

function whenNear(el, draw) {
  if (!("IntersectionObserver" in window)) { draw(); return () => {}; }
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) { seen.disconnect(); draw(); }
  }, {root: scroller(el), rootMargin: `${NEAR_PX}px 0px`});
  seen.observe(el);
  return () => seen.disconnect();
}

function theme(el) {
  const css = getComputedStyle(el);
  const v = (name, dflt) => (css.getPropertyValue(name) || "").trim() || dflt;
  const list = (name, dflt) => v(name, dflt).split(",").map((c) => c.trim());
  const text = v("--st-text-color", "#31333F");
  const faded = `color-mix(in srgb, ${text} 70%, transparent)`;
  const cat = list("--st-chart-categorical-colors",
    "#0068c9,#83c9ff,#ff2b2b,#ffabab,#29b09d,#7defa1,#ff8700,#ffd16a,#6d3fc0,#d5dae5");
  const seq = list("--st-chart-sequential-colors",
    "#e4f5ff,#c7ebff,#a6dcff,#83c9ff,#60b4ff,#3d9df3,#1c83e1,#0068c9,#0054a3,#004280");
  const div = list("--st-chart-diverging-colors",
    "#7d353b,#bd4043,#ff4b4b,#ff8c8c,#ffc7c7,#a6dcff,#60b4ff,#1c83e1,#0054a3,#004280");
  const bg = v("--st-background-color", "#ffffff");
  const grid = v("--st-border-color-light", "rgba(128,128,128,0.25)");
  const colors = {};
  cat.forEach((c, i) => { colors[i + 1] = c; });
  seq.forEach((c, i) => { colors[i + 11] = c; });
  div.forEach((c, i) => { colors[i + 21] = c; });
  Object.assign(colors, {32: v("--st-green-color", "#29b09d"), 33: v("--st-red-color", "#ff2b2b"), 34: cat[0],
                         36: faded, 37: text, 38: bg, 39: grid, 40: v("--st-secondary-background-color", bg)});
  const font = {family: v("--st-font", "sans-serif").replace(/"/g, "'"), color: text, size: 13};
  const axis = {gridcolor: grid, zerolinecolor: grid, linecolor: grid, tickfont: {color: faded},
                title: {font: {color: faded}}, automargin: true};
  return {colors, layout: {font, colorway: cat, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
          xaxis: axis, yaxis: axis, legend: {font: {color: text}}, hoverlabel: {font: {family: font.family}},
          title: {font: {color: text}}}};
}

// One figure per element, the latest: Streamlit calls this function again with each rerun's figure, and calls the
// cleanup a call returned only when the element goes (not when a newer figure arrives). So a figure that arrives
// replaces one still waiting to come near the window (that one is never drawn), and the drawing itself is
// serialised per element (Plotly.react is asynchronous: two in flight on one element could leave the older figure
// drawn), each draw skipped unless its figure is still the element's latest.
export default function ({ parentElement, data }) {
  const load = library(data.src);
  let el = parentElement.querySelector(".paralab-chart");
  if (!el) {
    el = document.createElement("div");
    el.className = "paralab-chart";
    el.style.width = "100%";
    parentElement.appendChild(el);
  }
  if (el.__figure === data.figure) return;
  if (el.__stop) el.__stop();  // the previous figure, if not drawn yet, never will be
  const mine = data.figure;
  el.__figure = mine;
  const t = theme(parentElement);
  const fig = JSON.parse(mine.replace(PLACEHOLDER, (m, n) => t.colors[Number(n)] || m));
  const layout = fig.layout || {};
  el.style.minHeight = (layout.height || 450) + "px";  // no jump while the library loads
  const template = layout.template || {};
  layout.template = {data: template.data || {}, layout: Object.assign({}, t.layout, template.layout || {})};
  const latest = () => el.__figure === mine;
  const draw = () => {
    el.__drawing = Promise.all([load, el.__drawing]).then(([Plotly]) => latest() && Plotly.react(el, {
      data: fig.data || [], layout, frames: fig.frames || [], config: {responsive: true, displaylogo: false}}))
      .catch((e) => { if (latest()) el.textContent = "This chart could not be drawn: " + e.message; });
  };
  const stop = whenNear(el, draw);
  el.__stop = stop;
  return () => {  // the element goes: free plotly's listeners (unless a newer figure owns the element now)
    stop();
    if (!latest()) return;
    el.__figure = null;
    el.__stop = null;
    if (window.Plotly) window.Plotly.purge(el);
  };
}
