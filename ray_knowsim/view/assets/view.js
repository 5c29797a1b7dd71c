// ray-knowsim view: the only script of the app (served from /static, CSP script-src 'self').
// It never writes model text into the page: every page is rendered (and escaped) by the server.
(function () {
  var only = document.getElementById('only-moves');
  if (only) {
    only.addEventListener('change', function () { document.body.classList.toggle('only-moves', only.checked); });
  }
  document.addEventListener('keydown', function (ev) {
    if (ev.target && /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) { return; }
    var link = null;
    if (ev.key === 'ArrowLeft' || ev.key === 'k') { link = document.getElementById('conv-prev'); }
    if (ev.key === 'ArrowRight' || ev.key === 'j') { link = document.getElementById('conv-next'); }
    if (link && link.href) { window.location.assign(link.href); }
  });
})();
