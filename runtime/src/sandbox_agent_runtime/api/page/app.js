// The API's page for people: start a run, watch its steps, follow up,
// decide its approvals (signed here, with the person's own key) and fetch
// its outputs. Plain JavaScript, no build step; everything the API sends is
// shown as text (textContent), never as HTML.
"use strict";

(() => {
  const TOKEN_ITEM = "sandbox-agent-token";
  // Reconnecting after a dropped stream: the first wait, and the longest.
  const FIRST_BACKOFF_MS = 500;
  const LONGEST_BACKOFF_MS = 10000;
  const STEP_NAMES = new Set([
    "model", "sandbox", "tool", "run", "session", "prompt", "version", "step", "failure",
  ]);

  const $ = (id) => document.getElementById(id);

  // ---- Canonical JSON: the bytes Python's approvers.message() signs ----

  // A string as Python's json.dumps writes it (ensure_ascii): JSON.stringify
  // already escapes '"', '\\' and the control characters as Python does
  // (\b \t \n \f \r, the rest \u00xx); Python also escapes everything
  // outside ' '..'~' (DEL included) as \uxxxx, UTF-16 code units in
  // lowercase hex (a surrogate pair for a character above U+FFFF).
  function pythonString(text) {
    return JSON.stringify(text).replace(
      /[\u007f-\uffff]/g,
      (unit) => "\\u" + unit.charCodeAt(0).toString(16).padStart(4, "0"),
    );
  }

  // Python sorts keys by code point; JavaScript's default sort compares
  // UTF-16 code units, which differ above U+FFFF.
  function byCodePoint(a, b) {
    const x = Array.from(a, (c) => c.codePointAt(0));
    const y = Array.from(b, (c) => c.codePointAt(0));
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i] - y[i];
    }
    return x.length - y.length;
  }

  // json.dumps(value, sort_keys=True, separators=(",", ":")), for the values
  // a decision holds: null, booleans, integers, strings, arrays, objects.
  function canonicalJson(value) {
    if (value === null) return "null";
    switch (typeof value) {
      case "boolean":
        return value ? "true" : "false";
      case "number":
        if (!Number.isSafeInteger(value)) {
          throw new TypeError(`canonicalJson: ${value} is not an integer`);
        }
        return String(value);
      case "string":
        return pythonString(value);
      case "object":
        if (Array.isArray(value)) return "[" + value.map(canonicalJson).join(",") + "]";
        return "{" + Object.keys(value).sort(byCodePoint)
          .map((key) => pythonString(key) + ":" + canonicalJson(value[key]))
          .join(",") + "}";
      default:
        throw new TypeError(`canonicalJson: a ${typeof value} has no JSON form`);
    }
  }

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function base64(buffer) {
    let binary = "";
    for (const b of new Uint8Array(buffer)) binary += String.fromCharCode(b);
    return btoa(binary);
  }

  // The digest of what the person was shown (approvers.digest): SHA-256 of
  // its UTF-8, in hex.
  async function sha256Hex(text) {
    return hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  }

  // The text an approver signs (approvers.message): the request as shown
  // and the decision. All ASCII, so its UTF-8 is itself.
  async function decisionMessage({ workflowId, runId, callId, tool, detail, approve, always, reason }) {
    return canonicalJson({
      workflow_id: workflowId,
      run_id: runId,
      call_id: callId,
      tool: tool,
      shown: await sha256Hex(String(detail ?? "")),
      approve: Boolean(approve),
      always: Boolean(always),
      reason: String(reason ?? ""),
    });
  }

  // ---- The approver's key: in memory only, not extractable ----

  let approverKey = null; // { privateKey: CryptoKey, publicKey: base64 of 32 bytes }

  function pemBody(pem) {
    const match = /-----BEGIN PRIVATE KEY-----([\s\S]*?)-----END PRIVATE KEY-----/.exec(pem);
    if (!match) {
      throw new Error("this is not a PEM private key (-----BEGIN PRIVATE KEY-----, PKCS8).");
    }
    const binary = atob(match[1].replace(/\s+/g, ""));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }

  function base64UrlToBase64(text) {
    const plain = text.replace(/-/g, "+").replace(/_/g, "/");
    return plain + "=".repeat((4 - (plain.length % 4)) % 4);
  }

  // Load the person's key; its public half (base64), which a decision names.
  // A non-extractable key cannot give its public half, so the key is read
  // twice: once extractable, only to compute the public key, then kept
  // non-extractable.
  async function loadKey(pem) {
    const der = pemBody(pem);
    const algorithm = { name: "Ed25519" };
    let publicKey;
    try {
      const once = await crypto.subtle.importKey("pkcs8", der, algorithm, true, ["sign"]);
      const jwk = await crypto.subtle.exportKey("jwk", once);
      publicKey = base64UrlToBase64(jwk.x);
    } catch (error) {
      throw new Error(`this is not an Ed25519 private key (${error.message || error.name}).`);
    }
    const privateKey = await crypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"]);
    approverKey = { privateKey, publicKey };
    return publicKey;
  }

  // Sign ``text`` (ASCII) with the loaded key: the signature, base64.
  async function sign(text) {
    if (!approverKey) throw new Error("no approver key is loaded: load yours first.");
    const signature = await crypto.subtle.sign(
      { name: "Ed25519" }, approverKey.privateKey, new TextEncoder().encode(text),
    );
    return base64(signature);
  }

  // ---- The API ----

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_ITEM) || "";
  }

  async function api(path, options = {}) {
    if (!token()) {
      askForToken("Enter your API token first.");
      throw new ApiError(401, "Enter your API token first.");
    }
    const headers = new Headers(options.headers || {});
    headers.set("Authorization", `Bearer ${token()}`);
    const response = await fetch(path, { ...options, headers, cache: "no-store" });
    if (response.ok) return response;
    let detail = `${response.status} ${response.statusText}`.trim();
    try {
      const problem = await response.json();
      if (problem && typeof problem.detail === "string") detail = problem.detail;
    } catch {
      // Not a problem document: the status says it.
    }
    if (response.status === 401) askForToken(detail);
    throw new ApiError(response.status, detail);
  }

  const runPath = (id, rest = "") => `/v1/runs/${encodeURIComponent(id)}${rest}`;

  // ---- What the page shows ----

  function showAlert(text) {
    const alert = $("alert");
    alert.textContent = text;
    alert.hidden = !text;
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  function problemText(error) {
    return error instanceof ApiError ? error.detail || error.message : String(error.message || error);
  }

  function askForToken(detail) {
    sessionStorage.removeItem(TOKEN_ITEM);
    showTokenState();
    if (detail) showAlert(detail);
    $("token").focus();
  }

  function showTokenState() {
    const has = Boolean(token());
    $("token-form").hidden = has;
    $("token-set").hidden = !has;
  }

  function element(tag, properties = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(properties)) {
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else if (name in node) node[name] = value;
      else node.setAttribute(name, value);
    }
    node.append(...children);
    return node;
  }

  function sizeText(bytes) {
    if (typeof bytes !== "number") return "";
    if (bytes < 1024) return `${bytes} B`;
    const units = ["KiB", "MiB", "GiB"];
    let value = bytes;
    let unit = "B";
    for (const next of units) {
      if (value < 1024) break;
      value /= 1024;
      unit = next;
    }
    return `${value.toFixed(1)} ${unit}`;
  }

  // ---- A run, and its events ----

  let current = null;
  let controls = 0; // for the ids of each approval's controls

  function newRun(id, followUps) {
    if (current) current.stop();
    const run = {
      id,
      followUps,
      lastEventId: "",
      seen: new Set(),
      approvals: new Map(),
      ended: false,
      answered: false,
      stopped: false,
      following: false,
      connections: 0,
      connection: null, // the AbortController of the stream being read
      stop() {
        this.stopped = true;
        if (this.connection) this.connection.abort();
      },
    };
    current = run;
    $("run").hidden = false;
    $("run-id").textContent = id;
    $("run-state").textContent = "Following its steps…";
    $("steps").replaceChildren();
    $("approvals").replaceChildren();
    $("answers").replaceChildren();
    $("outputs-area").hidden = true;
    $("download").hidden = true;
    $("download").removeAttribute("href");
    $("follow-form").hidden = true;
    if (location.hash !== `#run=${encodeURIComponent(id)}`) {
      history.replaceState(null, "", `#run=${encodeURIComponent(id)}`);
    }
    follow(run);
    listApprovals(run);
    return run;
  }

  // One SSE stream, read with fetch (EventSource cannot send a token):
  // each event to ``onEvent`` as {id, event, data}. Lines end with CRLF, LF
  // or CR; a blank line ends an event; a line starting with ":" is a comment.
  async function readEvents(body, onEvent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let fields = { id: null, event: "", data: [] };
    const dispatch = () => {
      if (fields.data.length) {
        onEvent({ id: fields.id, event: fields.event || "message", data: fields.data.join("\n") });
      }
      fields = { id: null, event: "", data: [] };
    };
    const line = (text) => {
      if (text === "") return dispatch();
      if (text.startsWith(":")) return;
      const colon = text.indexOf(":");
      const name = colon < 0 ? text : text.slice(0, colon);
      let value = colon < 0 ? "" : text.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "data") fields.data.push(value);
      else if (name === "event") fields.event = value;
      else if (name === "id" && !value.includes("\0")) fields.id = value;
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A CR at the very end may be the first half of a CRLF: wait for more.
        if (buffer[end] === "\r" && end === buffer.length - 1) break;
        const size = buffer.startsWith("\r\n", end) ? 2 : 1;
        line(buffer.slice(0, end));
        buffer = buffer.slice(end + size);
      }
    }
    // An event not ended by a blank line when the stream stops is dropped,
    // as EventSource drops it: it comes again after a reconnection.
  }

  // Follow the run's events until its end, reconnecting after a dropped
  // stream with Last-Event-ID: nothing missed, nothing twice.
  async function follow(run) {
    run.following = true;
    try {
      await following(run);
    } finally {
      run.following = false;
    }
  }

  async function following(run) {
    let backoff = FIRST_BACKOFF_MS;
    while (!run.stopped && !run.ended) {
      const connection = new AbortController();
      run.connection = connection;
      try {
        const headers = { Accept: "text/event-stream" };
        if (run.lastEventId) headers["Last-Event-ID"] = run.lastEventId;
        const response = await api(runPath(run.id, "/events"), { headers, signal: connection.signal });
        if (run.stopped) return;
        run.connections += 1;
        $("run").dataset.connections = String(run.connections);
        $("run-state").textContent = run.answered ? $("run-state").textContent : "Following its steps…";
        await readEvents(response.body, (event) => {
          if (event.id) backoff = FIRST_BACKOFF_MS;
          take(run, event);
        });
      } catch (error) {
        if (run.stopped) return;
        if (error instanceof ApiError && ![500, 502, 503, 504].includes(error.status)) {
          $("run-state").textContent = `Not following the run: ${error.detail}`;
          if (error.status !== 401) showAlert(error.detail);
          return;
        }
      }
      if (run.stopped || run.ended) return;
      $("run-state").textContent = "The connection dropped: reconnecting…";
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, LONGEST_BACKOFF_MS);
    }
  }

  function take(run, event) {
    if (run.stopped || run !== current) return;
    // An event with no id ("unavailable") ends the stream and is not a
    // place to go on from: the last real event's id stays.
    if (event.id) {
      if (run.seen.has(event.id)) return;
      run.seen.add(event.id);
      run.lastEventId = event.id;
    }
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      data = { text: event.data };
    }
    if (!data || typeof data !== "object") data = { text: String(data) };
    switch (event.event) {
      case "approval":
        showApproval(run, data);
        break;
      case "delta":
        showDelta(data);
        break;
      case "answer":
        showAnswer(run, data);
        break;
      case "end":
        showEnd(run, data);
        break;
      case "unavailable":
        $("run-state").textContent = `${data.text || "The API stopped following the run"}: reconnecting…`;
        break;
      default:
        if (STEP_NAMES.has(event.event)) showStep(event, data);
    }
  }

  function showStep(event, data) {
    const item = element("li", { className: `step step-${event.event}` });
    item.dataset.eventId = event.id || "";
    item.append(
      element("span", { className: "step-name", text: event.event }),
      " ",
      element("span", { className: "step-text", text: String(data.text ?? "") }),
    );
    $("steps").append(item);
  }

  // The model's text as it is written: the turn being written, in one block
  // that grows, each delta put where its `at` says (a delta that came again
  // changes nothing); the answer takes its place when it comes.
  function showDelta(data) {
    let block = $("answers").querySelector(".writing");
    if (!block) {
      block = element("section", { className: "writing", "aria-label": "Being written", "aria-busy": "true" });
      block.append(element("h3", { text: "Being written…" }), element("pre", { className: "writing-text" }));
      $("answers").append(block);
    }
    const shown = block.querySelector(".writing-text");
    const turn = String(data.turn ?? "");
    const before = block.dataset.turn === turn ? shown.textContent : "";
    block.dataset.turn = turn;
    const at = Number.isInteger(data.at) ? Math.min(data.at, before.length) : before.length;
    shown.textContent = before.slice(0, at) + String(data.text ?? "");
  }

  function showAnswer(run, data) {
    run.answered = true;
    $("answers").querySelector(".writing")?.remove();
    const number = typeof data.prompt === "number" ? ` to prompt ${data.prompt}` : "";
    const block = element("section", { className: "answer", "aria-label": `Answer${number}` });
    block.append(
      element("h3", { text: `Answer${number}` }),
      element("pre", { className: "answer-text", text: String(data.text ?? "") }),
    );
    const outputs = Array.isArray(data.outputs) ? data.outputs : [];
    if (outputs.length || data.patch) {
      const list = element("ul", { className: "outputs" });
      for (const each of outputs) {
        const item = element("li");
        item.append(
          element("code", { text: String(each.path ?? "") }),
          ` ${sizeText(each.size)}`,
        );
        if (each.sha256) item.append(" ", element("span", { className: "digest", text: `sha256 ${each.sha256}` }));
        list.append(item);
      }
      if (data.patch) list.append(element("li", { text: "changes.patch (the run's changes)" }));
      block.append(element("h4", { text: "Outputs" }), list);
    }
    $("answers").append(block);
    $("outputs-area").hidden = false;
    $("download").hidden = true;
    $("run-state").textContent = run.followUps ? "Answered: follow up, or end the conversation." : "Answered.";
    if (run.followUps && !run.ended) $("follow-form").hidden = false;
    for (const card of run.approvals.values()) settleApproval(card, "No longer waiting.");
  }

  function showEnd(run, data) {
    run.ended = true;
    const reason = data.reason ? `: ${data.reason}` : "";
    $("run-state").textContent = `The run ended (${data.status || "closed"})${reason}.`;
    $("follow-form").hidden = true;
    for (const card of run.approvals.values()) settleApproval(card, "The run ended.");
  }

  // ---- Approvals ----

  async function listApprovals(run) {
    try {
      const listed = await (await api(runPath(run.id, "/approvals"))).json();
      for (const request of listed.approvals || []) showApproval(run, request);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) {
        // The events bring them as well: a failed list is only noted.
        setStatus(`Could not list the approvals: ${problemText(error)}`);
      }
    }
  }

  function showApproval(run, request) {
    if (run !== current || run.approvals.has(request.call_id)) return;
    const n = ++controls;
    const card = element("article", { className: "approval", "aria-labelledby": `approval-${n}-title` });
    const detail = element("pre", { className: "approval-detail", text: String(request.detail ?? "") });
    const always = element("input", { type: "checkbox", id: `approval-${n}-always` });
    const reason = element("input", { type: "text", id: `approval-${n}-reason`, autocomplete: "off" });
    const approve = element("button", { type: "button", className: "approve", text: "Approve" });
    const reject = element("button", { type: "button", className: "reject", text: "Reject" });
    const outcome = element("p", { className: "outcome", role: "status" });
    const title = element("h3", { id: `approval-${n}-title` });
    const waiting = element("span", { text: "Waiting for you: " });
    title.append(waiting, element("code", { text: String(request.tool ?? "") }));
    const alwaysRow = element("div", { className: "check" });
    alwaysRow.append(always, element("label", { htmlFor: always.id, text: "Always (the same decision for the rest of the run)" }));
    card.append(
      title,
      element("p", { className: "help", text: `Call ${request.call_id}, asked at ${request.asked_at || "?"}. What it does, exactly:` }),
      detail,
      alwaysRow,
      element("label", { htmlFor: reason.id, text: "Reason (optional)" }),
      reason,
      element("div", { className: "buttons" }, approve, reject),
      outcome,
    );
    const entry = { card, waiting, buttons: [approve, reject], inputs: [always, reason], outcome, settled: false };
    run.approvals.set(request.call_id, entry);
    const decideWith = (yes) => decide(run, request, entry, yes, always.checked, reason.value);
    approve.addEventListener("click", () => decideWith(true));
    reject.addEventListener("click", () => decideWith(false));
    $("approvals").append(card);
    setStatus(`A request waits for your decision: ${request.tool}.`);
  }

  function settleApproval(entry, text) {
    if (entry.settled) return;
    entry.settled = true;
    for (const control of [...entry.buttons, ...entry.inputs]) control.disabled = true;
    entry.outcome.textContent = text;
    entry.waiting.textContent = "Decided: ";
    entry.card.classList.add("settled");
  }

  async function decide(run, request, entry, approve, always, reason) {
    if (!approverKey) {
      entry.outcome.textContent = "Load your approver key first (above), then decide.";
      $("key-file").focus();
      return;
    }
    for (const button of entry.buttons) button.disabled = true;
    entry.outcome.textContent = approve ? "Approving…" : "Rejecting…";
    try {
      const text = await decisionMessage({
        workflowId: run.id,
        runId: request.run_id,
        callId: request.call_id,
        tool: request.tool,
        detail: request.detail,
        approve,
        always,
        reason,
      });
      const signature = await sign(text);
      const response = await api(runPath(run.id, `/approvals/${encodeURIComponent(request.call_id)}`), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          run_id: request.run_id,
          approve,
          reason,
          always,
          approver: approverKey.publicKey,
          signature,
        }),
      });
      const answer = await response.json();
      settleApproval(entry, `Decided: ${answer.decision}.`);
      entry.card.dataset.decision = String(answer.decision);
    } catch (error) {
      entry.outcome.textContent = `Not decided: ${problemText(error)}`;
      for (const button of entry.buttons) button.disabled = false;
    }
  }

  // ---- The forms ----

  async function startRun(event) {
    event.preventDefault();
    showAlert("");
    const button = $("start-button");
    const form = new FormData();
    form.append("prompt", $("prompt").value);
    form.append("follow_ups", $("follow-ups").checked ? "true" : "false");
    for (const file of $("files").files) form.append("files", file, file.name);
    button.disabled = true;
    setStatus("Starting the run…");
    try {
      const started = await (await api("/v1/runs", { method: "POST", body: form })).json();
      setStatus(`Started run ${started.id}.`);
      $("files").value = "";
      newRun(started.id, $("follow-ups").checked);
    } catch (error) {
      setStatus("");
      showAlert(problemText(error));
    } finally {
      button.disabled = false;
    }
  }

  async function followUp(event) {
    event.preventDefault();
    const run = current;
    if (!run) return;
    showAlert("");
    const prompt = $("follow-prompt").value;
    const files = $("follow-files").files;
    let options;
    if (files.length) {
      const form = new FormData();
      form.append("prompt", prompt);
      for (const file of files) form.append("files", file, file.name);
      options = { method: "POST", body: form };
    } else {
      options = {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ prompt }),
      };
    }
    $("follow-button").disabled = true;
    try {
      const sent = await (await api(runPath(run.id, "/messages"), options)).json();
      $("follow-prompt").value = "";
      $("follow-files").value = "";
      $("follow-form").hidden = true;
      $("run-state").textContent = `Prompt ${sent.prompt} sent: following its steps…`;
    } catch (error) {
      showAlert(problemText(error));
    } finally {
      $("follow-button").disabled = false;
    }
  }

  async function endConversation() {
    const run = current;
    if (!run) return;
    showAlert("");
    $("end-button").disabled = true;
    try {
      await api(runPath(run.id, "/end"), { method: "POST" });
      $("follow-form").hidden = true;
      $("run-state").textContent = "Ending the conversation…";
    } catch (error) {
      showAlert(problemText(error));
    } finally {
      $("end-button").disabled = false;
    }
  }

  async function getOutputs() {
    const run = current;
    if (!run) return;
    showAlert("");
    const button = $("outputs-button");
    button.disabled = true;
    try {
      const blob = await (await api(runPath(run.id, "/outputs"))).blob();
      const link = $("download");
      if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
      const name = `${run.id}-outputs.tar.gz`;
      link.href = URL.createObjectURL(blob);
      link.download = name;
      link.textContent = `Download ${name} (${sizeText(blob.size)})`;
      link.hidden = false;
      link.focus();
    } catch (error) {
      showAlert(problemText(error));
    } finally {
      button.disabled = false;
    }
  }

  async function useKey(event) {
    event.preventDefault();
    showAlert("");
    const file = $("key-file").files[0];
    try {
      const pem = file ? await file.text() : $("key-pem").value;
      if (!pem.trim()) throw new Error("choose your key's file, or paste it.");
      const publicKey = await loadKey(pem);
      $("key-state").textContent = `Key loaded (public key ${publicKey}).`;
    } catch (error) {
      $("key-state").textContent = "No key loaded.";
      showAlert(`The key was not loaded: ${error.message || error}`);
    } finally {
      // The PEM is not kept in the page, only the key made from it.
      $("key-file").value = "";
      $("key-pem").value = "";
    }
  }

  function useToken(event) {
    event.preventDefault();
    const value = $("token").value.trim();
    $("token").value = "";
    if (!value) return;
    sessionStorage.setItem(TOKEN_ITEM, value);
    showAlert("");
    showTokenState();
    setStatus("Token set.");
    if (!current) watchFromAddress();
    else if (!current.following && !current.ended && !current.stopped) follow(current);
  }

  async function watchFromAddress() {
    const match = /^#run=(.+)$/.exec(location.hash);
    if (!match || !token()) return;
    const id = decodeURIComponent(match[1]);
    let followUps = false;
    try {
      const state = await (await api(runPath(id))).json();
      followUps = Boolean(state.follow_ups);
    } catch (error) {
      showAlert(problemText(error));
      return;
    }
    newRun(id, followUps);
  }

  function init() {
    $("token-form").addEventListener("submit", useToken);
    $("token-forget").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_ITEM);
      showTokenState();
      setStatus("Token forgotten.");
      $("token").focus();
    });
    $("key-form").addEventListener("submit", useKey);
    $("start-form").addEventListener("submit", startRun);
    $("follow-form").addEventListener("submit", followUp);
    $("end-button").addEventListener("click", endConversation);
    $("outputs-button").addEventListener("click", getOutputs);
    showTokenState();
    watchFromAddress();
  }

  // For the tests and the curious: the canonical form, and what is signed.
  window.sandboxAgent = Object.freeze({
    canonicalJson,
    decisionMessage,
    sha256Hex,
    loadKey,
    sign,
    // Drop the stream being read, as a network would: the page reconnects.
    dropConnection() {
      if (current && current.connection) current.connection.abort();
    },
  });

  init();
})();
