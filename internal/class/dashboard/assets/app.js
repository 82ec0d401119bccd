// The class dashboard. Every string from a student goes into the page as
// text (textContent, createTextNode); this script never builds HTML from
// strings. Colour classes come from the server, made from SGR numbers.
"use strict";
(function () {
  const grid = document.getElementById("grid");
  const filter = document.getElementById("filter");
  const large = document.getElementById("large");
  const status = document.getElementById("status");
  const tiles = new Map(); // student -> {el, data}
  const classRE = /^[a-z0-9 -]*$/;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function renderScreen(pre, screen) {
    const frag = document.createDocumentFragment();
    (screen || []).forEach(function (line, i) {
      if (i > 0) frag.appendChild(document.createTextNode("\n"));
      (line || []).forEach(function (run) {
        const c = typeof run.c === "string" && classRE.test(run.c) ? run.c : "";
        const text = String(run.t);
        if (c) frag.appendChild(el("span", c, text));
        else frag.appendChild(document.createTextNode(text));
      });
    });
    pre.replaceChildren(frag);
  }

  function needClass(n) {
    if (n >= 80) return "need-hi";
    if (n >= 50) return "need-mid";
    if (n > 0) return "need-lo";
    return "";
  }

  function render(t) {
    let entry = tiles.get(t.student);
    if (!entry) {
      const root = el("section", "tile");
      root.tabIndex = 0;
      const head = el("div", "head");
      const pre = el("pre", "screen");
      const foot = el("div", "foot");
      root.append(head, pre, foot);
      root.dataset.student = String(t.student);
      entry = { el: root, head: head, pre: pre, foot: foot, data: null };
      tiles.set(t.student, entry);
      grid.appendChild(root);
    }
    entry.data = t;
    entry.el.className = "tile " + needClass(t.need) + (entry.el.classList.contains("big") ? " big" : "");
    const head = [el("span", "name", String(t.student))];
    if (t.task) head.push(el("span", "task", "task " + t.task));
    head.push(el("span", "state", String(t.state)));
    (t.flags || []).forEach(function (f) {
      const fc = classRE.test(f) ? f : "";
      head.push(el("span", "flag " + fc, String(f)));
    });
    entry.head.replaceChildren.apply(entry.head, head);
    renderScreen(entry.pre, t.screen);
    const foot = [];
    if (t.error) foot.push(el("span", "error", String(t.error)));
    else if (t.event) foot.push(el("span", "event", String(t.event)));
    else foot.push(el("span", "event", "no event yet"));
    entry.foot.replaceChildren.apply(entry.foot, foot);
  }

  function text(t) {
    const parts = [t.student, t.task, t.state, t.instance, t.event, t.error].concat(t.flags || []);
    (t.screen || []).forEach(function (l) { (l || []).forEach(function (r) { parts.push(r.t); }); });
    return parts.join("\n").toLowerCase();
  }

  function arrange() {
    const list = Array.from(tiles.values());
    list.sort(function (a, b) {
      if (a.data.need !== b.data.need) return b.data.need - a.data.need;
      return a.data.student < b.data.student ? -1 : a.data.student > b.data.student ? 1 : 0;
    });
    const q = filter.value.trim().toLowerCase();
    list.forEach(function (e, i) {
      e.el.classList.toggle("hidden", q !== "" && !text(e.data).includes(q));
      if (grid.children[i] !== e.el) grid.insertBefore(e.el, grid.children[i] || null);
    });
  }

  function visible() {
    return Array.from(grid.children).filter(function (e) { return !e.classList.contains("hidden"); });
  }

  function move(delta) {
    const list = visible();
    if (list.length === 0) return;
    let i = list.indexOf(document.activeElement);
    if (i < 0) i = 0; else i = Math.max(0, Math.min(list.length - 1, i + delta));
    list[i].focus();
  }

  function columns() {
    const list = visible();
    if (list.length < 2) return 1;
    const top = list[0].offsetTop;
    let n = 0;
    while (n < list.length && list[n].offsetTop === top) n++;
    return Math.max(1, n);
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.target === filter) {
      if (ev.key === "Escape" || ev.key === "Enter") { filter.blur(); move(0); }
      return;
    }
    switch (ev.key) {
      case "ArrowRight": case "l": move(1); break;
      case "ArrowLeft": case "h": move(-1); break;
      case "ArrowDown": case "j": move(columns()); break;
      case "ArrowUp": case "k": move(-columns()); break;
      case "/": filter.focus(); break;
      case "L": large.checked = !large.checked; applyLarge(); break;
      case "Enter":
        if (document.activeElement && document.activeElement.classList.contains("tile")) {
          document.activeElement.classList.toggle("big");
          document.activeElement.scrollIntoView({ block: "nearest" });
        }
        break;
      case "Escape":
        Array.from(grid.children).forEach(function (e) { e.classList.remove("big"); });
        break;
      default: return;
    }
    ev.preventDefault();
  });

  function applyLarge() {
    document.body.classList.toggle("large", large.checked);
    try { localStorage.setItem("stem-large", large.checked ? "1" : ""); } catch (e) { /* private mode */ }
  }
  try { large.checked = localStorage.getItem("stem-large") === "1"; } catch (e) { /* private mode */ }
  applyLarge();
  large.addEventListener("change", applyLarge);
  filter.addEventListener("input", arrange);

  const src = new EventSource("/events");
  src.addEventListener("hello", function (ev) {
    const h = JSON.parse(ev.data);
    document.getElementById("title").textContent = "class " + String(h.class);
    document.title = "stem class " + String(h.class);
    status.textContent = "live";
  });
  src.addEventListener("tiles", function (ev) {
    JSON.parse(ev.data).forEach(render);
    arrange();
    status.textContent = "live, " + tiles.size + " students";
    document.body.dataset.updates = String((Number(document.body.dataset.updates) || 0) + 1);
  });
  src.onerror = function () { status.textContent = "disconnected; retrying…"; };
})();
