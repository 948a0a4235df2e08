// The chat view: pick an agent, start or reopen a conversation, write, watch the answer stream in,
// see each tool call, answer an approval in place. It reads GET /conversations/{agent}/{id} once, then
// follows GET /conversations/{agent}/{id}/events (Server-Sent Events read with fetch, the token in
// the Authorization header), resuming with Last-Event-ID after a dropped connection.
"use strict";

(() => {
  const ui = window.chamviUi;
  const RECONNECT_MS = 2000;
  const $ = (id) => document.getElementById(id);

  let current = null; // {agent, id, controller, lastId, turns: Map, calls: Map, streaming}

  const conversationPath = (agent, id) =>
    `/conversations/${encodeURIComponent(agent)}/${encodeURIComponent(id)}`;

  // ---- tabs -------------------------------------------------------------------------------

  function showTab(chat) {
    $("main").hidden = chat;
    $("chat").hidden = !chat;
    $("tab-chat").setAttribute("aria-pressed", String(chat));
    $("tab-approvals").setAttribute("aria-pressed", String(!chat));
  }

  async function onLogin() {
    $("tabs").hidden = false;
    showTab(false);
    try {
      const agents = (await (await ui.api("/conversations")).json()).agents;
      $("chat-agents").replaceChildren(
        ...agents.map((name) => Object.assign(document.createElement("option"), { value: name })),
      );
      if (agents.length && !$("chat-agent").value) {
        $("chat-agent").value = agents[0];
        listConversations();
      }
    } catch (_) {
      // a token without conversations:read: the chat tab says so when opened
    }
  }

  document.addEventListener("chamvi:login", onLogin);

  document.addEventListener("chamvi:logout", () => {
    close();
    $("tabs").hidden = true;
    $("chat").hidden = true;
  });

  $("tab-approvals").addEventListener("click", () => showTab(false));
  $("tab-chat").addEventListener("click", () => showTab(true));

  // ---- picking a conversation -------------------------------------------------------------

  async function listConversations() {
    const agent = $("chat-agent").value.trim();
    if (!agent) return;
    try {
      const listed = (await (await ui.api(`/conversations/${encodeURIComponent(agent)}`)).json()).data;
      $("chat-conversations").replaceChildren(
        ...listed.map((conversation) => {
          const item = document.createElement("li");
          const link = Object.assign(document.createElement("a"), { href: "#", textContent: conversation.id });
          link.dataset.conversation = conversation.id;
          link.addEventListener("click", (event) => {
            event.preventDefault();
            open(agent, conversation.id);
          });
          item.append(link);
          return item;
        }),
      );
      $("chat-list-status").textContent = listed.length ? "" : `No conversation with ${agent} yet.`;
    } catch (error) {
      $("chat-list-status").textContent = error.message;
    }
  }

  $("chat-agent").addEventListener("change", listConversations);
  function randomId(prefix) {
    // getRandomValues, unlike randomUUID, works on a page served over plain http to another host
    const random = new Uint8Array(8);
    crypto.getRandomValues(random);
    return `${prefix}${Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  }

  $("chat-agent-form").addEventListener("submit", (event) => {
    event.preventDefault();
    open($("chat-agent").value.trim(), randomId("c-"), { fresh: true });
  });

  function close() {
    if (current) current.controller.abort();
    current = null;
  }

  async function open(agent, id, { fresh = false } = {}) {
    close();
    const controller = new AbortController();
    current = { agent, id, controller, lastId: null, turns: new Map(), calls: new Map(), streaming: false };
    const state = current;
    $("chat-section").hidden = false;
    $("chat-id").textContent = id;
    $("chat-agent-name").textContent = `with ${agent}`;
    $("chat-messages").replaceChildren();
    $("chat-error").textContent = "";
    $("chat-live").textContent = fresh ? "A new conversation: its first message starts it." : "";
    $("chat-text").focus();
    if (fresh) return;
    try {
      const page = await (await ui.api(`${conversationPath(agent, id)}?limit=50`, { signal: controller.signal })).json();
      if (state !== current) return;
      for (const message of page.messages) {
        if (message.role === "user") userMessage(state, message.turn, message.text, message.status);
        else answered(state, message.turn, message.text, message.error);
      }
    } catch (error) {
      if (state === current) $("chat-live").textContent = error.message;
      return;
    }
    follow(state);
  }

  // ---- messages ---------------------------------------------------------------------------

  function turnOf(state, turn) {
    let entry = state.turns.get(turn);
    if (!entry) {
      entry = { user: null, tools: [], approval: null, answer: null };
      state.turns.set(turn, entry);
    }
    return entry;
  }

  function item(role, turn) {
    const element = document.createElement("li");
    element.className = `message ${role}`;
    element.dataset.role = role;
    element.dataset.turn = String(turn);
    const said = document.createElement("span");
    said.className = "text";
    element.append(said);
    return element;
  }

  function place(state, turn, element) {
    // in turn order, whatever order the page load and the stream brought them in
    const later = [...$("chat-messages").children].find((other) => Number(other.dataset.turn) > turn);
    $("chat-messages").insertBefore(element, later || null);
  }

  function userMessage(state, turn, text, status) {
    const entry = turnOf(state, turn);
    if (!entry.user) {
      entry.user = item("user", turn);
      place(state, turn, entry.user);
    }
    entry.user.querySelector(".text").textContent = text || "";
    entry.user.dataset.status = status || "";
  }

  function answerElement(state, turn) {
    const entry = turnOf(state, turn);
    if (!entry.answer) {
      entry.answer = item("assistant", turn);
      place(state, turn, entry.answer);
    }
    return entry.answer;
  }

  function answered(state, turn, text, error) {
    const element = answerElement(state, turn);
    element.classList.remove("writing");
    element.querySelector(".text").textContent = error ? `${error.code}: ${error.message}` : text || "";
    element.classList.toggle("failed", Boolean(error));
    const entry = turnOf(state, turn);
    if (entry.user) entry.user.dataset.status = error ? "failed" : "completed";
    if (entry.approval) entry.approval.remove();
  }

  function toolLine(state, turn, data) {
    const element = item("tool", turn);
    const call = state.calls.get(data.tool_call_id);
    const args = call ? JSON.stringify(call.arguments || {}) : "";
    const result = data.error ? `${data.error.code}: ${data.error.message}` : ui.text(data.output);
    element.querySelector(".text").textContent = `${data.tool}(${args}) → ${result}`;
    const entry = turnOf(state, turn);
    place(state, turn, element);
    // a tool line goes before the answer the model writes after it
    if (entry.answer) $("chat-messages").insertBefore(element, entry.answer);
    entry.tools.push(element);
  }

  function approvalBox(state, turn, data) {
    const entry = turnOf(state, turn);
    if (entry.approval) entry.approval.remove();
    const element = $("approval-template").content.firstElementChild.cloneNode(true);
    element.dataset.turn = String(turn);
    element.dataset.approvalId = data.approval_id;
    element.querySelector(".question").textContent = data.title;
    element.querySelector(".input").textContent = data.input ? JSON.stringify(data.input) : "";
    for (const approved of [true, false]) {
      element.querySelector(approved ? ".approve" : ".deny").addEventListener("click", async () => {
        element.querySelectorAll("button").forEach((button) => { button.disabled = true; });
        try {
          await ui.api(`/runs/${encodeURIComponent(data.run_id)}/approve`, {
            method: "POST",
            body: JSON.stringify({ approval_id: data.approval_id, approved }),
          });
          element.remove();
        } catch (error) {
          element.querySelector(".approval-error").textContent = error.message;
          element.querySelectorAll("button").forEach((button) => { button.disabled = false; });
        }
      });
    }
    entry.approval = element;
    place(state, turn, element);
  }

  function onEvent(state, type, data) {
    const turn = Number(data.turn);
    if (type === "conversation.message") userMessage(state, turn, data.text, "running");
    else if (type === "run.delta" && data.kind === "text") {
      const element = answerElement(state, turn);
      if (!element.classList.contains("writing")) {
        element.classList.add("writing");
        element.querySelector(".text").textContent = "";
      }
      element.querySelector(".text").textContent += data.text;
    } else if (type === "run.step" && data.kind === "llm") {
      for (const call of data.tool_calls || []) state.calls.set(call.id, call);
    } else if (type === "run.step" && data.kind === "tool") toolLine(state, turn, data);
    else if (type === "run.waiting") approvalBox(state, turn, data);
    else if (type === "run.resumed") {
      const entry = turnOf(state, turn);
      if (entry.approval) entry.approval.remove();
    } else if (type === "run.completed") answered(state, turn, ui.text(data.output), null);
    else if (type === "run.failed") answered(state, turn, null, data.error);
    else if (type === "run.cancelled") answered(state, turn, null, { code: "cancelled", message: "the turn was cancelled" });
  }

  async function follow(state) {
    if (state.streaming) return;
    state.streaming = true;
    const signal = state.controller.signal;
    const path = `${conversationPath(state.agent, state.id)}/events`;
    while (!signal.aborted) {
      const headers = { Accept: "text/event-stream" };
      if (state.lastId !== null) headers["Last-Event-ID"] = state.lastId;
      let response;
      try {
        response = await ui.api(path, { headers, signal });
      } catch (error) {
        if (signal.aborted || error.status === 401) return;
        if (error instanceof ui.ApiError) {
          $("chat-live").textContent = `Stopped following: ${error.message}`;
          return;
        }
        await ui.sleep(RECONNECT_MS, signal);
        continue;
      }
      $("chat-live").textContent = "Live: following the conversation.";
      await ui.readEvents(response, signal, async (event) => {
        if (event.id) state.lastId = event.id;
        onEvent(state, event.type, JSON.parse(event.data));
        return false;
      });
      if (!signal.aborted) await ui.sleep(RECONNECT_MS, signal);
    }
  }

  $("chat-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const state = current;
    const text = $("chat-text").value.trim();
    if (!state || !text) return;
    $("chat-send").disabled = true;
    $("chat-error").textContent = "";
    try {
      const sent = await (
        await ui.api(`${conversationPath(state.agent, state.id)}/messages`, {
          method: "POST",
          body: JSON.stringify({ text, message_id: randomId("m-") }),
        })
      ).json();
      $("chat-text").value = "";
      userMessage(state, sent.turn, text, "queued");
      follow(state); // a new conversation exists from its first message on
    } catch (error) {
      $("chat-error").textContent = error.message;
    } finally {
      $("chat-send").disabled = false;
    }
  });

  // the page may have logged in (a token kept from before) while this file was still loading
  if (ui.loggedIn) onLogin();
})();
