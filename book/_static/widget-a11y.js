// The lessons' widgets for readers who use a keyboard or a screen reader (WCAG 2.1 AA; the book's
// test runs axe-core on every page). The ipywidgets HTML manager draws them after the page has
// loaded, so this watches the page and fixes each one as it appears:
// - a slider's handle (role="slider", reached with Tab, moved with the arrow keys) gets the
//   slider's description as its accessible name: "iterations r", not an unnamed slider;
// - a frame explorer's picture gets its text alternative as alt: capsedu.explore.frames gives each
//   frame a tooltip (what it shows and the slider positions), which the widget renders as title.
// - a region that scrolls (a wide output, a long table, an explorer whose picture is wider than
//   the page) can be reached with Tab, so that a keyboard can scroll it.
(function () {
  "use strict";

  function nameSliders(root) {
    root.querySelectorAll(".noUi-handle:not([aria-label])").forEach(function (handle) {
      var widget = handle.closest(".widget-slider, .widget-hslider, .widget-vslider, .widget-inline-hbox");
      var label = widget && widget.querySelector(".widget-label");
      var text = label && label.textContent.trim();
      if (text) handle.setAttribute("aria-label", text);
    });
  }

  function describeImages(root) {
    root.querySelectorAll(".jupyter-widgets img[title]:not([alt])").forEach(function (img) {
      img.setAttribute("alt", img.getAttribute("title"));
    });
  }

  function focusScrollers(root) {
    var scrollers = "main .output, main .cell_output pre, main .jp-OutputArea-output, main table, main .widget-box";
    root.querySelectorAll(scrollers).forEach(function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
      var style = window.getComputedStyle(el);
      var overflows = /(auto|scroll)/.test(style.overflowX + " " + style.overflowY);
      if (scrolls && overflows && !el.hasAttribute("tabindex")) el.setAttribute("tabindex", "0");
    });
  }

  function fix() {
    nameSliders(document);
    describeImages(document);
    focusScrollers(document);
  }

  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; fix(); });
  }

  function start() {
    fix();
    new MutationObserver(schedule).observe(document.body, { childList: true, subtree: true });
    window.addEventListener("resize", schedule);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
