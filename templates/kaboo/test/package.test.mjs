// gitmem-kaboo as a TypeScript user gets it: installed into a throwaway project by path
// and from `npm pack`'s tarball (offline: the package has no dependencies), built with
// plain tsc, run with node; gitmem found through $GITMEM with gitmem off PATH; one
// `gitmem serve` per repository; the version handshake. $GITMEM is the gitmem
// executable to test (e.g. /path/to/venv/bin/gitmem). npm is the one on PATH (with its
// own node): the projects are built and run with the node running these tests.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { GITMEM_VERSION, GitMemError, GitMemThreadStore } from "../gitmem-thread-store.mjs";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const GITMEM = process.env.GITMEM;
const needsGitmem = GITMEM ? {} : { skip: "set GITMEM=/path/to/venv/bin/gitmem to run it" };
const scratch = mkdtempSync(join(tmpdir(), "gitmem-kaboo-package-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const SYSTEM_PATH = "/usr/bin:/bin"; // node, git and a shell; no gitmem (checked below)

let made = 0;
function folder(name) {
  const path = join(scratch, `${++made}-${name}`);
  mkdirSync(path, { recursive: true });
  return path;
}

function writeFiles(base, files) {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(base, name)), { recursive: true });
    writeFileSync(join(base, name), typeof text === "string" ? text : JSON.stringify(text, null, 2));
  }
}

async function npmInstall(project, what) {
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", what],
    { cwd: project, env: { ...process.env, npm_config_update_notifier: "false" }, timeout: 120_000 });
}

async function build(project, args = ["-p", "."]) {
  const done = await run(process.execPath, [tsc, ...args], { cwd: project, timeout: 120_000 }).catch((e) => e);
  assert.equal(done.code ?? 0, 0, `tsc ${args.join(" ")} failed in ${project}:\n${done.stdout}${done.stderr}`);
}

/** Run `node FILE REPO` with gitmem off PATH and only $GITMEM to find it. */
async function runApp(project, file, repo) {
  const done = await run(process.execPath, [file, repo], {
    cwd: project, timeout: 60_000, env: { PATH: SYSTEM_PATH, HOME: process.env.HOME, GITMEM },
  });
  return done.stdout.trim();
}

const APP_TS = `import { GitMemError, GitMemThreadStore, type BaseEvent } from "gitmem-kaboo";
declare const process: { argv: string[] };

export async function main(repo: string): Promise<string> {
  const store = new GitMemThreadStore({ repo, create: true });
  const events: BaseEvent[] = [{ type: "RUN_STARTED", runId: "r1" }, { type: "RUN_FINISHED" }];
  await store.appendEvents("t1", "planner", events, "alice");
  const back: BaseEvent[] = await store.readEvents("t1");
  const threads = await store.listThreads({ ownerId: "alice" });
  await store.close();
  return JSON.stringify({ back, threads: threads.map((t) => t.id), error: new GitMemError("x").name });
}
`;
const EXPECTED = JSON.stringify({
  back: [{ type: "RUN_STARTED", runId: "r1" }, { type: "RUN_FINISHED" }], threads: ["t1"], error: "GitMemError",
});

function tsconfig(module, moduleResolution, extra = {}) {
  return {
    compilerOptions: { module, moduleResolution, target: "es2022", strict: true, outDir: "dist", rootDir: "src",
      skipLibCheck: false, ...extra },
    include: ["src"],
  };
}

test("gitmem is not on the PATH the built apps run with", () => {
  for (const folder of SYSTEM_PATH.split(":")) assert.equal(existsSync(join(folder, "gitmem")), false, folder);
});

test("installed by path, an ES module project built with plain tsc (NodeNext) runs as built", needsGitmem, async () => {
  const project = folder("esm-app");
  writeFiles(project, {
    "package.json": { name: "esm-app", private: true, type: "module" },
    "tsconfig.json": tsconfig("nodenext", "nodenext"),
    "src/app.ts": `${APP_TS}\nconsole.log(await main(process.argv[2]!));\n`,
  });
  await npmInstall(project, root);
  await build(project);
  assert.deepEqual(readdirSync(join(project, "dist")), ["app.js"]);
  assert.equal(await runApp(project, "dist/app.js", join(project, "memory")), EXPECTED);
  // Node16 and bundler resolution type-check the same source against the installed package
  await build(project, ["-p", ".", "--noEmit", "--module", "node16", "--moduleResolution", "node16"]);
  await build(project, ["-p", ".", "--noEmit", "--module", "esnext", "--moduleResolution", "bundler"]);
});

