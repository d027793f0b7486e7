// The ipywidgets HTML manager (vendor/html-manager/embed.js) typesets widget labels with MathJax 2's
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); this site loads MathJax 3, which has no Hub.
// The widgets render on the window's "load" event, after DOMContentLoaded, by which time the
// deferred MathJax 3 script has replaced its configuration object with MathJax itself: give it a Hub
// whose Queue typesets the element with MathJax 3 (book/_ext/page_scripts.py).
document.addEventListener("DOMContentLoaded", () => {
  const mathjax = window.MathJax;
  if (!mathjax || mathjax.Hub) return;
  mathjax.Hub = {
    Queue(job) {
      const element = Array.isArray(job) ? job[2] : undefined;
      if (!element || !mathjax.startup) return;
      mathjax.startup.promise.then(() => mathjax.typesetPromise([element]));
    },
  };
});
