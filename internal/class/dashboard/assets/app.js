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
  let current = null; // the student whose page is open

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The lines go in one inner element: a tile aligns it to its bottom
  // (app.css), so the newest output and the prompt stay in view.
  function renderScreen(pre, screen) {
    const frag = el("span", "lines");
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
    entry.el.className = "tile " + needClass(t.need) + (t.state === "gone" ? " gone" : "") + (entry.el.classList.contains("big") ? " big" : "");
    const head = [el("span", "name", String(t.student))];
    if (t.task) head.push(el("span", "task", (t.card ? String(t.card) + " " : "") + "task " + t.task));
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
    const parts = [t.student, t.card, t.task, t.state, t.instance, t.event, t.error].concat(t.flags || []);
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
    if (current !== null) { studentKey(ev); return; }
    if (ev.target === filter) {
      if (ev.key === "Escape" || ev.key === "Enter") { filter.blur(); move(0); }
      return;
    }
    if (ev.target !== document.body && ev.target.tagName !== "SECTION") return;
    switch (ev.key) {
      case "ArrowRight": case "l": move(1); break;
      case "ArrowLeft": case "h": move(-1); break;
      case "ArrowDown": case "j": move(columns()); break;
      case "ArrowUp": case "k": move(-columns()); break;
      case "/": filter.focus(); break;
      case "L": large.checked = !large.checked; applyLarge(); break;
      case "Enter":
        if (document.activeElement && document.activeElement.classList.contains("tile")) {
          openStudent(document.activeElement.dataset.student);
        }
        break;
      case " ":
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

  grid.addEventListener("click", function (ev) {
    const t = ev.target.closest ? ev.target.closest("section.tile") : null;
    if (t) openStudent(t.dataset.student);
  });

  function applyLarge() {
    document.body.classList.toggle("large", large.checked);
    try { localStorage.setItem("stem-large", large.checked ? "1" : ""); } catch (e) { /* private mode */ }
  }
  try { large.checked = localStorage.getItem("stem-large") === "1"; } catch (e) { /* private mode */ }
  applyLarge();
  large.addEventListener("change", applyLarge);
  filter.addEventListener("input", arrange);

  // The student page: every pane, the Neovim buffer, the debugger, the
  // timeline and the agents, asked again every two seconds while open.
  const view = document.getElementById("student");
  view.tabIndex = -1;
  const help = document.getElementById("help");
  const $ = function (id) { return document.getElementById(id); };
  let timer = null;
  let lastView = null;
  let pending = null; // the action waiting for its confirmation

  function openStudent(name) {
    if (typeof name !== "string" || name === "") return;
    location.hash = "#student=" + encodeURIComponent(name);
  }

  function fromHash() {
    const m = /^#student=(.+)$/.exec(location.hash);
    let name = null;
    if (m) { try { name = decodeURIComponent(m[1]); } catch (e) { name = null; } }
    if (name === current) return;
    current = name;
    clearTimeout(timer);
    lastView = null;
    cancelAction();
    $("actionresult").textContent = "";
    $("hinttext").value = "";
    $("keystext").value = "";
    if (name === null) {
      view.hidden = true; grid.hidden = false; help.hidden = false;
      const e = tiles.get(lastOpened);
      if (e) e.el.focus();
      return;
    }
    lastOpened = name;
    $("sname").textContent = name;
    $("sstatus").textContent = "loading…";
    view.hidden = false; grid.hidden = true; help.hidden = true;
    view.dataset.loaded = "";
    view.focus(); // not the back button: the Enter that opened the page would press it
    load(name);
  }
  let lastOpened = null;

  function load(name) {
    const started = performance.now();
    fetch("/student/" + encodeURIComponent(name), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (v) {
        if (current !== name) return;
        renderStudent(v);
        view.dataset.loaded = String((Number(view.dataset.loaded) || 0) + 1);
        view.dataset.openMs = String(Math.round(performance.now() - started));
        $("sstatus").textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch(function (e) { if (current === name) $("sstatus").textContent = "failed: " + String(e.message); })
      .finally(function () {
        if (current === name) timer = setTimeout(function () { load(name); }, 2000);
      });
  }

  function renderStudent(v) {
    lastView = v;
    const info = [v.task ? "task " + v.task : "", v.state || "", v.level ? "level " + v.level : ""].concat(v.flags || []);
    $("sinfo").textContent = info.filter(Boolean).join(" · ");
    $("serror").hidden = !v.error;
    $("serror").textContent = v.error ? "No open session: " + String(v.error) : "";
    const acts = v.actions || {};
    const any = !!(v.connected && (acts.hint || acts.keys));
    $("sactions").hidden = !any;
    $("hintform").hidden = !(v.connected && acts.hint);
    $("keysform").hidden = !(v.connected && acts.keys);
    $("readonly").hidden = any;
    $("readonly").textContent = v.connected ? "Read-only: student " + String(v.student) + "'s grant is at level " + String(v.level) + ", which gives no hint or keys." : "";
    if (!any) cancelAction();

    const panes = document.createDocumentFragment();
    if (v.pane_error) panes.appendChild(el("p", "error", String(v.pane_error)));
    (v.panes || []).forEach(function (p) {
      const d = el("div", "pane" + (p.active ? " active" : "") + (p.allowed ? " allowed" : ""));
      d.dataset.pane = String(p.id);
      d.appendChild(el("div", "label", String(p.label)));
      if (p.error) d.appendChild(el("div", "error", String(p.error)));
      const pre = el("pre", "screen");
      renderScreen(pre, p.screen);
      d.appendChild(pre);
      panes.appendChild(d);
    });
    $("spanes").replaceChildren(panes);

    // Only the panes the student allows take keys; the choice survives a refresh.
    const sel = $("keyspane");
    const chosen = sel.value;
    const opts = [];
    (v.panes || []).forEach(function (p) {
      if (!p.allowed) return;
      const o = el("option", "", String(p.label));
      o.value = String(p.id);
      opts.push(o);
    });
    sel.replaceChildren.apply(sel, opts);
    if (opts.some(function (o) { return o.value === chosen; })) sel.value = chosen;
    sel.disabled = opts.length === 0;
    if (opts.length === 0) sel.replaceChildren(el("option", "", "no pane allows keys"));

    const n = v.nvim || {};
    const nv = document.createDocumentFragment();
    if (n.error) nv.appendChild(el("p", "error", String(n.error)));
    if (n.file) nv.appendChild(el("div", "label", String(n.file) + (n.mode ? "  mode " + String(n.mode) : "") + (n.cursor ? "  line " + String(n.cursor) : "")));
    const buf = el("pre", "buf");
    (n.lines || []).forEach(function (l, i) {
      if (i > 0) buf.appendChild(document.createTextNode("\n"));
      const cls = ["line"];
      if (l.d && classRE.test(l.d)) cls.push("d-" + l.d);
      if (Number(l.n) === Number(n.cursor)) cls.push("cur");
      const span = el("span", cls.join(" "));
      const ln = el("span", "ln", String(Number(l.n)).padStart(4, " ") + "  ");
      ln.dataset.n = String(Number(l.n));
      span.append(ln, document.createTextNode(String(l.t)));
      buf.appendChild(span);
    });
    nv.appendChild(buf);
    if (n.truncated) nv.appendChild(el("p", "note", "(the buffer goes on; cut here)"));
    const diags = el("ul", "diags");
    (n.diagnostics || []).forEach(function (d) {
      const sev = classRE.test(d.severity) ? d.severity : "";
      diags.appendChild(el("li", "diag " + sev, "line " + String(Number(d.line)) + " " + String(d.severity) + ": " + String(d.message)));
    });
    if ((n.diagnostics || []).length === 0 && !n.error) diags.appendChild(el("li", "note", "no diagnostics"));
    nv.appendChild(diags);
    $("snvim").replaceChildren(nv);
    $("hintpath").textContent = n.file ? String(n.file) : "(no file open)";

    const g = v.gdb || {};
    const gd = document.createDocumentFragment();
    if (g.error) gd.appendChild(el("p", "error", String(g.error)));
    else if (g.state === "no-debugger") gd.appendChild(el("p", "gdbstate", "no debugger running"));
    else if (g.state) gd.appendChild(el("p", "gdbstate", "debugger: " + String(g.state)));
    if (g.text) gd.appendChild(el("pre", "gdb", String(g.text)));
    $("sgdb").replaceChildren(gd);

    const evs = $("sevents");
    const items = (v.events || []).map(function (e) { return el("li", "", String(e)); });
    if (items.length === 0) items.push(el("li", "note", "no event since the dashboard started"));
    evs.replaceChildren.apply(evs, items);
    const ag = $("sagents");
    const agents = (v.agents || []).map(function (a) { return el("li", "", String(a)); });
    if (agents.length === 0) agents.push(el("li", "note", "no agent running"));
    ag.replaceChildren.apply(ag, agents);
    $("saudit").textContent = String(v.audit || "");
  }

  $("snvim").addEventListener("click", function (ev) {
    const n = ev.target.dataset ? Number(ev.target.dataset.n) : 0;
    if (n > 0) { $("hintline").value = String(n); $("hinttext").focus(); }
  });

  function ask(tool, path, body, text) {
    pending = { tool: tool, path: path, body: body, student: current };
    $("confirmtext").textContent = text;
    $("confirm").hidden = false;
    $("confirmyes").focus();
  }

  function cancelAction() {
    pending = null;
    $("confirm").hidden = true;
  }

  $("hintform").addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (!lastView || !lastView.nvim || !lastView.nvim.file) { $("actionresult").textContent = "no file is open in the student's Neovim"; return; }
    const body = { path: String(lastView.nvim.file), line: Number($("hintline").value), text: $("hinttext").value };
    ask("nvim_hint", "hint", body, "nvim_hint to student " + current + "\n  file: " + body.path + "\n  line: " + body.line + "\n  text: " + body.text);
  });

  $("keysform").addEventListener("submit", function (ev) {
    ev.preventDefault();
    const sel = $("keyspane");
    if (sel.disabled) { $("actionresult").textContent = "no pane of this student allows keys"; return; }
    const body = { pane: sel.value, keys: $("keystext").value };
    ask("pane_send_keys", "keys", body, "pane_send_keys to student " + current + "\n  pane: " + body.pane + "\n  keys: " + body.keys);
  });

  $("confirmno").addEventListener("click", cancelAction);
  $("confirmyes").addEventListener("click", function () {
    const p = pending;
    cancelAction();
    if (!p || p.student !== current) return;
    $("actionresult").textContent = "sending " + p.tool + "…";
    fetch("/student/" + encodeURIComponent(p.student) + "/" + p.path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Stem-Action": "1" },
      body: JSON.stringify(p.body)
    }).then(function (r) { return r.json(); }).then(function (res) {
      $("actionresult").textContent = res.ok ? p.tool + " sent: " + String(res.result) : p.tool + " not sent: " + String(res.error);
      if (res.ok && p.tool === "nvim_hint") $("hinttext").value = "";
      if (res.ok && p.tool === "pane_send_keys") $("keystext").value = "";
    }).catch(function (e) { $("actionresult").textContent = p.tool + " failed: " + String(e.message); });
  });

  $("back").addEventListener("click", function () { location.hash = ""; });

  function studentKey(ev) {
    if (ev.key === "Escape") {
      if (!$("confirm").hidden) cancelAction();
      else if (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") ev.target.blur();
      else location.hash = "";
      ev.preventDefault();
      return;
    }
    if (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
    if (ev.key === "L") { large.checked = !large.checked; applyLarge(); ev.preventDefault(); }
  }

  window.addEventListener("hashchange", fromHash);

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
  fromHash();
})();
