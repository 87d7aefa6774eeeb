// gitmem console: the live timeline (progressive enhancement; every
// page works without it). When the memory's head moves, the stream says
// so, and the timeline page is fetched again: the changes not shown yet
// are added at the top. They are nodes the server rendered (escaped by
// its templates), parsed as an inert document: no memory content is ever
// read as markup here.
"use strict";
(function () {
  var status = document.getElementById("live-status");
  var list = document.getElementById("timeline");
  if (!status || !list || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false, again = false;
  function shown() {
    var seen = {};
    list.querySelectorAll(":scope > li[data-hash]").forEach(function (li) { seen[li.dataset.hash] = true; });
    return seen;
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (!res.ok) { throw new Error("the timeline answered " + res.status); }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("timeline");
        if (!fresh) { return; }
        var seen = shown(), added = [];
        fresh.querySelectorAll(":scope > li[data-hash]").forEach(function (li) {
          if (!seen[li.dataset.hash]) { added.push(li); }
        });
        if (added.length === 0) { return; }
        list.querySelectorAll(":scope > li:not([data-hash])").forEach(function (li) { li.remove(); });
        for (var i = added.length - 1; i >= 0; i--) {
          var li = document.adoptNode(added[i]);
          li.classList.add("new");
          list.insertBefore(li, list.firstChild);
        }
        status.textContent = added.length + " new change(s) added at the top. New changes appear here as they land.";
      })
      .catch(function () {
        status.textContent = "New changes could not be loaded: reload the page to see them.";
      })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource(status.dataset.stream);
  source.addEventListener("head", refresh);
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      status.textContent = "Live updates stopped: reload the page to see new changes.";
    }
  });
})();
