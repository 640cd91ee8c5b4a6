"use strict";
// The report's page: the session list and each session's detail are built here from the JSON
// the page carries, so thousands of sessions stay one self-contained file that opens fast.
// Session text only ever goes in as text (textContent), never as markup.
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const sessions = data.sessions;
  const PAGE = 50;
  const state = { query: "", status: "all", project: "", sort: "cost", page: 0 };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "cls") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const number = (n) => n.toLocaleString("en-US");
  const dollars = (d) => (d === null || d === undefined ? null : "$" + (d >= 1 ? d.toFixed(2) : d.toFixed(4)));
  const plural = (n, word) => number(n) + " " + word + (n === 1 ? "" : "s");
  const tokens = (n, estimated) => (estimated ? "~" : "") + plural(n, "token");

  // -- the list ------------------------------------------------------------------------------

  const search = document.getElementById("search");
  const statusSelect = document.getElementById("status");
  const projectSelect = document.getElementById("project");
  const sortSelect = document.getElementById("sort");
  const listBody = document.getElementById("session-rows");
  const shown = document.getElementById("shown");
  const prev = document.getElementById("prev");
  const next = document.getElementById("next");

  for (const project of data.projects) projectSelect.append(el("option", { value: project, text: project }));

  const haystack = sessions.map((s) =>
    [s.id, s.title, s.project, s.cwd, s.path, ...s.kinds.map((k) => k[0])].join(" ").toLowerCase()
  );

  function matches(s, index) {
    if (state.project && s.project !== state.project) return false;
    if (state.status === "loops" && !s.loops) return false;
    if (state.status === "signals" && !s.signals) return false;
    if (state.status === "findings" && !(s.loops || s.signals)) return false;
    if (state.status === "clean" && s.status !== "clean") return false;
    if (state.status === "error" && s.status !== "error") return false;
    if (!state.query) return true;
    return state.query.split(/\s+/).every((word) => haystack[index].includes(word));
  }

  const SORTS = {
    cost: (a, b) => (b.loopCost - a.loopCost) || (b.signals - a.signals) || (b.lastMs - a.lastMs),
    loops: (a, b) => (b.loops - a.loops) || (b.loopCost - a.loopCost),
    signals: (a, b) => (b.signals - a.signals) || (b.loopCost - a.loopCost),
    last: (a, b) => b.lastMs - a.lastMs,
    tokens: (a, b) => (b.tokensIn + b.tokensOut) - (a.tokensIn + a.tokensOut),
  };

  function filtered() {
    const out = sessions.filter(matches);
    out.sort(SORTS[state.sort]);
    return out;
  }

  function badges(s) {
    const cell = el("td", { cls: "findings" });
    if (s.status === "error") cell.append(el("span", { cls: "badge error", text: "unreadable" }));
    for (const [kind, count, type, card] of s.kinds) {
      const text = kind + (count > 1 ? " ×" + count : "");
      cell.append(card ? el("a", { cls: "badge " + type, href: "#" + card, text }) : el("span", { cls: "badge " + type, text }));
    }
    if (s.status === "clean") cell.append(el("span", { cls: "badge clean", text: "no findings" }));
    return cell;
  }

  function renderList() {
    const rows = filtered();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    const page = rows.slice(start, start + PAGE);
    listBody.replaceChildren(
      ...page.map((s) => {
        const cost = s.loopDollars !== null ? dollars(s.loopDollars) : null;
        return el(
          "tr",
          { cls: "session-row " + s.status, "data-session": s.id },
          el(
            "td",
            { cls: "name" },
            el("a", { href: "#" + s.anchor, text: s.title || s.id || s.path }),
            el("br"),
            el("span", { cls: "muted mono", text: s.id })
          ),
          el("td", { cls: "project", text: s.project }),
          el("td", { cls: "when", text: s.last }),
          el("td", { cls: "num turns", text: number(s.turns) }),
          el(
            "td",
            { cls: "num cost" },
            s.loops ? tokens(s.loopTokens, s.loopTokensEst) : "—",
            cost && s.loops ? el("br") : null,
            cost && s.loops ? el("span", { cls: "muted", text: cost }) : null
          ),
          badges(s)
        );
      })
    );
    shown.textContent = rows.length
      ? `sessions ${number(start + 1)}–${number(start + page.length)} of ${number(rows.length)}` +
        (rows.length < sessions.length ? ` (filtered from ${number(sessions.length)})` : "")
      : `no session matches (of ${number(sessions.length)})`;
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
  }

  search.addEventListener("input", () => { state.query = search.value.trim().toLowerCase(); state.page = 0; renderList(); });
  statusSelect.addEventListener("change", () => { state.status = statusSelect.value; state.page = 0; renderList(); });
  projectSelect.addEventListener("change", () => { state.project = projectSelect.value; state.page = 0; renderList(); });
  sortSelect.addEventListener("change", () => { state.sort = sortSelect.value; state.page = 0; renderList(); });
  prev.addEventListener("click", () => { state.page -= 1; renderList(); });
  next.addEventListener("click", () => { state.page += 1; renderList(); });

  // -- one session ---------------------------------------------------------------------------

  const detail = document.getElementById("detail");
  const byAnchor = new Map(sessions.map((s) => [s.anchor, s]));

  function commandBox(s) {
    if (!s.next.length) return null;
    const box = el("div", { cls: "next" }, el("h3", { text: "What to run next" }));
    if (s.clean) {
      box.append(
        el(
          "p",
          {},
          `clean cuts ${plural(s.clean.messages, "assistant message")} (${number(s.clean.chars)} loop chars` +
            (s.loops ? `, about ${tokens(s.loopTokens, s.loopTokensEst)}` : "") +
            "), backs the log up first and leaves a marker where text was removed:"
        )
      );
    }
    for (const [why, command] of s.next) {
      box.append(el("p", { cls: "why", text: why }), el("pre", { cls: "command" }, el("code", { text: command })));
    }
    return box;
  }

  function timeline(s) {
    const line = el("div", { cls: "timeline", "aria-label": "turn timeline" });
    for (const [first, last, classes, title, target] of s.cells) {
      const cls = "cell " + classes;
      line.append(target === null ? el("span", { cls, title }) : el("a", { cls, title, href: "#" + s.anchor + "-t" + target }));
    }
    return line;
  }

  function turnsTable(s) {
    const head = el("tr", {}, ...["turn", "prompt", "steps", "tool calls", "failed", "retries", "findings"].map((h, i) => el("th", { cls: i === 0 || (i > 1 && i < 6) ? "num" : null, text: h })));
    const body = el("tbody");
    for (const row of s.rows) {
      const findings = el("td", { cls: "findings" });
      for (const [id, kind] of row.loops) findings.append(el("a", { cls: "badge loop", href: "#" + id, text: kind }));
      for (const [id, kind] of row.signals) findings.append(el("a", { cls: "badge signal", href: "#" + id, text: kind }));
      if (row.hidden) findings.append(el("span", { cls: "muted", text: " +" + row.hidden + " not shown" }));
      body.append(
        el(
          "tr",
          { cls: "turn", id: s.anchor + "-t" + row.turn },
          el("td", { cls: "num", text: row.turn }),
          el("td", { cls: "prompt" }, row.prompt || "—", row.end ? el("span", { cls: "muted", text: " (ended: " + row.end + ")" }) : null),
          el("td", { cls: "num", text: row.steps }),
          el("td", { cls: "num", text: row.tools }),
          el("td", { cls: "num", text: row.failed }),
          el("td", { cls: "num", text: row.retries }),
          findings
        )
      );
    }
    return el("table", { cls: "turns" }, el("thead", {}, head), body);
  }

  function loopCard(card) {
    const article = el("article", { cls: "card loop", id: card.id }, el("h4", { text: `${card.where} · seq ${card.seq} · ${card.label}` }));
    if (card.narration) {
      article.append(
        el("p", { cls: "muted", text: `messages at seqs ${card.seqs.join(", ")} (turns ${card.turn}–${card.lastTurn}) show the same visible text:` }),
        el("pre", { cls: "context", text: card.excerpt })
      );
    } else if (card.found) {
      const pre = el("pre", { cls: "context" });
      if (card.omittedBefore) pre.append(el("span", { cls: "omitted", text: `… ${number(card.omittedBefore)} earlier chars …\n` }));
      pre.append(el("span", { cls: "before", text: card.before }));
      const copy = el("span", { cls: "copy", title: "kept: the first copy of the repeated unit", text: card.copy[0] });
      if (card.copy[1]) copy.append(el("span", { cls: "omitted", text: ` … ${number(card.copy[1])} chars … ` }), card.copy[2]);
      pre.append(copy, el("mark", { cls: "pruned", title: `cut: ${card.loopChars} chars`, text: card.pruned }));
      if (card.prunedMore) pre.append(el("span", { cls: "omitted", text: ` … ${number(card.prunedMore)} more chars cut` }));
      article.append(
        pre,
        el(
          "p",
          { cls: "legend" },
          el("span", { text: "plain: kept" }),
          card.copy[0] ? el("span", {}, el("i", { cls: "swatch copy" }), "kept: the loop's first copy") : null,
          el("span", {}, el("i", { cls: "swatch loop" }), "cut by looprescue clean (or the proxy, live)")
        )
      );
    } else {
      article.append(el("p", { cls: "muted", text: `starts “${card.excerpt}” (the block could not be read again)` }));
    }
    return article;
  }

  function signalCard(card) {
    const rows = el("tbody");
    card.events.forEach(([seq, type, where, text]) => {
      rows.append(
        type === null
          ? el("tr", {}, el("td", { cls: "num", text: seq }), el("td", { colspan: "3", cls: "muted", text: "not found on the second read (the log changed)" }))
          : el("tr", {}, el("td", { cls: "num", text: seq }), el("td", { cls: "mono", text: type }), el("td", { text: where }), el("td", { cls: "text", text }))
      );
    });
    const summary = `${plural(card.evidenceCount, "evidence event")}: seqs ${card.seqs.join(", ")}` + (card.moreSeqs ? ` and ${card.moreSeqs} more` : "");
    return el(
      "article",
      { cls: "card signal", id: card.id },
      el("h4", { text: `${card.kind} · ${card.where} · metric ${card.metric}` }),
      el("p", { text: card.explanation }),
      el(
        "details",
        { cls: "evidence" },
        el("summary", { text: summary }),
        el("table", { cls: "evidence" }, el("thead", {}, el("tr", {}, ...["seq", "event", "where", "what"].map((h) => el("th", { text: h })))), rows)
      )
    );
  }

  function renderSession(s) {
    const section = el("section", { cls: "session " + s.status, id: s.anchor, "data-session": s.id });
    section.append(
      el("h2", { text: s.title || s.id || s.path }),
      el(
        "p",
        { cls: "meta" },
        el("span", { cls: "mono", text: s.id }),
        ` · ${s.project} · ${plural(s.turns, "turn")} · ${plural(s.events, "event")} · ${s.size} · created ${s.created} · last event ${s.last}`,
        s.cwd ? " · cwd " : null,
        s.cwd ? el("span", { cls: "mono", text: s.cwd }) : null,
        el("br"),
        el("span", { cls: "mono", text: s.path })
      )
    );
    const spent = el("p", { cls: "meta spent" });
    if (s.tokensIn || s.tokensOut) {
      spent.append(`model calls: ${tokens(s.tokensIn, false)} in, ${tokens(s.tokensOut, s.tokensEst)} out`);
      if (s.dollars !== null) spent.append(` (${dollars(s.dollars)})`);
    }
    if (s.loops) {
      spent.append(` · loops: ${tokens(s.loopTokens, s.loopTokensEst)} of output`);
      if (s.loopDollars !== null) spent.append(` (${dollars(s.loopDollars)})`);
    }
    if (spent.childNodes.length) section.append(spent);
    if (s.error) section.append(el("p", { cls: "error", text: "cannot read this session: " + s.error }));
    for (const note of s.notes) section.append(el("p", { cls: "notes", text: "note: " + note }));
    section.append(commandBox(s) || "");
    if (s.cells.length) {
      section.append(el("h3", { text: "Turns" }), timeline(s), turnsTable(s));
      if (s.hiddenRows) {
        section.append(el("p", { cls: "muted", text: `${plural(s.hiddenRows, "turn")} not listed` + (s.hiddenFindingRows ? `, ${s.hiddenFindingRows} of them with findings` : "") + " (each is a cell of the timeline)." }));
      }
    }
    if (s.loopCards.length) {
      section.append(el("h3", { text: "Loops" }), ...s.loopCards.map(loopCard));
      if (s.moreLoops) section.append(el("p", { cls: "muted" }, `${s.moreLoops} more loops: `, el("code", { text: "looprescue scan " + s.id }), " lists them all."));
    }
    if (s.signalCards.length) {
      section.append(el("h3", { text: "Detour signals" }), ...s.signalCards.map(signalCard));
      if (s.moreSignals) section.append(el("p", { cls: "muted" }, `${s.moreSignals} more signals: `, el("code", { text: "looprescue doctor " + s.id }), " lists them all."));
    }
    if (s.status === "clean") section.append(el("p", { cls: "muted", text: "No loops and no detour signals in this session." }));
    return section;
  }

  function route() {
    const target = decodeURIComponent(location.hash.slice(1));
    const anchor = target.split("-")[0];
    const s = byAnchor.get(anchor);
    if (!s) { detail.replaceChildren(); return; }
    if (!detail.firstChild || detail.firstChild.id !== anchor) detail.replaceChildren(renderSession(s));
    const node = document.getElementById(target) || detail.firstChild;
    node.scrollIntoView();
  }

  window.addEventListener("hashchange", route);
  renderList();
  route();
  document.body.classList.add("ready");
})();
