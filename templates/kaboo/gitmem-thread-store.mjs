// GitMemThreadStore: kaboo's ThreadStore kept in a gitmem repository (plain git).
//
// It runs `gitmem serve --repo PATH` as a child process and speaks newline-delimited
// JSON-RPC 2.0 with it (`threads.*`). Every write is one git commit, answered once
// it exists. No dependencies, no build step: Node 18+, ES module.
//
//   import { createKabooRunner } from "@pgege/kaboo-runtime";
//   import { GitMemThreadStore } from "./gitmem-thread-store.mjs";
//   const runner = createKabooRunner(new GitMemThreadStore({ repo: "/srv/agent-memory" }));
//
// Copied into projects by `gitmem kaboo init DIR`; types in gitmem-thread-store.d.mts.

import { spawn } from "node:child_process";

/** A call that failed: a JSON-RPC error from gitmem serve, or the child going away. */
export class GitMemError extends Error {
  constructor(message, { code, data, method } = {}) {
    super(message);
    this.name = "GitMemError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

const STDERR_TAIL = 4096; // bytes of the child's stderr kept for error messages
const CLOSE_GRACE_MS = 5000; // after end of input, before SIGTERM (and as long again before SIGKILL)

export class GitMemThreadStore {
  #command;
  #spawnOptions;
  #timeoutMs;
  #server = null; // the running child and its state, or null
  #pending = new Map(); // request id -> { resolve, reject, method, timer, server }
  #nextId = 1;
  #closed = false;

  /**
   * @param {{ repo?: string, command?: string[], cwd?: string,
   *           env?: Record<string, string | undefined>, timeoutMs?: number }} options
   *   `repo`: the repository (created when missing); `command`: what to run instead of
   *   `["gitmem", "serve", "--repo", repo, "--max-response", "0"]`; `timeoutMs`: per call (default 120000, 0: none).
   */
  constructor({ repo, command, cwd, env, timeoutMs = 120_000 } = {}) {
    if (command === undefined && typeof repo !== "string") {
      throw new TypeError("GitMemThreadStore needs { repo: PATH } or { command: [...] }");
    }
    this.#command = command ?? ["gitmem", "serve", "--repo", repo, "--max-response", "0"];
    this.#spawnOptions = { cwd, env: env ?? process.env };
    this.#timeoutMs = timeoutMs;
  }

  /** The pid of the running `gitmem serve`, or undefined when none runs. */
  get pid() {
    return this.#server?.child.pid;
  }

  async appendEvents(threadId, agentId, events, ownerId) {
    await this.#call("threads.appendEvents", { threadId, agentId, events, ownerId });
  }

  async readEvents(threadId) {
    return (await this.#call("threads.readEvents", { threadId })).events;
  }

  async readState(threadId) {
    return (await this.#call("threads.readState", { threadId })).state;
  }

  async saveMessages(threadId, messages) {
    await this.#call("threads.saveMessages", { threadId, messages });
  }

  async readMessages(threadId) {
    return (await this.#call("threads.readMessages", { threadId })).messages;
  }

  async listThreads(filter) {
    // An undefined ownerId disappears in JSON: no filter. A null one stays: no owner.
    return (await this.#call("threads.list", { filter: { ownerId: filter?.ownerId } })).threads;
  }

  async clear(threadId) {
    if (threadId !== undefined && typeof threadId !== "string") {
      throw new TypeError("clear(threadId): threadId must be a string, or omitted to clear all");
    }
    await this.#call("threads.clear", { threadId });
  }

  /** Let `gitmem serve` answer what it was sent, then stop it. Later calls are rejected. */
  async close() {
    this.#closed = true;
    const server = this.#server;
    if (!server) return;
    server.setRef(true);
    server.child.stdin.end();
    const escalate = setTimeout(() => {
      server.child.kill("SIGTERM");
      setTimeout(() => server.child.kill("SIGKILL"), CLOSE_GRACE_MS).unref();
    }, CLOSE_GRACE_MS);
    await server.closed;
    clearTimeout(escalate);
  }

  #call(method, params) {
    if (this.#closed) {
      return Promise.reject(new GitMemError("GitMemThreadStore is closed", { method }));
    }
    const id = this.#nextId++;
    const line = JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
    const server = this.#server ?? this.#start();
    return new Promise((resolve, reject) => {
      const timer = this.#timeoutMs > 0
        ? setTimeout(() => this.#settle(id, new GitMemError(
            `${method}: no answer from gitmem serve within ${this.#timeoutMs} ms`, { method })),
          this.#timeoutMs)
        : null;
      this.#pending.set(id, { resolve, reject, method, timer, server });
      server.setRef(true);
      server.child.stdin.write(line);
    });
  }

  #settle(id, error, result) {
    const call = this.#pending.get(id);
    if (!call) return; // timed out already, or answered twice
    this.#pending.delete(id);
    if (call.timer) clearTimeout(call.timer);
    if (![...this.#pending.values()].some((other) => other.server === call.server)) {
      call.server.setRef(false); // idle: do not keep the user's process alive
    }
    if (error) call.reject(error);
    else call.resolve(result);
  }

  #start() {
    const [file, ...args] = this.#command;
    const child = spawn(file, args, { ...this.#spawnOptions, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    let partial = [];
    let ended = false;
    let markClosed;
    const server = {
      child,
      closed: new Promise((resolve) => { markClosed = resolve; }),
      setRef: (on) => {
        for (const handle of [child, child.stdin, child.stdout, child.stderr]) {
          if (on) handle?.ref?.();
          else handle?.unref?.();
        }
      },
    };
    const end = (why) => {
      if (ended) return;
      ended = true;
      if (this.#server === server) this.#server = null;
      const tail = stderr.trim().split("\n").pop();
      const message = `gitmem serve ${why}${tail ? `: ${tail}` : ""}`;
      for (const [id, call] of this.#pending) {
        if (call.server === server) this.#settle(id, new GitMemError(message, { method: call.method }));
      }
      markClosed();
    };
    child.stdout.on("data", (chunk) => {
      let start = 0;
      let newline;
      while ((newline = chunk.indexOf(10, start)) !== -1) {
        partial.push(chunk.subarray(start, newline));
        this.#answer(Buffer.concat(partial).toString("utf8"));
        partial = [];
        start = newline + 1;
      }
      if (start < chunk.length) partial.push(chunk.subarray(start));
    });
    child.stderr.on("data", (chunk) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    child.stdin.on("error", () => {}); // a dead child: its "close" rejects the calls
    child.on("error", (error) => end(`could not be run (${this.#command.join(" ")}): ${error.message}`));
    child.on("close", (code, signal) => end(signal ? `was killed by ${signal}` : `exited with code ${code}`));
    this.#server = server;
    return server;
  }

  #answer(line) {
    let answer;
    try {
      answer = JSON.parse(line);
    } catch (error) {
      // Stored data that is not JSON (a bad commit made with plain git) fails its call only.
      const id = /^\{"jsonrpc":"2\.0","id":(\d+),/.exec(line)?.[1];
      if (id !== undefined) {
        const method = this.#pending.get(Number(id))?.method;
        this.#settle(Number(id), new GitMemError(`gitmem serve's answer is not JSON: ${error.message}`, { method }));
      }
      return;
    }
    if (answer?.error) {
      const call = this.#pending.get(answer.id);
      const { code, message, data } = answer.error;
      this.#settle(answer.id, new GitMemError(String(message), { code, data, method: call?.method }));
    } else {
      this.#settle(answer?.id, null, answer?.result);
    }
  }
}
