// GitMemThreadStore against a real `gitmem serve`, called the way kaboo's runner calls
// its store. $GITMEM_CMD is how to run gitmem (default $GITMEM, else "gitmem"; e.g.
// "/path/venv/bin/python -P -m gitmem").
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { GitMemError, GitMemThreadStore } from "../gitmem-thread-store.mjs";

const GITMEM = (process.env.GITMEM_CMD || process.env.GITMEM || "gitmem").split(/\s+/).filter(Boolean);
const scratch = mkdtempSync(join(tmpdir(), "gitmem-kaboo-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let repos = 0;
function newRepo() {
  return join(scratch, `repo-${++repos}`);
}

function openStore(repo, options = {}) {
  return new GitMemThreadStore({ command: [...GITMEM, "serve", "--create", "--repo", repo, "--max-response", "0"], ...options });
}

function gitLog(repo) {
  const done = spawnSync("git", ["-C", repo, "log", "--format=%s"], { encoding: "utf8" });
  return done.stdout.trim().split("\n");
}

// One run as the runner persists it: its events, then the messages derived from them.
function run(threadId, n, state) {
  const messageId = `${threadId}-m${n}`;
  const events = [
    { type: "RUN_STARTED", threadId, runId: `${threadId}-r${n}`, timestamp: 1_700_000_000_000 + n },
    { type: "CUSTOM", name: "kaboo.message_meta", value: { messageId: `${threadId}-u${n}`, role: "user", createdAt: n } },
    { type: "TEXT_MESSAGE_START", messageId, role: "assistant" },
    ...Array.from({ length: 40 }, (_, i) => ({ type: "TEXT_MESSAGE_CONTENT", messageId, delta: `tok${i} ✓ ` })),
    { type: "TEXT_MESSAGE_END", messageId },
    { type: "ACTIVITY_SNAPSHOT", messageId: `${threadId}-a${n}`, activityType: "plan", content: { steps: [n] } },
    { type: "STATE_SNAPSHOT", snapshot: state },
    { type: "RUN_FINISHED", threadId, runId: `${threadId}-r${n}` },
  ];
  const messages = [];
  for (let i = 1; i <= n; i++) {
    messages.push({ id: `${threadId}-u${i}`, role: "user", content: `question ${i}` });
    messages.push({ id: `${threadId}-m${i}`, role: "assistant", content: `answer ${i}` });
  }
  return { events, messages };
}

test("cold start, a run and a reconnect, as kaboo's runner does them", async () => {
  const repo = newRepo();
  const history = {};
  const first = openStore(repo);
  for (const [threadId, owner] of [["support-1", "alice"], ["support-2", null]]) {
    history[threadId] = [];
    for (let n = 1; n <= 2; n++) {
      const { events, messages } = run(threadId, n, { step: n, kaboo_session: { pending: [] } });
      await first.appendEvents(threadId, "support-agent", events, owner ?? undefined);
      await first.saveMessages(threadId, messages);
      history[threadId].push(...events);
    }
  }
  await first.close();

  // cold start: a new process lists the threads and hydrates each one
  const store = openStore(repo);
  const threads = await store.listThreads();
  assert.deepEqual(threads.map((t) => [t.id, t.agentId, t.ownerId]),
    [["support-2", "support-agent", null], ["support-1", "support-agent", "alice"]]);
  assert.ok(threads[0].updatedAt > threads[1].updatedAt && threads[1].createdAt <= threads[1].updatedAt);
  for (const thread of threads) {
    assert.deepEqual(await store.readEvents(thread.id), history[thread.id]);
    assert.deepEqual(await store.readMessages(thread.id), run(thread.id, 2, null).messages);
    assert.deepEqual(await store.readState(thread.id), { step: 2, kaboo_session: { pending: [] } });
  }

  // a run: state in, events and messages out
  const pending = { kaboo_session: { pending: [{ tool: "deploy", args: { env: "prod" } }] } };
  assert.deepEqual(await store.readState("support-1"), { step: 2, kaboo_session: { pending: [] } });
  const third = run("support-1", 3, pending);
  await store.appendEvents("support-1", "support-agent", third.events);
  await store.saveMessages("support-1", third.messages);
  history["support-1"].push(...third.events);
  assert.deepEqual(await store.readState("support-1"), pending);
  assert.deepEqual((await store.listThreads()).map((t) => t.id), ["support-1", "support-2"]);
  assert.deepEqual((await store.listThreads({ ownerId: "alice" })).map((t) => t.id), ["support-1"]);
  assert.deepEqual((await store.listThreads({ ownerId: null })).map((t) => t.id), ["support-2"]);
  assert.deepEqual((await store.listThreads({ ownerId: undefined })).length, 2);

  // a reconnect replays the whole log
  assert.deepEqual(await store.readEvents("support-1"), history["support-1"]);
  assert.equal(gitLog(repo)[0], "threads: save 6 messages of support-1");
  await store.close();
});

test("calls in flight are matched to their answers", async () => {
  const store = openStore(newRepo());
  const ids = Array.from({ length: 20 }, (_, i) => `t${i}`);
  await Promise.all(ids.map((id, i) =>
    store.appendEvents(id, "agent", [{ type: "STATE_SNAPSHOT", snapshot: { i } }])));
  const states = await Promise.all(ids.map((id) => store.readState(id)));
  assert.deepEqual(states, ids.map((_, i) => ({ i })));
  const big = Array.from({ length: 3000 }, (_, i) => ({ type: "CUSTOM", i, pad: "é".repeat(300) }));
  const [events, none, listed] = await Promise.all([
    store.appendEvents("big", "agent", big).then(() => store.readEvents("big")),
    store.readEvents("nothing-here"),
    store.listThreads(),
  ]);
  assert.deepEqual(events, big);
  assert.deepEqual(none, []);
  assert.equal(listed.length >= 20, true);
  await store.close();
});

test("errors surface as rejected promises and the store keeps working", async () => {
  const repo = newRepo();
  const store = openStore(repo);
  await assert.rejects(store.appendEvents("t1", "agent", "not a list"),
    (error) => error instanceof GitMemError && error.code === -32602 && /"events"/.test(error.message)
      && error.method === "threads.appendEvents");
  await assert.rejects(store.saveMessages("t1", [42]), { name: "GitMemError", code: -32602 });
  await assert.rejects(store.readEvents(undefined), /missing param "threadId"/);
  await assert.rejects(store.clear(null), TypeError);
  await assert.rejects(store.appendEvents("t1", "agent", [{ type: "CUSTOM", value: 10n }]), TypeError);
  await store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
  assert.deepEqual(await store.readEvents("t1"), [{ type: "RUN_STARTED" }]);
  await store.close();
  await assert.rejects(store.readEvents("t1"), /closed/);

  const missing = new GitMemThreadStore({ command: [join(scratch, "no-such-gitmem"), "serve"] });
  await assert.rejects(missing.listThreads(), /could not be run.*ENOENT/);
  await assert.rejects(missing.listThreads(), /could not be run/); // tried again, not stuck
  const failing = openStore(newRepo(), { command: [...GITMEM, "serve", "--no-such-option"] });
  await assert.rejects(failing.listThreads(), /exited with code 2: .*no-such-option/);
});

test("a log line committed with plain git that is not JSON is left out of reads and kept in its file", async () => {
  const repo = newRepo();
  const store = openStore(repo);
  await store.appendEvents("good", "agent", [{ type: "RUN_STARTED" }]);
  mkdirSync(join(repo, "threads", "bad", "events"), { recursive: true });
  writeFileSync(join(repo, "threads", "bad", "events", "000000.jsonl"), '{"type":"RUN_STARTED"}\nnot json\n');
  const git = (...args) => spawnSync("git", ["-C", repo, "-c", "user.name=T", "-c", "user.email=t@example.org", ...args]);
  assert.equal(git("add", "threads/bad").status, 0);
  assert.equal(git("commit", "-q", "-m", "a bad hand commit").status, 0);
  assert.deepEqual(await store.readEvents("bad"), [{ type: "RUN_STARTED" }]);
  await store.appendEvents("bad", "agent", [{ type: "RUN_FINISHED" }]);
  assert.deepEqual(await store.readEvents("bad"), [{ type: "RUN_STARTED" }, { type: "RUN_FINISHED" }]);
  assert.equal(git("show", "HEAD:threads/bad/events/000000.jsonl").stdout.toString(),
    '{"type":"RUN_STARTED"}\nnot json\n{"type":"RUN_FINISHED"}\n');
  assert.deepEqual(await store.readEvents("good"), [{ type: "RUN_STARTED" }]);
  await store.close();
});

test("calls in flight when the child dies are sent again to a new one; a write is committed once", async () => {
  const repo = newRepo();
  const store = openStore(repo);
  const approved = (yes) => ({ type: "STATE_SNAPSHOT", snapshot: { approved: yes } });
  await store.appendEvents("t1", "agent", [approved(false)]);
  const firstPid = store.pid;
  process.kill(firstPid, "SIGSTOP"); // so that it cannot answer before it dies
  const writing = store.appendEvents("t1", "agent", [approved(true)]);
  const reading = store.readEvents("t1");
  process.kill(firstPid, "SIGKILL");
  await writing;
  assert.equal((await reading).length >= 1, true);
  assert.notEqual(store.pid, firstPid);
  assert.deepEqual(await store.readEvents("t1"), [approved(false), approved(true)]);
  assert.match(spawnSync("git", ["-C", repo, "log", "-1", "--format=%B"], { encoding: "utf8" }).stdout,
    /^Gitmem-Request: [0-9a-f-]{36}$/m); // the key a second sending would be known by
  await store.close();
});

test("a hung gitmem serve is killed when a call times out, and the next call gets a new one", async () => {
  const store = openStore(newRepo(), { timeoutMs: 3000 });
  await store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
  const hung = store.pid;
  process.kill(hung, "SIGSTOP");
  try {
    await assert.rejects(store.readEvents("t1"), (error) => error instanceof GitMemError
      && error.message === `threads.readEvents: no answer from gitmem serve within 3000 ms; it was killed (pid ${hung}) `
        + "and the next call starts a new one");
    assert.deepEqual(await store.readEvents("t1"), [{ type: "RUN_STARTED" }]);
    assert.notEqual(store.pid, hung);
  } finally {
    try { process.kill(hung, "SIGKILL"); } catch {} // already gone, when the store did it
  }
  await store.close();
});

test("a start that failed is tried again by the next call, once the cause is fixed", async () => {
  const repo = newRepo();
  const git = (...args) => spawnSync("git", ["-C", repo, "-c", "user.name=T", "-c", "user.email=t@example.org", ...args]);
  mkdirSync(repo);
  assert.equal(git("init", "-q", "-b", "main").status, 0);
  writeFileSync(join(repo, "main.py"), "print('the user\'s code')\n");
  assert.equal(git("add", "main.py").status, 0);
  assert.equal(git("commit", "-q", "-m", "code").status, 0);
  const store = openStore(repo);
  await assert.rejects(store.listThreads(), /init --adopt/); // a repository gitmem did not make
  assert.equal(spawnSync(GITMEM[0], [...GITMEM.slice(1), "init", "--adopt", repo]).status, 0);
  assert.deepEqual(await store.listThreads(), []);
  await store.close();
});

test("a GITMEM that is not gitmem is named in the error", async () => {
  const store = new GitMemThreadStore({ repo: newRepo(), env: { ...process.env, GITMEM: "/bin/true" } });
  const notGitmem = "GITMEM=/bin/true did not answer as gitmem serve (gitmem serve exited with code 0); "
    + "GITMEM must be the path of the gitmem executable, e.g. /path/to/venv/bin/gitmem";
  await assert.rejects(store.listThreads(), { name: "GitMemError", message: notGitmem });
  await assert.rejects(store.ready(), { message: notGitmem }); // tried again, and named again
  await store.close();
  const option = new GitMemThreadStore({ repo: newRepo(), gitmem: "/bin/true" });
  await assert.rejects(option.listThreads(), { message: notGitmem.replaceAll("GITMEM=/bin/true", '{ gitmem: "/bin/true" }')
    .replace("GITMEM must", "the gitmem option must") });
  await option.close();
});

test("close() lets pending calls finish and stops the child", async () => {
  const repo = newRepo();
  const store = openStore(repo);
  const write = store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
  const pid = store.pid;
  await store.close();
  await write;
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" });
  const again = openStore(repo);
  assert.deepEqual(await again.readEvents("t1"), [{ type: "RUN_STARTED" }]);
  await again.close();
});

test("an idle store does not keep node running", async () => {
  const adapter = fileURLToPath(new URL("../gitmem-thread-store.mjs", import.meta.url));
  const script = `
    import { GitMemThreadStore } from ${JSON.stringify(adapter)};
    const store = new GitMemThreadStore({ command: ${JSON.stringify([...GITMEM, "serve", "--create", "--repo", newRepo()])} });
    await store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
    console.log(JSON.stringify(await store.readEvents("t1")));
  `;
  const done = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script],
    { timeout: 20_000 });
  assert.equal(done.stdout.trim(), '[{"type":"RUN_STARTED"}]');
});
