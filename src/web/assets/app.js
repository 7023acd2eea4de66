// hearth's page: live updates of the Inbox. The server says "inbox" on /events whenever the
// pending confirmations or pairing requests change (decided in a chat, on the command line, by
// expiry, or here); the list is then fetched again. The address is fixed: nothing in the URL
// can point the page elsewhere. EventSource reconnects by itself.
(function () {
  "use strict";
  function start() {
    if (!document.getElementById("inbox-list") || !window.EventSource) {
      return;
    }
    var source = new EventSource("/events");
    source.addEventListener("inbox", function () {
      htmx.ajax("GET", "/inbox/list", { target: "#inbox-list", swap: "outerHTML" });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
