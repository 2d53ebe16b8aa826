// The declarations in gitmem-thread-store.d.mts satisfy kaboo's ThreadStore with the
// real @ag-ui types, under both module resolutions a kaboo project may use.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));

for (const [module, resolution] of [["nodenext", "nodenext"], ["esnext", "bundler"]]) {
  test(`types check with --moduleResolution ${resolution}`, async () => {
    const args = [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", module,
      "--moduleResolution", resolution, "test/types-check.mts"];
    const done = await promisify(execFile)(process.execPath, args, { cwd: root }).catch((e) => e);
    assert.equal(done.code ?? 0, 0, `tsc failed:\n${done.stdout}${done.stderr}`);
  });
}
