// The approvals page: runs waiting for a person, answered with approve / deny and a reason.
// Plain JavaScript against the API it is served by: the list polls GET /runs?status=waiting, a
// watched run follows GET /runs/{id}/events (Server-Sent Events, read with fetch so the token
// travels in the Authorization header and never in a URL or a log).
// Opened from a channel's approval link (#answer=<approval token>), it shows that one approval and
// answers it through POST /approvals/view and /approvals/answer, with the approval token in the body:
// a fragment never reaches the server, so the token is in no access log.
"use strict";

(() => {
  const TOKEN_KEY = "chamvi.token";
  const LIST_EVERY_MS = 3000;
  const RECONNECT_MS = 2000;
  const ENDED = new Set(["completed", "failed", "cancelled"]);
  // served at <base>/ui/: the API's routes are below <base>
  const API = location.pathname.replace(/\/ui\/(index\.html)?$/, "");
  const $ = (id) => document.getElementById(id);

  let token = sessionStorage.getItem(TOKEN_KEY);
  let listTimer = null;
  let polling = 0; // which login the list's polling belongs to
  let watching = null; // {runId, controller, shown}
  const cards = new Map(); // run id -> {approvalId, element}

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(path, options = {}) {
    const headers = { Authorization: `Bearer ${token}`, ...(options.headers || {}) };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(API + path, { ...options, headers });
    if (response.ok) return response;
    let error = null;
    try {
      error = (await response.json()).error;
    } catch (_) {
      // not the API's error shape (a proxy's page): the status line says enough
    }
    const failure = new ApiError(
      response.status,
      error ? error.code : `http_${response.status}`,
      error ? error.message : `${response.status} ${response.statusText}`,
    );
    if (response.status === 401) logout(`The token was refused (${failure.message}): enter it again.`);
    throw failure;
  }

  const runPath = (runId) => `/runs/${encodeURIComponent(runId)}`;
  const sleep = (ms, signal) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); });
    });

  // ---- login ------------------------------------------------------------------------------

  function logout(message) {
    token = null;
    polling += 1;
    sessionStorage.removeItem(TOKEN_KEY);
    clearTimeout(listTimer);
    listTimer = null;
    if (watching) watching.controller.abort();
    watching = null;
    cards.clear();
    $("waiting").replaceChildren();
    $("main").hidden = true;
    $("logout").hidden = true;
    $("run-section").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").focus();
    window.chamviUi.loggedIn = false;
    document.dispatchEvent(new CustomEvent("chamvi:logout"));
  }

  async function login(candidate) {
    token = candidate;
    try {
      await api("/runs?status=waiting&limit=1");
    } catch (error) {
      if (error.status !== 401) {
        token = null;
        $("login-error").textContent = error.message;
      }
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, candidate);
    polling += 1;
    $("login").hidden = true;
    $("main").hidden = false;
    $("logout").hidden = false;
    refreshList();
    // chat.js may run after this (it loads on its own): it looks at loggedIn when it starts
    window.chamviUi.loggedIn = true;
    document.dispatchEvent(new CustomEvent("chamvi:login"));
  }

  // ---- the waiting list -------------------------------------------------------------------

  async function refreshList() {
    clearTimeout(listTimer);
    const session = polling;
    try {
      const listed = (await (await api("/runs?status=waiting&limit=100")).json()).data;
      const ids = new Set(listed.map((run) => run.run_id));
      for (const [runId, card] of cards) {
        if (!ids.has(runId) && !card.answering) {
          card.element.remove();
          cards.delete(runId);
        }
      }
      let unread = 0;
      for (const run of listed) {
        if (cards.has(run.run_id)) continue;
        try {
          await addCard(run.run_id);
        } catch (error) {
          if (error.status === 401) return;
          unread += 1; // e.g. no worker answers its query now: the next poll tries again
        }
      }
      const note = unread ? ` (${unread} waiting run(s) could not be read; retrying)` : "";
      $("list-status").textContent = `Updated ${new Date().toLocaleTimeString()}${note}`;
    } catch (error) {
      if (error.status === 401) return;
      $("list-status").textContent = `Could not list the runs: ${error.message}`;
    }
    // a logout (or a new login) while this poll was under way has started polling afresh
    if (session !== polling) return;
    $("waiting-count").textContent = String(cards.size);
    $("none-waiting").hidden = cards.size > 0;
    listTimer = setTimeout(refreshList, LIST_EVERY_MS);
  }

  async function addCard(runId) {
    const view = await (await api(runPath(runId))).json();
    // between the listing and the view the run may have been answered: the next poll looks again
    if (!view.waiting || cards.has(runId)) return;
    const element = $("card-template").content.firstElementChild.cloneNode(true);
    const card = { approvalId: view.waiting.approval_id, element, answering: false };
    fillCard(card, view);
    if (view.conversation) showConversation(element, view);
    element.querySelector(".answer").addEventListener("submit", (event) => {
      event.preventDefault();
      answer(runId, card, event.submitter && event.submitter.value === "approve");
    });
    element.querySelector(".run").addEventListener("click", (event) => {
      event.preventDefault();
      watch(runId);
    });
    cards.set(runId, card);
    $("waiting").append(element);
  }

  function fillCard(card, view) {
    const waiting = view.waiting;
    const element = card.element;
    card.approvalId = waiting.approval_id;
    element.dataset.runId = view.run_id;
    element.dataset.approvalId = waiting.approval_id;
    element.querySelector(".question").textContent = waiting.title;
    element.querySelector(".body").textContent = waiting.body || "";
    element.querySelector(".body").hidden = !waiting.body;
    element.querySelector(".tool").textContent = waiting.tool;
    element.querySelector(".input").textContent = waiting.input ? JSON.stringify(waiting.input) : "";
    element.querySelector(".deadline").textContent = deadline(waiting.until);
    element.querySelector(".invoker").textContent = invoker(view.trigger && view.trigger.invoker);
    element.querySelector(".run").textContent = view.run_id;
    element.querySelector(".agent").textContent = view.agent;
  }

  async function showConversation(element, view) {
    // a turn of a conversation: what was said before the question, so the approver has the context
    const id = view.conversation.id;
    const path = `/conversations/${encodeURIComponent(view.agent)}/${encodeURIComponent(id)}?limit=3`;
    let page;
    try {
      page = await (await api(path)).json();
    } catch (_) {
      return; // a token without conversations:read approves without it
    }
    const items = page.messages.map((message) => {
      const item = document.createElement("li");
      item.dataset.role = message.role;
      item.textContent = `${message.role === "user" ? "person" : "agent"}: ${message.text || ""}`;
      return item;
    });
    element.querySelector(".conversation-id").textContent = id;
    element.querySelector(".conversation-messages").replaceChildren(...items);
    element.querySelector(".conversation").hidden = false;
  }

  function deadline(until) {
    const at = new Date(until);
    const minutes = Math.round((at.getTime() - Date.now()) / 60000);
    const left = minutes >= 120 ? `${Math.round(minutes / 60)} h` : `${Math.max(minutes, 0)} min`;
    return `${at.toLocaleString()} (in ${left}; then denied)`;
  }

  function invoker(who) {
    if (!who) return "none (started without an invoker)";
    return `${who.name ? `${who.name} ` : ""}${who.id} (${who.kind})`;
  }

  async function answer(runId, card, approved) {
    const element = card.element;
    const buttons = element.querySelectorAll("button");
    const reason = element.querySelector(".reason").value.trim();
    const problem = element.querySelector(".answer-error");
    buttons.forEach((button) => { button.disabled = true; });
    card.answering = true;
    problem.textContent = "";
    try {
      await api(`${runPath(runId)}/approve`, {
        method: "POST",
        body: JSON.stringify({ approval_id: card.approvalId, approved, reason: reason || null }),
      });
      element.remove();
      cards.delete(runId);
      $("waiting-count").textContent = String(cards.size);
      $("none-waiting").hidden = cards.size > 0;
      watch(runId);
    } catch (error) {
      if (error.code === "approval_not_pending") {
        // answered elsewhere: show what the run waits on now, if anything
        problem.textContent = `${error.message}. Refreshed.`;
        const view = await api(runPath(runId)).then((r) => r.json()).catch(() => null);
        if (view && view.waiting) fillCard(card, view);
      } else {
        problem.textContent = error.message;
      }
    } finally {
      card.answering = false;
      buttons.forEach((button) => { button.disabled = false; });
    }
  }

  // ---- a watched run ----------------------------------------------------------------------

  function watch(runId) {
    if (watching) watching.controller.abort();
    const controller = new AbortController();
    watching = { runId, controller, shown: 0 };
    $("run-section").hidden = false;
    $("run-id").textContent = runId;
    $("steps").replaceChildren();
    $("run-outcome").textContent = "";
    $("run-live").textContent = "";
    follow(runId, controller.signal, watching);
  }

  async function show(runId, signal, state) {
    const asked = ++state.shown;
    const view = await (await api(runPath(runId), { signal })).json();
    // an older answer arriving after a newer one must not roll the page back
    if (signal.aborted || asked !== state.shown) return view;
    const status = $("run-status");
    status.textContent = view.status;
    status.className = `status ${view.status}`;
    const steps = view.steps.map(stepItem);
    if (view.waiting) {
      const item = document.createElement("li");
      item.dataset.kind = "waiting";
      item.textContent = `waiting for approval: ${view.waiting.title}`;
      steps.push(item);
    }
    $("steps").replaceChildren(...steps);
    if (view.error) $("run-outcome").textContent = `${view.error.code}: ${view.error.message}`;
    else if (view.status === "completed") $("run-outcome").textContent = `output: ${text(view.output)}`;
    return view;
  }

  function stepItem(step) {
    const item = document.createElement("li");
    item.dataset.kind = step.kind;
    item.dataset.step = String(step.index);
    if (step.kind === "llm") {
      const calls = step.tool_calls.map((call) => call.name).join(", ");
      item.textContent = `model${calls ? ` (calls ${calls})` : ""}${step.text ? ": " : ""}`;
      const said = document.createElement("span");
      said.className = "text";
      said.textContent = step.text || "";
      item.append(said);
    } else if (step.kind === "tool") {
      const result = step.error ? `${step.error.code}: ${step.error.message}` : shown(step.output);
      item.textContent = `tool ${step.tool}(${JSON.stringify(step.input || {})}) → `;
      item.append(folded(result, `${watching ? watching.runId : ""}:${step.index}`));
    } else {
      const decision = step.decision || {};
      const by = decision.approver ? ` by ${invoker(decision.approver)}` : "";
      const why = decision.reason ? `: ${decision.reason}` : "";
      item.textContent = `approval ${decision.approved ? "approved" : "denied"}${by}${why}`;
    }
    return item;
  }

  const text = (value) => (typeof value === "string" ? value : JSON.stringify(value));

  const FOLD_LINES = 6;
  const FOLD_CHARS = 600;
  // the results a person unfolded stay unfolded when the run's next event redraws its steps
  const unfolded = new Set();

  // a tool result as a person reads it: short JSON on one line, longer JSON indented
  function shown(value) {
    const line = text(value);
    return typeof value === "string" || line.length <= 200 ? line : JSON.stringify(value, null, 2);
  }

  // a long result shows its first lines, then "show all" (a 40-line JSON would bury the steps after it)
  function folded(result, key) {
    const span = document.createElement("span");
    span.className = "result";
    const lines = result.split("\n");
    if ((lines.length <= FOLD_LINES && result.length <= FOLD_CHARS) || unfolded.has(key)) {
      span.textContent = result;
      return span;
    }
    span.textContent = `${lines.slice(0, FOLD_LINES).join("\n").slice(0, FOLD_CHARS)}\n…`;
    span.classList.add("folded");
    const more = document.createElement("button");
    more.type = "button";
    more.className = "show-all";
    more.textContent = `show all (${lines.length} lines)`;
    more.addEventListener("click", () => {
      unfolded.add(key);
      span.textContent = result;
      span.classList.remove("folded");
      more.remove();
    });
    const wrapper = document.createElement("span");
    wrapper.append(span, more);
    return wrapper;
  }

  function delta(data) {
    // the model's words as it writes them, into the step they belong to (the step's record replaces them)
    const step = String(Number(data.step));
    let item = $("steps").querySelector(`li[data-kind="delta"][data-step="${step}"]`);
    if (!item) {
      item = document.createElement("li");
      item.dataset.kind = "delta";
      item.dataset.step = step;
      for (const kind of ["reasoning", "text"]) {
        const said = document.createElement("span");
        said.className = kind;
        item.append(said);
      }
      $("steps").append(item);
    }
    item.querySelector(data.kind === "reasoning" ? ".reasoning" : ".text").textContent += data.text;
  }

  async function follow(runId, signal, state) {
    let lastId = null;
    let received = 0;
    try {
      let ended = ENDED.has((await show(runId, signal, state)).status);
      while (!ended && !signal.aborted) {
        const headers = { Accept: "text/event-stream" };
        if (lastId !== null) headers["Last-Event-ID"] = lastId;
        let response;
        try {
          response = await api(`${runPath(runId)}/events`, { headers, signal });
        } catch (error) {
          if (signal.aborted || error.status === 401) return;
          if (error instanceof ApiError) throw error;
          await sleep(RECONNECT_MS, signal); // the network dropped: reconnect where it left off
          continue;
        }
        // 204: the run has ended and has nothing after the last event this page read
        if (response.status === 204) break;
        $("run-live").textContent = "Live: following the run's events.";
        ended = await readEvents(response, signal, async (event) => {
          received += 1;
          $("run-live").textContent = `Live: following the run's events (${received} received).`;
          if (event.id) lastId = event.id;
          if (event.type === "run.delta") delta(JSON.parse(event.data));
          else if (event.type.startsWith("run.")) await show(runId, signal, state);
          return ENDED.has(event.type.slice("run.".length));
        });
        if (!ended) await sleep(RECONNECT_MS, signal);
      }
    } catch (error) {
      if (!signal.aborted) $("run-live").textContent = `Stopped following: ${error.message}`;
      return;
    }
    if (!signal.aborted) $("run-live").textContent = "The run has ended.";
  }

  async function readEvents(response, signal, onEvent) {
    // Server-Sent Events framing: blocks split by a blank line, "field: value" lines
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        buffer += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = parseEvent(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (event.data !== null && (await onEvent(event))) return true;
        }
      }
    } catch (error) {
      if (signal.aborted) return true;
      return false; // the stream broke: the caller reconnects with Last-Event-ID
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  function parseEvent(block) {
    const event = { id: null, type: "message", data: null };
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") event.id = value;
      else if (field === "event") event.type = value;
      else if (field === "data") event.data = event.data === null ? value : `${event.data}\n${value}`;
    }
    return event;
  }

  // ---- one approval, opened from its link -------------------------------------------------

  const ANSWER_FRAGMENT = "#answer=";
  let approvalToken = null;

  async function byToken(path, body) {
    // the approval token is the permission; a bearer token only names the approver
    const send = (withBearer) => {
      const headers = { "Content-Type": "application/json" };
      if (withBearer) headers.Authorization = `Bearer ${token}`;
      return fetch(API + path, { method: "POST", headers, body: JSON.stringify(body) });
    };
    let response = await send(Boolean(token));
    if (response.status === 401 && token) {
      sessionStorage.removeItem(TOKEN_KEY); // a forgotten bearer token: answer as the token's holder
      token = null;
      response = await send(false);
    }
    const data = await response.json().catch(() => null);
    if (response.ok) return data;
    const error = data && data.error;
    throw new ApiError(
      response.status,
      error ? error.code : `http_${response.status}`,
      error ? error.message : `${response.status} ${response.statusText}`,
    );
  }

  function showRefusal(element, error) {
    element.textContent = error.message;
    element.dataset.code = error.code || "";
  }

  async function openApproval(candidate) {
    approvalToken = candidate;
    $("login").hidden = true;
    $("main").hidden = true;
    $("by-token").hidden = false;
    $("token-card").hidden = true;
    $("token-done").hidden = true;
    const status = $("token-status");
    status.textContent = "Loading the approval...";
    try {
      const view = await byToken("/approvals/view", { token: candidate });
      const card = $("token-card");
      card.querySelector(".question").textContent =
        view.title || `Allow tool ${view.tool} of agent ${view.agent} to go on?`;
      card.querySelector(".body").textContent = view.body || "";
      card.querySelector(".body").hidden = !view.body;
      card.querySelector(".tool").textContent = view.tool;
      card.querySelector(".agent").textContent = view.agent;
      card.querySelector(".deadline").textContent = deadline(view.until);
      card.querySelector(".answer-error").textContent = "";
      card.querySelectorAll("button").forEach((button) => { button.disabled = false; });
      card.hidden = false;
      status.textContent = "";
      delete status.dataset.code;
    } catch (error) {
      showRefusal(status, error);
    }
  }

  async function answerApproval(approved) {
    const card = $("token-card");
    const buttons = card.querySelectorAll("button");
    const problem = card.querySelector(".answer-error");
    const reason = card.querySelector(".reason").value.trim();
    buttons.forEach((button) => { button.disabled = true; });
    problem.textContent = "";
    try {
      await byToken("/approvals/answer", { token: approvalToken, approved, reason: reason || null });
    } catch (error) {
      showRefusal(problem, error);
      // a used, stale or expired token stays refused: only another failure is worth a retry
      if (!["approval_not_pending", "approval_token_expired", "approval_token_invalid"].includes(error.code)) {
        buttons.forEach((button) => { button.disabled = false; });
      }
      return;
    }
    card.hidden = true;
    $("token-done").textContent = approved ? "Approved: the run goes on." : "Denied: the run goes on without it.";
    $("token-done").hidden = false;
    // the used token leaves the address bar and this tab's history entry
    history.replaceState(null, "", location.pathname + location.search);
  }

  function approvalFromFragment() {
    if (!location.hash.startsWith(ANSWER_FRAGMENT)) return null;
    return decodeURIComponent(location.hash.slice(ANSWER_FRAGMENT.length)).trim() || null;
  }

  $("token-answer").addEventListener("submit", (event) => {
    event.preventDefault();
    answerApproval(Boolean(event.submitter && event.submitter.value === "approve"));
  });
  window.addEventListener("hashchange", () => {
    const candidate = approvalFromFragment();
    if (candidate) openApproval(candidate);
  });
  // what the chat view (chat.js) shares with this page
  window.chamviUi = { api, ApiError, invoker, readEvents, sleep, text, loggedIn: false };

  // ---- start ------------------------------------------------------------------------------

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    login($("token").value.trim());
    $("token").value = "";
  });
  $("logout").addEventListener("click", () => logout(""));
  const opened = approvalFromFragment();
  if (opened) openApproval(opened);
  else if (token) login(token);
  else logout("");
})();