test("from npm pack's tarball, a CommonJS project built with plain tsc runs as built, and require() works",
  needsGitmem, async () => {
    const packed = folder("packed");
    const done = await run("npm", ["pack", "--pack-destination", packed, "--loglevel=error"],
      { cwd: root, timeout: 120_000 });
    const tarball = join(packed, done.stdout.trim().split("\n").pop());
    assert.match(tarball, /gitmem-kaboo-\d+\.\d+\.\d+\.tgz$/);
    const listed = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).trim().split("\n").sort();
    assert.deepEqual(listed, ["package/gitmem-thread-store.cjs", "package/gitmem-thread-store.d.cts",
      "package/gitmem-thread-store.d.mts", "package/gitmem-thread-store.mjs", "package/package.json"]);

    const project = folder("cjs-app");
    writeFiles(project, {
      "package.json": { name: "cjs-app", private: true, type: "commonjs" },
      "tsconfig.json": tsconfig("nodenext", "nodenext"),
      "src/app.ts": `${APP_TS}\nmain(process.argv[2]!).then((out) => console.log(out));\n`,
      "plain.cjs": `const { GitMemThreadStore } = require("gitmem-kaboo");
        const store = new GitMemThreadStore({ repo: process.argv[2] });
        store.readEvents("t1").then((events) => { console.log(JSON.stringify(events)); return store.close(); });\n`,
    });
    await npmInstall(project, tarball);
    assert.equal(existsSync(join(project, "node_modules", "gitmem-kaboo", "test")), false); // a copy, not a link
    await build(project);
    assert.match(readFileSync(join(project, "dist", "app.js"), "utf8"), /require\("gitmem-kaboo"\)/);
    const repo = join(project, "memory");
    assert.equal(await runApp(project, "dist/app.js", repo), EXPECTED);
    assert.equal(await runApp(project, "plain.cjs", repo), JSON.stringify(JSON.parse(EXPECTED).back));
    await build(project, ["-p", ".", "--noEmit", "--module", "node16", "--moduleResolution", "node16"]);
    // import and require in one process get the same classes
    const required = createRequire(join(project, "plain.cjs"))("gitmem-kaboo");
    const imported = await import(join(project, "node_modules", "gitmem-kaboo", "gitmem-thread-store.mjs"));
    assert.equal(imported.GitMemThreadStore, required.GitMemThreadStore);
  });

function gitmemChildren() {
  let out = "";
  try {
    out = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(process.pid)], { encoding: "utf8" });
  } catch {} // ps exits 1 when there is none
  return out.split("\n").filter((line) => / serve --repo /.test(line)).map((line) => Number(line.trim().split(" ")[0]));
}

test("stores on one repository share one gitmem serve; the last close() ends it", needsGitmem, async () => {
  const repo = join(folder("shared"), "memory");
  const before = gitmemChildren().length;
  const first = new GitMemThreadStore({ repo, create: true, gitmem: GITMEM });
  await first.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
  const second = new GitMemThreadStore({ repo: `${repo}/./`, create: true, gitmem: GITMEM });
  const other = new GitMemThreadStore({ repo: `${repo}-other`, create: true, gitmem: GITMEM });
  assert.equal(second.pid, first.pid); // running already, before its first call
  assert.deepEqual(await second.readEvents("t1"), [{ type: "RUN_STARTED" }]);
  await other.listThreads();
  assert.notEqual(other.pid, first.pid);
  assert.deepEqual(gitmemChildren().sort(), [first.pid, other.pid].sort());
  assert.equal(gitmemChildren().length, before + 2);
  const pid = first.pid;
  await first.close();
  await assert.rejects(first.readEvents("t1"), /closed/);
  assert.deepEqual(await second.readEvents("t1"), [{ type: "RUN_STARTED" }]); // still served, same child
  assert.equal(second.pid, pid);
  await second.close();
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" });
  await other.close();
  assert.equal(gitmemChildren().length, before);
});

