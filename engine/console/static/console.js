// PMW console: the topology slider shows the version it points at, and shows it when let go.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var slider = document.getElementById("v");
    var shown = document.getElementById("v-shown");
    var form = document.getElementById("topology-form");
    if (!slider || !shown || !form) { return; }
    slider.addEventListener("input", function () { shown.textContent = slider.value; });
    slider.addEventListener("change", function () { form.submit(); });
  });
}());
