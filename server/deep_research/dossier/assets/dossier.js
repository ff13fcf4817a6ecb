// The dossier's only script (inlined). Optional: without it every page shows in order
// and the navigation links scroll to them. With it: one page at a time, the tree entry
// of the page shown is highlighted and revealed, and titles can be filtered.
(function () {
  'use strict';
  var root = document.documentElement;
  var nav = document.getElementById('nav');
  var first = document.querySelector('main .page');
  if (!nav || !first) {
    return;
  }
  root.classList.add('js');
  var current = null;
  var here = null;

  function pageOf(el) {
    while (el && !(el.classList && el.classList.contains('page'))) {
      el = el.parentElement;
    }
    return el;
  }

  function reveal(el) {
    for (var d = el; d; d = d.parentElement) {
      if (d.tagName === 'DETAILS') {
        d.open = true;
      }
    }
  }

  function show() {
    var id = '';
    try {
      id = decodeURIComponent(location.hash.slice(1));
    } catch (e) {
      id = '';
    }
    var target = id ? document.getElementById(id) : null;
    var page = pageOf(target) || first;
    if (current !== page) {
      if (current) {
        current.classList.remove('current');
      }
      page.classList.add('current');
      current = page;
    }
    if (here) {
      here.classList.remove('here');
    }
    here = nav.querySelector('a[href="#' + page.id + '"]');
    if (here) {
      here.classList.add('here');
      reveal(here);
      here.scrollIntoView({ block: 'nearest' });
    }
    if (target && target !== page) {
      reveal(target);
      target.scrollIntoView();
    } else {
      window.scrollTo(0, 0);
    }
  }

  window.addEventListener('hashchange', show);
  show();

  var all = document.getElementById('all');
  if (all) {
    all.hidden = false;
    all.addEventListener('click', function () {
      var on = root.classList.toggle('all');
      all.textContent = on ? 'One page at a time' : 'Show every page';
    });
  }

  var filter = document.getElementById('filter');
  var items = Array.prototype.slice.call(nav.querySelectorAll('li'));
  var timer = null;
  function applyFilter() {
    var q = filter.value.trim().toLowerCase();
    var i;
    for (i = 0; i < items.length; i++) {
      items[i].dataset.child = '';
    }
    for (i = items.length - 1; i >= 0; i--) {
      var li = items[i];
      var link = li.querySelector('a');
      var match = !q || (link && link.textContent.toLowerCase().indexOf(q) >= 0) || li.dataset.child === '1';
      li.hidden = !match;
      var parent = li.parentElement && li.parentElement.closest('li');
      if (match && parent) {
        parent.dataset.child = '1';
        if (q) {
          var details = parent.querySelector('details');
          if (details) {
            details.open = true;
          }
        }
      }
    }
  }
  if (filter) {
    filter.hidden = false;
    filter.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(applyFilter, 120);
    });
  }
})();
