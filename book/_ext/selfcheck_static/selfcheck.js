/* Self-check questions of the course book (book/_ext/selfcheck.py renders the HTML).
   Single choice: a click answers at once. Multi-select: clicks toggle, the button checks.
   Everything is local to the page: no kernel, no network. */
(function () {
  "use strict";

  function options(q) { return Array.prototype.slice.call(q.querySelectorAll(".selfcheck-option")); }
  function why(opt) { return opt.nextElementSibling; }
  function letter(opt) { return opt.querySelector(".selfcheck-letter").textContent; }
  function isRight(opt) { return opt.getAttribute("data-correct") === "true"; }

  function reveal(opt) {
    opt.classList.add(isRight(opt) ? "selfcheck-right" : "selfcheck-wrong");
    var w = why(opt);
    if (w) { w.hidden = false; }
  }

  function answerSingle(q, opt) {
    options(q).forEach(function (o) { o.setAttribute("aria-pressed", o === opt ? "true" : "false"); });
    reveal(opt);
    var fb = q.querySelector(".selfcheck-feedback");
    if (isRight(opt)) {
      fb.textContent = "✓ 回答正确（" + letter(opt) + "）。下面是每个选项的解析。";
      fb.className = "selfcheck-feedback selfcheck-ok";
      options(q).forEach(reveal);
      q.classList.add("selfcheck-done");
    } else {
      fb.textContent = "✗ " + letter(opt) + " 不对，读一读它下面的解析，再试一次。";
      fb.className = "selfcheck-feedback selfcheck-no";
    }
  }

  function checkMulti(q) {
    var picked = [], missed = [], extra = [];
    options(q).forEach(function (o) {
      var on = o.getAttribute("aria-pressed") === "true";
      if (on) { picked.push(letter(o)); }
      if (isRight(o) && !on) { missed.push(letter(o)); }
      if (!isRight(o) && on) { extra.push(letter(o)); }
    });
    var fb = q.querySelector(".selfcheck-feedback");
    if (picked.length === 0) {
      fb.textContent = "先选择至少一个选项。";
      fb.className = "selfcheck-feedback";
      return;
    }
    options(q).forEach(reveal);
    q.classList.add("selfcheck-done");
    if (missed.length === 0 && extra.length === 0) {
      fb.textContent = "✓ 全部正确（" + picked.join("") + "）。";
      fb.className = "selfcheck-feedback selfcheck-ok";
    } else {
      var parts = [];
      if (missed.length) { parts.push("漏选了 " + missed.join("")); }
      if (extra.length) { parts.push("多选了 " + extra.join("")); }
      fb.textContent = "✗ 还不完全对：" + parts.join("，") + "。每个选项的解析已经展开。";
      fb.className = "selfcheck-feedback selfcheck-no";
    }
  }

  function setup(q) {
    var multi = q.getAttribute("data-multi") === "true";
    options(q).forEach(function (opt) {
      function act() {
        if (multi) {
          opt.setAttribute("aria-pressed", opt.getAttribute("aria-pressed") === "true" ? "false" : "true");
        } else {
          answerSingle(q, opt);
        }
      }
      opt.addEventListener("click", function (e) {
        if (e.target.closest("a")) { return; }
        act();
      });
      opt.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); act(); }
      });
    });
    if (multi) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "selfcheck-check";
      button.textContent = "检查答案";
      button.addEventListener("click", function () { checkMulti(q); });
      q.insertBefore(button, q.querySelector(".selfcheck-feedback"));
    }
    q.classList.add("selfcheck-ready");
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll(".selfcheck-question"), setup);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