test("two stores never closed: node exits, and so does their one gitmem serve", needsGitmem, async () => {
  const adapter = join(root, "gitmem-thread-store.cjs");
  const script = `
    const { GitMemThreadStore } = require(${JSON.stringify(adapter)});
    const repo = process.argv[1];
    (async () => {
      const first = new GitMemThreadStore({ repo, create: true });
      await first.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);
      const second = new GitMemThreadStore({ repo, create: true });
      await second.readEvents("t1");
      console.log(JSON.stringify([first.pid, second.pid]));
    })();`;
  const done = await run(process.execPath, ["-e", script, join(folder("unclosed"), "memory")],
    { timeout: 30_000, env: { ...process.env, GITMEM } });
  const [first, second] = JSON.parse(done.stdout);
  assert.equal(first, second);
  for (let waited = 0; waited < 30_000; waited += 100) { // its input ended with node: it finishes and exits
    try {
      process.kill(first, 0);
    } catch (error) {
      assert.equal(error.code, "ESRCH");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`gitmem serve ${first} outlived node by 30 s`);
});

test("a 5 MB event round-trips, whatever the command says of the answer cap", needsGitmem, async () => {
  const repo = join(folder("big"), "memory");
  const big = { type: "CUSTOM", name: "upload", value: "é🎉".repeat(5 * 1024 * 1024 / 6) + "x".repeat(1024) };
  // the command nui would run: its 4 MiB cap applies to storage.*, never to threads.*
  const store = new GitMemThreadStore({ command: [GITMEM, "serve", "--create", "--repo", repo] });
  await store.appendEvents("big", "agent", [big]);
  const back = await store.readEvents("big");
  assert.ok(Buffer.byteLength(JSON.stringify(back)) > 5_000_000);
  assert.deepEqual(back, [big]);
  await store.saveMessages("big", [{ id: "m1", role: "user", content: big.value }]);
  assert.equal((await store.readMessages("big"))[0].content, big.value);
  await store.close();
});

test("with gitmem nowhere, the constructor throws, naming GITMEM and the gitmem option", () => {
  const empty = folder("no-gitmem");
  const error = (() => {
    try {
      new GitMemThreadStore({ repo: join(empty, "memory"), env: { PATH: empty } });
    } catch (caught) {
      return caught;
    }
  })();
  assert.ok(error instanceof GitMemError, String(error));
  assert.match(error.message, /^gitmem not found: .*GITMEM=\/path\/to\/venv\/bin\/gitmem.*\{ gitmem: /);
  assert.throws(() => new GitMemThreadStore({ repo: "x", env: { PATH: empty, GITMEM: join(empty, "gitmem") } }),
    (e) => e instanceof GitMemError && e.message.startsWith(`GITMEM=${join(empty, "gitmem")}: no such file`));
  writeFileSync(join(empty, "gitmem"), "not a program\n");
  assert.throws(() => new GitMemThreadStore({ repo: "x", gitmem: join(empty, "gitmem") }),
    /^GitMemError: \{ gitmem: ".*" \}: not an executable file/);
});

/** A real gitmem serve that reports `version` (the installed gitmem, its version changed). */
function gitmemOfVersion(version) {
  const python = readFileSync(GITMEM, "utf8").split("\n")[0].replace(/^#!/, "").trim();
  const file = join(folder(`gitmem-${version}`), "gitmem");
  writeFileSync(file, `#!/bin/sh\nexec ${JSON.stringify(python)} -P -c '
import sys, gitmem
gitmem.__version__ = sys.argv.pop(1)
from gitmem.cli import main
sys.exit(main())' ${version} "$@"\n`);
  chmodSync(file, 0o755);
  return file;
}

test("a gitmem of another version gives one error naming both versions and the command that updates",
  GITMEM && readFileSync(GITMEM, "utf8").startsWith("#!/") ? {} : { skip: "$GITMEM is not a Python console script" },
  async () => {
    const [major, minor] = GITMEM_VERSION.split(".").map(Number);
    const repo = join(folder("versions"), "memory");
    const newer = gitmemOfVersion(`${major}.${minor + 1}.0`);
    const store = new GitMemThreadStore({ repo, create: true, gitmem: newer });
    const says = new RegExp(`^gitmem-kaboo ${GITMEM_VERSION} needs gitmem ${major}\\.${minor}\\.x, but ${newer} `
      + `is gitmem ${major}\\.${minor + 1}\\.0: update this adapter .*npm install "\\$\\(${newer} kaboo path\\)"`);
    await assert.rejects(store.ready(), (e) => e instanceof GitMemError && says.test(e.message));
    await assert.rejects(store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]), (e) => says.test(e.message));
    assert.equal(existsSync(join(repo, "threads")), false);
    await store.close();

    const older = gitmemOfVersion(minor > 0 ? `${major}.${minor - 1}.9` : `${major - 1}.99.0`);
    const old = new GitMemThreadStore({ repo, create: true, gitmem: older });
    await assert.rejects(old.listThreads(), (e) => e instanceof GitMemError && e.message.includes(
      `but ${older} is gitmem ${minor > 0 ? `${major}.${minor - 1}.9` : `${major - 1}.99.0`}: update gitmem where it is installed (`)
      && /install --upgrade gitmem/.test(e.message));
    await old.close();

    const same = new GitMemThreadStore({ repo, create: true, gitmem: gitmemOfVersion(`${major}.${minor}.99`) });
    await same.ready(); // another patch release works
    assert.deepEqual(await same.listThreads(), []);
    await same.close();
  });
