// The app page's status panel follows the server's events (the operation's progress and the
// app's recorded status); when the sync status changes, the diff is compared again.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const panel of document.querySelectorAll("[data-events]")) {
    const source = new EventSource(panel.dataset.events);
    let last = panel.querySelector(".live")?.dataset.sync + "|" +
      panel.querySelector(".live")?.dataset.phase;
    source.addEventListener("status", (event) => {
      panel.innerHTML = event.data;
      const live = panel.querySelector(".live");
      const now = live?.dataset.sync + "|" + live?.dataset.phase;
      if (now !== last && window.htmx) {
        const diff = document.getElementById("diff");
        if (diff) window.htmx.trigger(diff, "refresh");
      }
      last = now;
    });
    window.addEventListener("pagehide", () => source.close());
  }
});
