// Eggshell for OpenCode: written by `egg install opencode`; `egg uninstall opencode` removes it.
//
// OpenCode has no command hooks: a plugin is its hook mechanism. This one is a relay. Each
// plugin hook OpenCode calls becomes one payload for `egg-hook opencode` (stdin, one JSON
// object), and egg-hook's one JSON reply is applied here:
//   {"context": TEXT}  chat.message: a synthetic text part after the prompt (the model reads it,
//                      the user's text is untouched); tool.execute.after: appended to the output
//   {"deny": TEXT}     tool.execute.before: the call is not run; the model gets TEXT as the
//                      tool's error (OpenCode reports what a before hook throws)
//   {"status": TEXT}   a line for the user (a toast in the TUI)
// What each payload means, and how it maps onto Eggshell's lifecycle, is egg-hook's side
// (lib/eggshell/hosts/opencode.py). Runs are sent one at a time in the order OpenCode called the
// hooks, so a turn's answer never overtakes its tool results; OpenCode waits for the ones that
// answer (prompt, tool calls) and, on exit, for the rest (dispose).
//
// Memory must never block the agent: a missing egg-hook, a crash, a reply that is not JSON or
// a run past its time is logged by egg-hook where it can be, and here treated as no reply.

import { spawn } from "node:child_process";

const EGG_HOOK = "@EGG_HOOK@"; // filled in by `egg install opencode`
const TIMEOUT_MS = @TIMEOUT_MS@; // the longest one egg-hook run may take; then it is killed and ignored
const HOST = "opencode";

function run(payload) {
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (reply) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        resolve(reply);
      }
    };
    let child;
    try {
      child = spawn(EGG_HOOK, [HOST], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      return resolve({});
    }
    const timer = setTimeout(() => {
      try { child.kill("SIGKILL"); } catch {}
      finish({});
    }, TIMEOUT_MS);
    child.on("error", () => finish({}));
    child.stdout.on("data", (d) => { out += d; });
    child.on("close", () => {
      try {
        const reply = JSON.parse(out);
        finish(reply && typeof reply === "object" && !Array.isArray(reply) ? reply : {});
      } catch {
        finish({});
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// A part id OpenCode sorts after the prompt's own parts: "prt_", 12 hex digits of time (as its
// ids), then random letters.
let counter = 0;
function partId() {
  const t = ((BigInt(Date.now()) * 0x1000n + BigInt(++counter % 0x1000)) & 0xffffffffffffn).toString(16).padStart(12, "0");
  const abc = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  let tail = "";
  for (let i = 0; i < 14; i++) tail += abc[Math.floor(Math.random() * abc.length)];
  return "prt_" + t + tail;
}

export const Eggshell = async ({ client, directory }) => {
  let queue = Promise.resolve();
  const turns = new Map(); // session -> the id of its current user message (the turn)
  const answers = new Map(); // session -> {message, texts}: the assistant's latest text
  const denied = new Set(); // calls blocked here: their error is ours, not a result to journal
  const failed = new Set(); // calls whose error was sent (OpenCode may announce a part more than once)

  // One egg-hook run after every earlier one; resolves to its reply.
  const send = (payload) => {
    const body = { cwd: directory, ...payload, turn_id: turns.get(payload.session_id) };
    const reply = queue.then(() => run(body));
    queue = reply.catch(() => ({}));
    return reply;
  };
  const status = (reply) => {
    if (typeof reply.status === "string" && reply.status) {
      Promise.resolve()
        .then(() => client.tui.showToast({ body: { message: reply.status, variant: "info" } }))
        .catch(() => {});
    }
  };

  return {
    "chat.message": async (input, output) => {
      const message = output.message || {};
      const sessionID = input.sessionID || message.sessionID;
      if (!sessionID) return;
      if (message.id) turns.set(sessionID, message.id);
      answers.delete(sessionID);
      const parts = (output.parts || []).map((p) => ({ type: p.type, text: p.text, synthetic: p.synthetic,
                                                      mime: p.mime, filename: p.filename }));
      const reply = await send({ hook_event_name: "chat.message", session_id: sessionID, parts });
      if (typeof reply.context === "string" && reply.context) {
        output.parts.push({ id: partId(), messageID: message.id, sessionID, type: "text", text: reply.context, synthetic: true });
      }
      status(reply);
    },

    "tool.execute.before": async (input, output) => {
      const reply = await send({ hook_event_name: "tool.execute.before", session_id: input.sessionID, tool: input.tool,
                                 call_id: input.callID, args: output.args });
      status(reply);
      if (typeof reply.deny === "string" && reply.deny) {
        denied.add(input.callID);
        throw new Error(reply.deny);
      }
    },

    "tool.execute.after": async (input, output) => {
      const meta = output.metadata && typeof output.metadata === "object" ? output.metadata : {};
      const reply = await send({ hook_event_name: "tool.execute.after", session_id: input.sessionID, tool: input.tool,
                                 call_id: input.callID, args: input.args,
                                 output: { title: output.title, output: output.output, exit: meta.exit } });
      if (typeof reply.context === "string" && reply.context && typeof output.output === "string") {
        output.output += "\n\n" + reply.context;
      }
      status(reply);
    },

    "shell.env": async (input, output) => {
      // `!egg ...` and the model's commands name their chat, as Codex's CODEX_THREAD_ID does.
      if (input.sessionID) output.env.EGGSHELL_CHAT = input.sessionID;
    },

    "experimental.text.complete": async (input, output) => {
      const last = answers.get(input.sessionID);
      if (last && last.message === input.messageID) last.texts.push(output.text);
      else answers.set(input.sessionID, { message: input.messageID, texts: [output.text] });
    },

    event: async ({ event }) => {
      const props = (event && event.properties) || {};
      const sessionID = props.sessionID || (props.info && props.info.id);
      if (!sessionID) return;
      if (event.type === "session.created") {
        status(await send({ hook_event_name: "session.created", session_id: sessionID }));
      } else if (event.type === "session.compacted") {
        send({ hook_event_name: "session.compacted", session_id: sessionID });
      } else if (event.type === "session.idle") {
        const last = answers.get(sessionID);
        answers.delete(sessionID);
        send({ hook_event_name: "session.idle", session_id: sessionID, answer: last ? last.texts.join("\n") : null });
      } else if (event.type === "message.part.updated") {
        // A tool that throws (a missing file, a refused permission) never reaches tool.execute.after.
        const part = props.part || {};
        const state = part.state || {};
        if (part.type !== "tool" || state.status !== "error") return;
        if (denied.delete(part.callID) || failed.has(part.callID)) return;
        failed.add(part.callID);
        send({ hook_event_name: "tool.error", session_id: sessionID, tool: part.tool, call_id: part.callID,
               args: state.input, error: state.error });
      }
    },

    dispose: async () => {
      await queue; // `opencode run` exits once the session is idle: its Stop must land first
    },
  };
};
