// Keep the punctuation that follows inline math on the line of the math. MathJax draws inline
// math as an inline-block element, after which a browser may break a line, so on a narrow
// screen a sentence's period could start the next line alone. After MathJax has typeset the
// page, each inline formula and the punctuation right after it are put in one span that does
// not wrap (class math-nowrap; tests/test_site.py checks it).
(function () {
  "use strict";
  var PUNCTUATION = /^[.,;:!?)\]\u2019\u201d]+/;

  function glue() {
    var formulas = document.querySelectorAll('mjx-container[jax="CHTML"]:not([display="true"])');
    formulas.forEach(function (math) {
      var box = math.closest("span.math") || math;  // Sphinx's span around \( … \)
      if (box.parentNode && box.parentNode.classList &&
          box.parentNode.classList.contains("math-nowrap")) {
        return;
      }
      var next = box.nextSibling;
      if (!next || next.nodeType !== Node.TEXT_NODE) {
        return;
      }
      var match = next.data.match(PUNCTUATION);
      if (!match) {
        return;
      }
      var wrap = document.createElement("span");
      wrap.className = "math-nowrap";
      box.parentNode.insertBefore(wrap, box);
      wrap.appendChild(box);
      next.data = next.data.slice(match[0].length);
      wrap.appendChild(document.createTextNode(match[0]));
    });
  }

  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(glue);
    } else {
      setTimeout(whenTypeset, 100);  // MathJax is loaded after this script
    }
  }

  document.addEventListener("DOMContentLoaded", whenTypeset);
})();
