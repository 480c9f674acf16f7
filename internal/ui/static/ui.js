// cctrace turns page: while the page shows something that can change (data-poll="1"), fetch it
// again every two seconds and swap in the new <main>. No libraries, no other requests.
(function () {
  "use strict";
  var period = 2000;
  var status = document.getElementById("status");
  var updated = document.querySelector("header .updated");

  function setStatus(cls, text) {
    if (!status) return;
    status.className = "status " + cls;
    status.textContent = text;
  }

  function schedule(delay) {
    window.setTimeout(refresh, delay);
  }

  function refresh() {
    if (document.body.dataset.poll !== "1") return;
    if (document.hidden) { schedule(period); return; }
    fetch(window.location.href, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (resp) {
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var main = doc.getElementById("main");
        if (!main) throw new Error("no <main> in the page");
        document.getElementById("main").replaceWith(main);
        document.body.dataset.poll = doc.body.dataset.poll;
        document.body.dataset.live = doc.body.dataset.live;
        var live = doc.body.dataset.live === "1";
        setStatus(live ? "live" : "", live ? "live" : "idle");
        var u = doc.querySelector("header .updated");
        if (u && updated) updated.textContent = u.textContent;
        schedule(period);
      })
      .catch(function () {
        setStatus("offline", "cctrace not reachable");
        schedule(period * 3);
      });
  }

  schedule(period);
})();
