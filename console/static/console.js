// The console's one script: it reloads the live part of the page (#live) every
// data-refresh milliseconds, unless the reader is typing in a form. The page reads
// the same without it; then reload it by hand.
(function () {
  "use strict";
  var ms = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!ms || !window.fetch || !window.DOMParser) { return; }
  var stamp = document.getElementById("refreshed");
  function later() { setTimeout(tick, ms); }
  function tick() {
    var live = document.getElementById("live");
    var a = document.activeElement;
    if (!live || (a && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName))) { later(); return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Refresh": "1" } })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh) { live.replaceWith(document.importNode(fresh, true)); }
        if (stamp) { stamp.textContent = "refreshed " + new Date().toISOString().replace(/\.\d+Z$/, "Z"); }
      })
      .catch(function (e) { if (stamp) { stamp.textContent = "refresh failed (" + e.message + "); retrying"; } })
      .then(later);
  }
  later();
}());
