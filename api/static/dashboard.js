// vigil's dashboard: reads the token-protected API of the server that served it. No build step.
// The token is typed once (or passed once as #token=... and removed from the address bar) and
// kept in this tab's sessionStorage. Every figure shown keeps its raw value in data-value.
"use strict";
(() => {
  const KEY = "vigil.api_token";
  const REFRESH_MS = 3000;
  const EQUITY_EVERY = 3; // refreshes
  const MAX_DECISIONS = 100;
  const RETRIES = 3; // a request the API sheds (503/429 with Retry-After) is asked again this often
  const RETRY_CAP_MS = 30000;
  const $ = (id) => document.getElementById(id);
  const usd = (v) => v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const num = (v, d) => v.toLocaleString("en-US", { maximumFractionDigits: d });
  const utc = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19) + "Z";
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let token = null;
  let charts = null;
  let refreshes = 0;

  class Unauthorized extends Error {}

  function takeToken() {
    const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
    if (m) {
      sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem(KEY);
  }

  // The wait a 503 (busy, or the daemon not answering) or 429 (over the request ceiling) asks
  // for in Retry-After (seconds or an HTTP date), at most RETRY_CAP_MS; null when it asks none.
  function retryAfterMs(r) {
    if (r.status !== 503 && r.status !== 429) return null;
    const value = r.headers.get("Retry-After");
    if (value === null) return null;
    const ms = /^\d+$/.test(value.trim()) ? Number(value) * 1000 : Date.parse(value) - Date.now();
    return Number.isNaN(ms) ? null : Math.min(RETRY_CAP_MS, Math.max(0, ms));
  }

  // A request the API sheds under load is asked again after the wait it names, up to RETRIES
  // times: the page shows an error only when the API stays busy (it is never half loaded by one
  // busy moment, and a save or a halt is not reported failed when it was never run).
  async function api(path, options = {}) {
    const headers = { ...(options.headers || {}), Authorization: `Bearer ${token}` };
    for (let retries = 0; ; retries++) {
      const r = await fetch(path, { ...options, headers });
      if (r.status === 401) throw new Unauthorized("the token was refused");
      const wait = retryAfterMs(r);
      if (wait !== null && retries < RETRIES) {
        await r.body?.cancel();
        await sleep(wait);
        continue;
      }
      const body = await r.json();
      if (!r.ok) throw new Error(body.detail || `HTTP ${r.status}`);
      return body;
    }
  }

  function show(id, text, value, level) {
    const el = $(id);
    el.textContent = text;
    el.dataset.value = value === null || value === undefined ? "" : String(value);
    if (level !== undefined) el.dataset.level = level;
  }

  function problem(text) {
    const el = $("problem");
    el.hidden = !text;
    el.textContent = text || "";
  }

  function renderStatus(s) {
    show("source", s.source === "daemon" ? "live daemon" : "state dir (no daemon)", s.source);
    show("clock", utc(s.now_ms), s.now_ms);
    const t = s.trading;
    show("trading-state", t.state || "n/a", t.state, t.state || "");
    $("trading-reason").textContent = t.state ? (t.reason || "") : s.unavailable.trading || "";
    const a = s.agent;
    if (a) {
      show("breaker", a.breaker, a.breaker, a.breaker);
      $("decider").textContent = a.enabled ? `Claude: ${a.calls} calls, ${a.failed_calls} failed` : `fallback decides: ${a.disabled_reason}`;
      if (a.budget_left_today_usd === null) show("budget", "no budget", "", "");
      else show("budget", `$${usd(a.budget_left_today_usd)}`, a.budget_left_today_usd, a.budget_exhausted ? "spent" : "");
      $("cost").textContent = `spent today $${usd(a.cost_today_usd)}, total $${usd(a.cost_total_usd)}`;
    } else {
      show("breaker", "n/a", null);
      $("decider").textContent = s.unavailable.agent || "";
      show("budget", "n/a", null);
      $("cost").textContent = "";
    }
    if (s.gate) {
      const g = s.gate;
      show("gate-passes", `${num(g.passes, 0)} passes`, g.passes);
      $("gate-layers").textContent = Object.entries(g.passes_by_layer).map(([k, v]) => `${k.replace("_", " ")} ${v}`).join(", ");
    } else {
      show("gate-passes", "n/a", null);
      $("gate-layers").textContent = s.unavailable.gate || "";
    }
    const age = s.heartbeat_age_secs;
    // no age is no file, or one dated in the future: the API says which, as vigil status does
    show("heartbeat", age === null ? s.unavailable.heartbeat || "none" : `${num(age, 0)} s ago`, age);
    const loops = s.loops || [];
    const down = loops.filter((l) => l.state !== "running");
    $("loops").textContent = loops.length ? (down.length ? `not running: ${down.map((l) => l.name).join(", ")}` : `${loops.length} loops running`) : "";
  }

  function renderCost(c) {
    const body = $("cost-days").tBodies[0];
    $("cost-prices").textContent = c ? `last ${c.days_shown} days, prices as of ${c.prices_as_of || "n/a"}` : "";
    const rows = [];
    for (const d of c ? [...c.days].reverse() : []) {
      for (const r of [d.total, ...d.by_model]) {
        const tr = document.createElement("tr");
        tr.dataset.day = d.day;
        tr.dataset.model = r.name;
        for (const text of [d.day, r.name === "total" ? "all (lines that asked)" : r.name, num(r.calls, 0),
          num(r.input_tokens, 0), num(r.cache_write_tokens, 0), num(r.cache_read_tokens, 0),
          num(r.output_tokens, 0), `$${usd(r.cost_usd)}`]) {
          tr.insertCell().textContent = text;
        }
        rows.push(tr);
      }
    }
    body.replaceChildren(...rows);
    if (!rows.length) {
      const td = body.insertRow().insertCell();
      td.colSpan = 8;
      td.className = "muted";
      td.textContent = "no model calls in these days";
    }
  }

  function renderAccount(acc) {
    if (acc.equity_usd === null) show("equity", "n/a", null);
    else show("equity", `$${usd(acc.equity_usd)}`, acc.equity_usd);
    const start = acc.starting_cash_usd;
    $("return").textContent = acc.equity_usd !== null && start ? `${num((acc.equity_usd / start - 1) * 100, 2)} % since $${usd(start)}` : (acc.unavailable.equity_usd || acc.unavailable.account || "");
    show("open-positions", String(acc.positions.length), acc.positions.length);
    const pnl = acc.positions.reduce((sum, p) => sum + (p.unrealised_pnl_usd || 0), 0);
    $("unrealised").textContent = acc.positions.length ? `unrealised $${usd(pnl)}` : "";
    const body = $("positions").tBodies[0];
    body.replaceChildren(...acc.positions.map(positionRow));
    if (!acc.positions.length) {
      const tr = body.insertRow();
      const td = tr.insertCell();
      td.colSpan = 7;
      td.className = "muted";
      td.textContent = acc.unavailable.account || "no open positions";
    }
  }

  function positionRow(p) {
    const tr = document.createElement("tr");
    tr.dataset.ticker = p.ticker;
    const cells = [
      [p.ticker, p.ticker], [num(p.quantity, 8), p.quantity], [usd(p.entry_price), p.entry_price],
      [p.mark_price === null ? "n/a" : usd(p.mark_price), p.mark_price], [usd(p.notional_usd), p.notional_usd],
      [p.unrealised_pnl_usd === null ? "n/a" : usd(p.unrealised_pnl_usd), p.unrealised_pnl_usd],
      [p.unrealised_pnl_pct === null ? "n/a" : num(p.unrealised_pnl_pct, 2), p.unrealised_pnl_pct],
    ];
    cells.forEach(([text, value], column) => {
      const td = tr.insertCell();
      td.textContent = text;
      td.dataset.value = value === null ? "" : String(value);
      if (column >= 5 && value !== null) td.className = value >= 0 ? "gain" : "loss";
    });
    return tr;
  }

  function renderEquity(e) {
    if (!e.points) {
      show("max-drawdown", "n/a", null);
      $("points").textContent = e.unavailable.equity || "";
      return;
    }
    show("max-drawdown", `${num(e.max_drawdown_pct, 2)} %`, e.max_drawdown_pct);
    $("points").textContent = `${num(e.points, 0)} decisions`;
    const x = e.at_ms.map((ms) => ms / 1000);
    const base = x.map(() => e.start_equity_usd);
    if (!charts) charts = makeCharts();
    charts.equity.setData([x, e.equity_usd, base]);
    charts.drawdown.setData([x, e.drawdown_pct.map((v) => -v)]);
  }

  // UTC, 24-hour, as the replay report: hours within a day, day and hour within a few days, dates
  // beyond (uPlot's own labels are local 12-hour am/pm)
  const utcDate = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
  const formats = [[86400, uPlot.fmtDate("{HH}:{mm}")], [4 * 86400, uPlot.fmtDate("{MM}-{DD} {HH}:{mm}")],
    [Infinity, uPlot.fmtDate("{YYYY}-{MM}-{DD}")]];
  const timeLabels = (u, splits) => {
    const span = u.scales.x.max - u.scales.x.min;
    const format = formats.find(([most]) => !(span > most))[1]; // no data yet: NaN, hours
    return splits.map((ts) => format(utcDate(ts)));
  };
  const hoverFormat = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}");
  const timeValue = (u, ts) => (ts === null || ts === undefined ? "-" : hoverFormat(utcDate(ts)));

  // a flat line gets a band of +/-1 % around it instead of uPlot's default range down to 0
  function padded(u, min, max) {
    if (min === null || max === null) return [0, 1];
    const pad = max > min ? (max - min) * 0.1 : Math.abs(max) * 0.01 || 1;
    return [min - pad, max + pad];
  }

  function makeCharts() {
    const width = () => Math.max(300, $("equity-chart").clientWidth || 900);
    const money = (u, vals) => vals.map((v) => "$" + num(v, 0));
    const common = { tzDate: utcDate, legend: { live: true } };
    const equity = new uPlot({
      ...common, width: width(), height: 240, scales: { y: { range: padded } },
      series: [{ label: "UTC", value: timeValue }, { label: "equity", stroke: "#2f6fde", width: 2, value: (u, v) => v === null ? "-" : "$" + usd(v) },
        { label: "start", stroke: "#7a8394", dash: [6, 4], width: 1, points: { show: false }, value: (u, v) => v === null ? "-" : "$" + usd(v) }],
      axes: [{ values: timeLabels, space: 90 }, { values: money, size: 80 }],
    }, [[], [], []], $("equity-chart"));
    const drawdown = new uPlot({
      ...common, width: width(), height: 160, scales: { y: { range: (u, min) => [Math.min(min === null ? -1 : min * 1.1, -1), 0] } },
      series: [{ label: "UTC", value: timeValue }, { label: "drawdown", stroke: "#b3261e", fill: "rgba(179,38,30,0.15)", value: (u, v) => v === null ? "-" : num(v, 2) + " %" }],
      axes: [{ values: timeLabels, space: 90 }, { values: (u, vals) => vals.map((v) => num(v, 1) + " %"), size: 80 }],
    }, [[], []], $("drawdown-chart"));
    window.addEventListener("resize", () => { equity.setSize({ width: width(), height: 240 }); drawdown.setSize({ width: width(), height: 160 }); });
    return { equity, drawdown };
  }

  function decisionItem(d, fresh) {
    const li = document.createElement("li");
    li.dataset.decisionId = d.decision_id;
    li.dataset.decidedBy = d.decided_by || "";
    if (fresh) li.className = "fresh";
    const span = (cls, text) => { const s = document.createElement("span"); s.className = cls; s.textContent = text; return s; };
    const actions = ((d.raw_decision || {}).decisions || [])
      .map((x) => `${x.action} ${x.ticker}${x.action === "BUY" && x.position_pct ? " " + num(x.position_pct * 100, 1) + "%" : ""}`)
      .join(", ");
    li.append(span("when", utc(d.at_ms) + " "), span("who", d.decided_by || "?"), span("why", ` (${d.decider_reason || "?"}) `),
      span("what", actions || "no decisions"), span("trigger", ` on ${(d.trigger || []).join(", ")}`));
    if ((d.accepted || []).length) li.append(span("orders", `; orders: ${d.accepted.length}`));
    if (d.error) li.append(span("error", ` error: ${d.error}`));
    return li;
  }

  function addDecision(d, fresh) {
    const list = $("decisions");
    if (list.querySelector(`[data-decision-id="${CSS.escape(d.decision_id)}"]`)) return;
    list.prepend(decisionItem(d, fresh));
    while (list.children.length > MAX_DECISIONS) list.lastElementChild.remove();
  }

  async function streamDecisions() {
    for (;;) {
      try {
        const r = await fetch("/api/decisions/stream", { headers: { Authorization: `Bearer ${token}` } });
        const wait = retryAfterMs(r); // the daemon did not answer the API process: it will
        if (wait !== null) {
          show("stream-state", `reconnecting (${(await r.json()).detail})`, "reconnecting");
          await sleep(wait);
          continue;
        }
        if (!r.ok) {
          show("stream-state", `not live: ${(await r.json()).detail}`, "unavailable");
          return; // a state dir without a daemon: nothing decides
        }
        show("stream-state", "live", "live");
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            onEvent(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (err) {
        show("stream-state", `reconnecting (${err.message})`, "reconnecting");
      }
      await sleep(3000);
    }
  }

  function onEvent(block) {
    let kind = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) kind = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trim());
    }
    if (kind === "decision" && data.length) addDecision(JSON.parse(data.join("\n")), true);
  }

  async function loadMemory() {
    const m = await api("/api/memory");
    for (const [id, text] of [["agent-memory", m.agent_memory], ["notes", m.notes]]) {
      $(id).defaultValue = text; // the DOM's text too, so a saved page shows what was loaded
      $(id).value = text;
    }
    $("agent-memory").maxLength = m.agent_memory_max_chars;
    $("agent-memory-count").textContent = `${m.agent_memory.length} / ${m.agent_memory_max_chars}`;
  }

  async function saveMemory(event) {
    event.preventDefault();
    // only the texts the person changed: the other one, as the page loaded it, would undo a
    // save made since (the agent's memory after a decision). based_on says what each changed
    // text was when loaded: one saved otherwise since is a 409, the typed text left in its box
    const edit = {};
    const basedOn = {};
    for (const [id, name] of [["agent-memory", "agent_memory"], ["notes", "notes"]]) {
      if ($(id).value !== $(id).defaultValue) {
        edit[name] = $(id).value;
        basedOn[name] = $(id).defaultValue;
      }
    }
    if (!Object.keys(edit).length) {
      show("memory-result", "no change", "accepted");
      return;
    }
    try {
      const result = await api("/api/memory/notes", {
        method: "PUT", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...edit, based_on: basedOn }),
      });
      show("memory-result", result.detail, result.accepted ? "accepted" : "rejected");
      await loadMemory();
    } catch (err) {
      show("memory-result", `rejected: ${err.message}`, "rejected");
    }
  }

  async function trading(action) {
    try {
      const t = await api(`/api/trading/${action}`, { method: "POST" });
      show("trading-state", t.state, t.state, t.state);
    } catch (err) {
      problem(`${action}: ${err.message}`);
    }
  }

  async function refresh() {
    const [status, account] = await Promise.all([api("/api/status"), api("/api/positions")]);
    renderStatus(status);
    renderCost(status.cost);
    renderAccount(account);
    if (refreshes++ % EQUITY_EVERY === 0) renderEquity(await api("/api/equity"));
  }

  async function run() {
    $("login").hidden = true;
    $("board").hidden = false;
    $("forget").hidden = false;
    try {
      const [page] = await Promise.all([api("/api/decisions?limit=30"), loadMemory()]);
      page.decisions.forEach((d) => addDecision(d, false));
      await refresh();
      document.body.dataset.state = "ready";
    } catch (err) {
      if (err instanceof Unauthorized) return logout(err.message);
      problem(err.message);
    }
    streamDecisions();
    for (;;) {
      await sleep(REFRESH_MS);
      try {
        await refresh();
        problem("");
      } catch (err) {
        if (err instanceof Unauthorized) return logout(err.message);
        problem(`API: ${err.message}`);
      }
    }
  }

  function logout(why) {
    sessionStorage.removeItem(KEY);
    location.hash = "";
    document.body.dataset.state = "login";
    $("board").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    problem(why || "");
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, $("token").value.trim());
      location.reload();
    });
    $("forget").addEventListener("click", () => logout(""));
    $("memory").addEventListener("submit", saveMemory);
    $("halt").addEventListener("click", () => trading("halt"));
    $("resume").addEventListener("click", () => trading("resume"));
    token = takeToken();
    if (token) run();
    else logout("");
  });
})();
