// Each stage's details are parsed but not rendered until the stage is opened.
document.querySelectorAll("details.stage").forEach(function (d) {
  d.addEventListener("toggle", function () {
    var t = d.querySelector(":scope > template");
    if (d.open && t) { d.appendChild(t.content.cloneNode(true)); t.remove(); }
  });
});
// A link to a stage (graph, table) opens it.
function openHash() {
  var el = location.hash && document.getElementById(location.hash.slice(1));
  if (el && el.tagName === "DETAILS") { el.open = true; }
}
window.addEventListener("hashchange", openHash);
openHash();
